import Foundation
import SignalTools
import TestSupport
import XCTest

/// intercomd in local mode on a rig room: far-end speech plays from its speaker and comes back
/// through the room's air into its microphone; later a near-end talker speaks in the room.
final class EchoCancellationTests: XCTestCase {
    struct Run {
        let raw: [Float]
        let processed: [Float]
        let log: String
    }

    /// Plays far-end speech for `seconds`; a near-end talker starts after `talkerAfter` seconds.
    private func runLocalMode(room: String, seconds: Double, talkerAfter: Double?, echo: Bool) throws -> Run {
        try Rig.require()
        let dir = NSTemporaryDirectory() + "echo-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let config = try DaemonProcess.writeConfig("""
            [audio]
            capture_device = "\(room)"
            playback_device = "\(room)"
            [echo]
            enabled = \(echo)
            [log]
            stats_interval_s = 1
            """)
        let d = try DaemonProcess(arguments: [
            "--config", config, "--far-end", try Speech.farEnd(),
            "--record", "\(dir)/processed.wav", "--record-raw", "\(dir)/raw.wav", "--duration", "\(seconds)",
        ])
        XCTAssertTrue(d.waitForLog("audio thread", timeout: 10), d.log)
        var talker: Process?
        if let talkerAfter {
            Thread.sleep(forTimeInterval: talkerAfter)
            talker = try Rig.startTalker(room: room, wav: try Speech.nearEnd())
        }
        let status = d.wait(timeout: seconds + 10)
        talker?.waitUntilExit()
        XCTAssertEqual(status, 0, d.log)
        let raw = try WAVAudio.read(path: "\(dir)/raw.wav").floats()
        let processed = try WAVAudio.read(path: "\(dir)/processed.wav").floats()
        XCTAssertEqual(raw.count, processed.count, "both recordings come from the same frames")
        return Run(raw: raw, processed: processed, log: d.log)
    }

    /// Done-when of the audio core: ERLE >= 20 dB once converged (after 3 s) with far-end speech only,
    /// and near-end speech survives double talk.
    ///
    /// Near-end survival is measured against the clean talker clip, aligned in the raw microphone by
    /// cross-correlation: over the frames where the talker is active, the processed signal must keep
    /// at least -6 dB of the talker's energy (median per 20 ms frame) and correlate with the clip
    /// at 0.5 or more. Without near-end speech both would be near -20 dB and 0.
    func testEchoOfFarEndSpeechIsCancelledBy20dBAndNearEndSpeechSurvives() throws {
        let rate = 48000
        let talkerAfter = 7.0
        let r = try runLocalMode(room: "roomB", seconds: 14, talkerAfter: talkerAfter, echo: true)

        // Far end alone: from 3 s until shortly before the talker starts.
        let farOnly = (3 * rate)..<Int((talkerAfter - 0.3) * Double(rate))
        let erle = Levels.erleDB(mic: Array(r.raw[farOnly]), processed: Array(r.processed[farOnly]),
                                 frame: 960, activeThresholdDB: -45)
        XCTAssertGreaterThan(erle.frames, 50, "far-end speech must be active in the measured span")
        XCTAssertGreaterThanOrEqual(erle.medianDB, 20, "ERLE median over \(erle.frames) active frames")

        // Near end: find the talker in the raw microphone, then compare the processed signal with it.
        let near = try WAVAudio.read(path: try Speech.nearEnd()).floats()
        let found = try XCTUnwrap(Correlation.findDelay(reference: near, in: r.raw, maxLag: r.raw.count),
                                  "the talker must be found in the raw microphone")
        let span = found.lagSamples..<min(found.lagSamples + near.count, r.processed.count)
        let aligned = Array(near.prefix(span.count))
        let out = Array(r.processed[span])
        let retained = Levels.retainedDB(reference: aligned, processed: out, frame: 960, activeThresholdDB: -40)
        let correlation = Correlation.normalizedCorrelation(aligned, out)
        XCTAssertGreaterThanOrEqual(retained, -6, "near-end energy kept during double talk")
        XCTAssertGreaterThanOrEqual(correlation, 0.5, "processed output still carries the near-end speech")
        print(String(format: "echo: ERLE median %.1f dB (mean %.1f dB, %d frames); near end retained %.1f dB, correlation %.2f, found at %.3f s (peak %.2f)",
                     erle.medianDB, erle.meanDB, erle.frames, retained, correlation, Double(found.lagSamples) / 48000, found.peak))
    }
}
