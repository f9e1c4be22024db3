import Foundation
import SignalTools
import TestSupport
import XCTest

/// The suite's echo figure: ERLE over time on the rig, far-end speech only, from the raw and the
/// processed microphone of one run (intercomd in local mode), with the canceller on and bypassed.
final class SuiteEchoTests: XCTestCase {
    /// 10·log10 of raw over processed energy per window; windows where the raw microphone is quiet
    /// (pauses in the far-end speech) are left out.
    private func erle(raw: [Float], processed: [Float], window: Int) -> [Double?] {
        stride(from: 0, to: min(raw.count, processed.count) - window + 1, by: window).map { start in
            var r = 0.0, p = 0.0
            for i in start..<(start + window) {
                r += Double(raw[i] * raw[i])
                p += Double(processed[i] * processed[i])
            }
            guard r / Double(window) > 1e-6 else { return nil }  // below -60 dBFS: a pause
            return 10 * log10(r / max(p, 1e-12))
        }
    }

    private func run(seconds: Double, echo: Bool) throws -> [Double?] {
        let dir = try Repo.scratchFolder("suite-echo")
        let config = try DaemonProcess.writeRoomConfig("roomC", extra: "[echo]\nenabled = \(echo)", audio: "buffer_periods = 4")
        let d = try DaemonProcess(arguments: [
            "--config", config, "--far-end", try Speech.farEnd(),
            "--record", "\(dir)/processed.wav", "--record-raw", "\(dir)/raw.wav", "--duration", "\(seconds)",
        ])
        let status = d.wait(timeout: seconds + 15)
        XCTAssertEqual(status, 0, d.log)
        let raw = try WAVAudio.read(path: "\(dir)/raw.wav").floats()
        let processed = try WAVAudio.read(path: "\(dir)/processed.wav").floats()
        return erle(raw: raw, processed: processed, window: 48_000)
    }

    func testSuiteERLEOverTimeOnTheRig() throws {
        let mode = try SuiteMode.require()
        try Rig.require()
        let seconds = mode.isSmoke ? 5.0 : 30.0
        let on = try run(seconds: seconds, echo: true)
        let off = try run(seconds: mode.isSmoke ? 3 : 10, echo: false)
        let measured = on.compactMap { $0 }
        XCTAssertFalse(measured.isEmpty, "ERLE was measured")
        func cell(_ v: Double??) -> String { (v ?? nil).map { String(format: "%.1f dB", $0) } ?? "pause" }
        SuiteMode.emit("### Echo: ERLE over time on the rig (intercomd in local mode, far-end speech, raw vs processed microphone per 1 s)")
        SuiteMode.emit("")
        SuiteMode.emitTable(intro: "Echo return loss enhancement: how much quieter the far end's echo is after the canceller. Higher is better; goal ≥ 20 dB once converged (the audio core issue), reached within the first seconds. The bypassed run shows what the measure reads without cancellation (≈ 0 dB).",
                            columns: ["second", "canceller on", "bypassed"])
        for s in 0..<on.count {
            SuiteMode.emit("| \(s + 1) | \(cell(on[s])) | \(s < off.count ? cell(off[s]) : "") |")
        }
        let converged = on.dropFirst(3).compactMap { $0 }.sorted()
        if !converged.isEmpty {
            SuiteMode.emit("")
            SuiteMode.emit(String(format: "Median from second 4: %.1f dB (goal ≥ 20 dB: %@); lowest %.1f dB.",
                                  converged[converged.count / 2], converged[converged.count / 2] >= 20 ? "met" : "not met", converged.first!))
        }
        SuiteMode.emit("")
    }
}
