import Foundation
import SignalTools
import TestSupport
import XCTest

/// The echo path moves while the canceller runs: the whole daemon stops for a moment (SIGSTOP,
/// SIGCONT: a starved VM, a paging storm), the sound server plays silence meanwhile and keeps
/// the capture, and afterwards the echo comes back later than before, usually without an xrun
/// (the rig's silent starvation; a USB card that comes back with another latency does the same).
/// Either way, after a restart or a silent move, the canceller must be back to its ERLE within
/// 2 s of the stop's end.
final class EchoPathJumpTests: XCTestCase {
    let rate = 48_000
    /// Seconds after the start at which the daemon stops, and the run's length after the stop.
    let stopAt = 9.0, runAfter = 7.0
    /// How long it stops, per attempt (a spoiled attempt is repeated with a longer stop, in case
    /// its stop did not move the path).
    let stopsMs = [200, 300, 400, 300, 400]
    /// The linear filter alone (no gate, no suppressor) on natural speech reaches 18-23 dB here
    /// in the first seconds: converged means at least 15 dB before the stop, and after it again
    /// within 3 dB of what it was before (medians over the active 20 ms frames).
    static let convergedDB = 15.0
    static let regainedWithinDB = 3.0
    /// The issue's goal, for a restart (the filter is kept; held while the delay is measured when
    /// the path moved) and for a silent move (the filter is held until the estimator has measured
    /// the delay in the new pairing, searched from its first half second; a move that does not
    /// cancel at once is held for the next measurement: the rig's path may still be moving).
    static let reconvergeSeconds = 2.0

    func testTheCancellerConvergesAgainWithin2sAfterTheEchoPathMoves() throws {
        try Rig.require()
        var attempt = 0
        try measureWithRetries("echo path jump", attempts: stopsMs.count, daemonXrunsExpected: true) { c in
            attempt += 1
            if attempt > 1 { try Rig.restart() }
            return [try measureJump(c, stopMs: stopsMs[attempt - 1])]
        }
    }

