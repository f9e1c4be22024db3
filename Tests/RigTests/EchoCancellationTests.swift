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
        let daemon: DaemonProcess
    }

    /// The clips of one run: natural recorded speech (the issue's measure) or espeak's.
    struct Clips {
        let name: String
        let farEnd: String
        let nearEnd: String
        static func natural() throws -> Clips { Clips(name: "natural", farEnd: try Speech.naturalFarEnd(), nearEnd: try Speech.naturalNearEnd()) }
        static func synthetic() throws -> Clips { Clips(name: "synthetic", farEnd: try Speech.farEnd(), nearEnd: try Speech.nearEnd()) }
    }

    /// Plays far-end speech for `seconds`; a near-end talker starts after `talkerAfter` seconds.
    private func runLocalMode(room: String, seconds: Double, talkerAfter: Double?, echo: Bool, clips: Clips) throws -> Run {
        try Rig.require()
        let dir = NSTemporaryDirectory() + "echo-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        // The rig's sound server starves a 30 ms playback buffer now and then (silently: the echo
        // path then jumps); with 40 ms less often. A sound card needs no such margin.
        let config = try DaemonProcess.writeRoomConfig(room, extra: "[echo]\nenabled = \(echo)\n[log]\nstats_interval_s = 1",
                                                       audio: "buffer_periods = 4")
        let d = try DaemonProcess(arguments: [
            "--config", config, "--far-end", clips.farEnd,
            "--record", "\(dir)/processed.wav", "--record-raw", "\(dir)/raw.wav", "--duration", "\(seconds)",
        ])
        XCTAssertTrue(d.waitUntilRunning(timeout: 10), d.log)
        var talker: Process?
        if let talkerAfter {
            Thread.sleep(forTimeInterval: talkerAfter)
            talker = try Rig.startTalker(room: room, wav: clips.nearEnd)
        }
        let status = d.wait(timeout: seconds + 10)
        talker?.waitUntilExit()
        XCTAssertEqual(status, 0, d.log)
        let raw = try WAVAudio.read(path: "\(dir)/raw.wav").floats()
        let processed = try WAVAudio.read(path: "\(dir)/processed.wav").floats()
        XCTAssertEqual(raw.count, processed.count, "both recordings come from the same frames")
        return Run(raw: raw, processed: processed, daemon: d)
    }

    /// Echo delay of the raw microphone against the far-end clip (looped from the first frame),
    /// in 0.5 s windows: the rig's sound server sometimes moves its echo path by tens of ms
    /// (a silent playback underrun), which a real sound card does not do.
    private func echoPath(raw: [Float], farEnd: [Float], until end: Int) -> [(start: Int, delay: Int)] {
        let rate = 48000, window = rate / 2, maxLag = rate * 4 / 10
        var path: [(Int, Int)] = []
        var t = 0
        while t + window + maxLag <= end {
            let far = (0..<window).map { farEnd[(t + $0) % farEnd.count] }
            if let found = Correlation.findDelay(reference: far, in: Array(raw[t..<(t + window + maxLag)]), maxLag: maxLag),
               found.peak > 0.3 {
                path.append((t, found.lagSamples))
            }
            t += window
        }
        return path
    }

    /// Issue 17, point 5, with the default echo chain: with far-end speech only, ERLE >= 30 dB once converged, i.e. from
    /// 3 s after the echo path last changed (at start, or when the rig's sound server moved it) until
    /// the near-end talker starts; and near-end speech survives double talk.
    ///
    /// Near-end survival is measured against the clean talker clip, aligned by cross-correlation:
    /// over the frames where the talker is active, the processed signal must keep at least -3 dB of
    /// the talker's energy (median per 20 ms frame), and its correlation with the clip must be at
    /// least that of the raw microphone (and 0.3): the canceller may remove echo around the talker,
    /// but must not make the talker less recognisable. A suppressed talker fails both.
    ///
    /// The measurement needs what a sound card gives: an echo path that holds still. When the rig's
    /// sound server moves it after the first second (a silent playback underrun), the attempt is
    /// spoiled by the rig, not failed, and repeated on a freshly started rig, as are attempts with
    /// xruns or hypervisor steal (`measureWithRetries`). ERLE or near-end failures on a still path
    /// and an unstarved machine fail at once.
    func testEchoOfNaturalSpeechIsCancelledBy30dBAndTheNearEndSurvivesDoubleTalk() throws {
        try check(try Clips.natural())
    }

    func testEchoOfSyntheticSpeechIsCancelledBy30dBAndTheNearEndSurvivesDoubleTalk() throws {
        try check(try Clips.synthetic())
    }

    private func check(_ clips: Clips) throws {
        var attempt = 0
        try measureWithRetries("echo cancellation, \(clips.name) speech", attempts: 4) { c in
            attempt += 1
            if attempt > 1 { try Rig.restart() }
            return [try measureEchoAndNearEnd(c, clips: clips)]
        }
    }

    /// One run in local mode; records failures (and a moved echo path) in `c`.
    private func measureEchoAndNearEnd(_ c: Checks, clips: Clips) throws -> DaemonProcess {
        let rate = 48000
        let talkerAfter = 12.0
        let far = try WAVAudio.read(path: clips.farEnd).floats()
        let near = try WAVAudio.read(path: clips.nearEnd).floats()
        let r = try runLocalMode(room: "roomB", seconds: talkerAfter + Double(near.count) / Double(rate) + 1, talkerAfter: talkerAfter,
                                 echo: true, clips: clips)
        guard let found = c.require(Correlation.findDelay(reference: near, in: r.raw, maxLag: r.raw.count),
                                    "the talker must be found in the raw microphone") else { return r.daemon }

        // Far end alone: from 3 s after the last echo-path change until shortly before the talker.
        let farOnlyEnd = found.lagSamples - rate * 3 / 10
        let path = echoPath(raw: r.raw, farEnd: far, until: farOnlyEnd)
        c.check(path.count > 10, "the echo of the far end must be visible in the raw microphone (\(path.count) windows)")
        // A change counts when the next window confirms the new delay (single windows can be noisy).
        var lastChange = 0, changes = 0, settled = path.first?.delay ?? 0
        for k in 1..<max(1, path.count - 1) {
            let d = path[k].delay
            if abs(d - settled) > rate / 500, abs(path[k + 1].delay - d) <= rate / 500 {
                settled = d
                lastChange = path[k].start
                changes += 1
            }
        }
        let measureFrom = lastChange + 3 * rate
        guard changes == 0 || lastChange <= rate, farOnlyEnd - measureFrom >= 2 * rate else {
            c.rigFault("the rig's echo path changed \(changes) times, last at \(Double(lastChange) / 48000) s; path (s: ms) \(path.map { "\(Double($0.start) / 48000): \($0.delay / 48)" })")
            return r.daemon
        }
        let span = measureFrom..<farOnlyEnd
        let erle = Levels.erleDB(mic: Array(r.raw[span]), processed: Array(r.processed[span]),
                                 frame: 960, activeThresholdDB: -45)
        c.check(erle.frames > 50, "far-end speech must be active in the measured span (\(erle.frames) frames)")
        // Per frame (median) and over the whole span (all echo energy in against all out): the gate
        // leaves most echo-only frames exactly silent, so the median alone would hide a leak.
        c.check(erle.medianDB >= 30 && erle.meanDB >= 30,
                "ERLE median \(erle.medianDB) dB, over the span \(erle.meanDB) dB: not both >= 30 dB over \(erle.frames) active frames")

        // Near end: compare the processed signal with the clean talker clip, aligned in the processed
        // signal itself (the speexdsp chain delays it by a constant amount, reported below).
        let searchStart = max(0, found.lagSamples - rate / 50)
        guard let inProcessed = c.require(Correlation.findDelay(
            reference: near, in: Array(r.processed[searchStart...]), maxLag: rate / 25),
            "the talker must be found in the processed microphone") else { return r.daemon }
        let processingDelay = searchStart + inProcessed.lagSamples - found.lagSamples
        let talkStart = searchStart + inProcessed.lagSamples
        let talk = talkStart..<min(talkStart + near.count, r.processed.count)
        let aligned = Array(near.prefix(talk.count))
        let out = Array(r.processed[talk])
        let retained = Levels.retainedDB(reference: aligned, processed: out, frame: 960, activeThresholdDB: -40)
        let correlation = Correlation.normalizedCorrelation(aligned, out)
        c.check(retained >= -3, "near-end energy kept during double talk: \(retained) dB < -3 dB")
        let rawCorrelation = Correlation.normalizedCorrelation(aligned, Array(r.raw[found.lagSamples..<min(found.lagSamples + near.count, r.raw.count)]).prefix(aligned.count).map { $0 })
        c.check(correlation >= max(0.3, rawCorrelation), "processed output carries the near-end speech at least as clearly as the raw microphone: \(correlation) < max(0.3, \(rawCorrelation))")
        print(String(format: "echo, %@ speech: ERLE median %.1f dB (over the span %.1f dB, %d frames from %.1f s); rig echo path %d..%d ms, %d changes; near end retained %.1f dB, correlation %.2f (raw microphone %.2f), processing delay %d samples",
                     clips.name, erle.medianDB, erle.meanDB, erle.frames, Double(measureFrom) / 48000,
                     (path.map(\.delay).min() ?? 0) / 48, (path.map(\.delay).max() ?? 0) / 48, changes, retained, correlation,
                     rawCorrelation, processingDelay))
        return r.daemon
    }
}