    private func measureJump(_ c: Checks, stopMs: Int) throws -> DaemonProcess {
        let dir = try Repo.scratchFolder("echo-jump")
        let config = try DaemonProcess.writeRoomConfig("roomC", extra: "[echo]\nenabled = true\nresidual_gate = false\necho_suppress_db = 0\necho_suppress_active_db = 0\n[log]\nstats_interval_s = 0.5", audio: "buffer_periods = 4")
        let d = try DaemonProcess(arguments: [
            "--config", config, "--far-end", try Speech.naturalFarEnd(),
            "--record", "\(dir)/processed.wav", "--record-raw", "\(dir)/raw.wav",
        ])
        XCTAssertTrue(d.waitUntilRunning(timeout: 10), d.log)
        Thread.sleep(forTimeInterval: stopAt)
        kill(d.process.processIdentifier, SIGSTOP)
        usleep(UInt32(stopMs * 1000))
        kill(d.process.processIdentifier, SIGCONT)
        Thread.sleep(forTimeInterval: runAfter)
        XCTAssertEqual(d.terminate(), 0, d.log)
        // Both recordings start with the same frame; the raw one may hold the last frame alone.
        var raw = try WAVAudio.read(path: "\(dir)/raw.wav").floats()
        let processed = try WAVAudio.read(path: "\(dir)/processed.wav").floats()
        raw = Array(raw.prefix(processed.count))
        let far = try WAVAudio.read(path: try Speech.naturalFarEnd()).floats()
        guard c.require(raw.count > 8 * rate,
                        "both recordings hold the run (\(raw.count), \(processed.count) samples)") else { return d }

        // The echo path per 0.5 s window (the far end loops from the daemon's first frame).
        let window = rate / 2, maxLag = rate * 3 / 10
        var path: [(start: Int, delay: Int)] = []
        var t = 0
        while t + window + maxLag <= raw.count {
            let reference = (0..<window).map { far[(t + $0) % far.count] }
            if let found = Correlation.findDelay(reference: reference, in: Array(raw[t..<(t + window + maxLag)]), maxLag: maxLag),
               found.peak > 0.3 {
                path.append((t, found.lagSamples))
            }
            t += window
        }
        // The stop, in the recordings (they start when the audio runs; the poll that saw it
        // running is within 50 ms), and the path before and after it.
        let stop = Int(stopAt * Double(rate))
        func settledDelay(_ span: Range<Int>) -> Double? {
            let delays = path.filter { span.contains($0.start) }.map { Double($0.delay) }
            return delays.count >= 3 ? Levels.median(delays) : nil
        }
        guard let pathBefore = settledDelay(rate..<(stop - window)),
              let pathAfter = settledDelay((stop + window)..<raw.count) else {
            c.check(false, "the echo was found before and after the stop; path (s: ms) \(path.map { "\(Double($0.start) / 48000): \($0.delay / 48)" })")
            return d
        }
        guard let stats = c.require(d.finalStatistics, "the daemon answered stats before it stopped") else { return d }
        let moved = abs(pathAfter - pathBefore) >= Double(rate) / 500
        let restarted = stats.audio.xruns > 0, repaired = stats.audio.echoCancellerRealignments > 0
        guard moved || restarted || repaired else {
            c.rigFault("a \(stopMs) ms stop neither moved the echo path nor restarted the streams; path (s: ms) \(path.map { "\(Double($0.start) / 48000): \($0.delay / 48)" })")
            return d
        }

        func erle(_ from: Int, _ to: Int) -> (medianDB: Double, meanDB: Double, frames: Int) {
            Levels.erleDB(mic: Array(raw[from..<to]), processed: Array(processed[from..<to]), frame: 960, activeThresholdDB: -45)
        }
        let beforeStop = erle(stop - 3 * rate, stop - rate / 5)
        var trace: [String] = []
        var w = stop
        while w + window <= raw.count {
            let e = erle(w, w + window)
            trace.append(e.frames > 5 ? String(format: "%.0f", e.medianDB) : "-")
            w += window
        }
        let within = Self.reconvergeSeconds
        let settleFrom = stop + stopMs * rate / 1000 + Int(within * Double(rate))
        let afterStop = erle(settleFrom, raw.count)
        print(String(format: "echo path jump, a %d ms stop: path %.1f → %.1f ms, %d xruns, %d re-pairings, %d reference moves; ERLE before %.1f dB, from %.0f s after the stop %.1f dB (%d frames); per 0.5 s from the stop: %@",
                     stopMs, pathBefore / 48, pathAfter / 48, stats.audio.xruns, stats.audio.echoCancellerRealignments,
                     stats.audio.echoReferenceMoves, beforeStop.medianDB, within, afterStop.medianDB, afterStop.frames,
                     trace.joined(separator: " ")))
        c.check(beforeStop.frames > 50 && beforeStop.medianDB >= Self.convergedDB,
                String(format: "converged before the stop: ERLE %.1f dB over %d frames", beforeStop.medianDB, beforeStop.frames))
        // A move the stop did not make (the rig's silent starvation later in the run) spoils the
        // judged span: the canceller gets 2 s for each move, and that move may have had less.
        let later = path.filter { $0.start >= settleFrom - window && abs(Double($0.delay) - pathAfter) >= Double(rate) / 500 }
        let regained = afterStop.frames > 50 && afterStop.medianDB >= max(Self.convergedDB, beforeStop.medianDB - Self.regainedWithinDB)
        let verdict = String(format: "converged again within %.0f s of the stop: ERLE %.1f dB over %d frames from then on, %.1f dB before (per 0.5 s: %@)",
                             within, afterStop.medianDB, afterStop.frames, beforeStop.medianDB, trace.joined(separator: " "))
        c.check(regained, "\(restarted ? "after a restart" : "after a silent move"): \(verdict)")
        if !regained, let first = later.first {
            c.rigFault(String(format: "the echo path moved again %.1f s after the stop, with no stop of the test's (%.1f → %.1f ms)",
                              Double(first.start - stop) / Double(rate), pathAfter / 48, Double(first.delay) / 48))
        }
        return d
    }
}
