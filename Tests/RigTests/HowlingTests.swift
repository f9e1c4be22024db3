import AudioPipeline
import EchoCancel
import Foundation
import SignalTools
import TestSupport
import XCTest

/// Two terminals in one room, in a call with each other: each microphone hears both speakers.
/// Speaker and microphone gain of +6 dB each make the loop gain +12 dB (×4) per pass through the
/// rig's unity coupling (a sink's monitor) and the codec (≈ 0 dB): without echo cancellation the
/// loop must grow to clipping, which proves the measurement can fail; with it (the canceller, and
/// the howl guard for the loop through the other terminal, which no canceller sees) the level
/// must stay bounded.
enum Howling {
    struct Run {
        /// RMS per 250 ms window of the room's air (what both microphones hear), dBFS.
        var levels: [Double]
        var clippedSamples: Int
        var daemons: [DaemonProcess]
        /// The first window at or above -1 dBFS peak, seconds after the kick; nil if none.
        var clippedAfter: Double?
        var samples: Int
    }

    static let gains = "[mixer]\nspeaker_gain_db = 6.0\nmic_gain_db = 6.0"

    /// Terminals "rooma" and "roomb" both stand in rig room A. A calls B; once connected, a short
    /// speech clip is played into the room (someone speaks), then the room is recorded for `seconds`.
    static func run(echo: Bool, seconds: Double) throws -> Run {
        let rooms = try CallRooms(["roomA", "roomB"], sharing: ["roomb": "roomA"])
        defer { rooms.stopAll() }
        let extra = "[echo]\nenabled = \(echo)\n\(gains)"
        let a = try rooms.start("rooma", extra: extra), b = try rooms.start("roomb", extra: extra)
        guard rooms.waitOnline("rooma", ["roomb"]),
              case .success(.callPlaced) = try rooms.control("rooma", .call(button: "roomb")),
              rooms.wait(5, { rooms.isConnected("rooma") && rooms.isConnected("roomb") }) else {
            throw RigError(description: "the two terminals did not connect: \(a.log)\n\(b.log)")
        }
        let air = try RoomRecorder(room: "roomA", path: "\(rooms.dir)/air-\(echo).wav")
        Thread.sleep(forTimeInterval: 0.5)
        // A person speaking at a normal level (the clip 12 dB down): the air then clips only if the loop makes it.
        let kick = try Command.start("/usr/bin/paplay", ["--device=roomA", "--volume=16384", try Speech.roomA()])
        Thread.sleep(forTimeInterval: seconds)
        air.stop()
        if kick.isRunning { kick.terminate() }
        _ = try? rooms.control("rooma", .hangUp)
        let samples = try WAVAudio.read(path: air.path).floats()
        let window = 12_000
        var levels: [Double] = [], clippedAfter: Double?
        let start = 24_000  // the 0.5 s before the kick
        var w = start
        while w + window <= samples.count {
            var energy = 0.0, peak: Float = 0
            for x in samples[w..<(w + window)] { energy += Double(x * x); peak = max(peak, abs(x)) }
            levels.append(10 * log10(max(energy / Double(window), 1e-12)))
            if clippedAfter == nil, peak >= 0.89 { clippedAfter = Double(w - start) / 48_000 }
            w += window
        }
        let clipped = samples.filter { abs($0) >= 0.999 }.count
        return Run(levels: levels, clippedSamples: clipped, daemons: [a, b], clippedAfter: clippedAfter, samples: samples.count)
    }

    /// Median level of the windows from `from` to `to` seconds after the kick.
    static func level(_ r: Run, from: Double, to: Double) -> Double {
        let slice = r.levels.enumerated().filter { Double($0.offset) * 0.25 >= from && Double($0.offset) * 0.25 < to }.map(\.element).sorted()
        return slice.isEmpty ? -.infinity : slice[slice.count / 2]
    }
}

final class HowlingTests: XCTestCase {
    /// Without echo cancellation the loop (gain ×4) howls to clipping within seconds; with it the
    /// level stays bounded for 12 s: no 250 ms window near full scale, at most isolated clipped
    /// peaks, and in the last seconds no louder than the howl guard's ceiling as two terminals play it. (`SuiteHowlingTests` holds it for 60 s.)
    func testLoopGainAboveOneHowlsToClippingWithoutEchoCancellationAndStaysBoundedWithIt() throws {
        try Rig.require()
        try measureWithRetries("howling") { c in
            let off = try Howling.run(echo: false, seconds: 6)
            let on = try Howling.run(echo: true, seconds: 12)
            let speech = Howling.level(on, from: 0, to: 3), end = Howling.level(on, from: 9, to: 12)
            let loudest = on.levels.max() ?? .infinity
            print(String(format: "howling: without AEC clipping after %@ s (%d clipped samples, loudest window %.1f dBFS); with AEC loudest %.1f dBFS, speech %.1f dBFS, last 3 s %.1f dBFS",
                         off.clippedAfter.map { String(format: "%.2f", $0) } ?? "never", off.clippedSamples, off.levels.max() ?? -.infinity,
                         loudest, speech, end))
            print("howling trace (dBFS per second): " + stride(from: 0.0, to: 12.0, by: 1.0).map { String(format: "%.1f", Howling.level(on, from: $0, to: $0 + 1)) }.joined(separator: " "))
            c.check(off.clippedAfter != nil, "without echo cancellation the loop grows to clipping (the test can fail)")
            // Bounded: no 250 ms window near full scale; isolated clipped peaks (two speakers at
            // +6 dB summing in one room's air) at most 0.1 % of the samples, against the howl's tens of percent.
            c.check(loudest < -6, String(format: "with echo cancellation no window near full scale (loudest %.1f dBFS)", loudest))
            c.check(on.clippedSamples * 1000 < on.samples && on.clippedSamples * 100 < max(1, off.clippedSamples),
                    "with echo cancellation at most isolated clipped peaks: \(on.clippedSamples) of \(on.samples) (without: \(off.clippedSamples))")
            // The howl guard is a level clamp: it breaks the loop in some runs and holds it at its
            // ceiling in others (measured: -14 to -16 dBFS in the room, 3-4 dB above the speech,
            // flat for 9 s; the same before the system-layer change, at 0 % host steal). The bound
            // it promises is its ceiling played by both terminals into one room's air (+6 dB).
            let held = HowlGuard.Settings().ceilingDBFS + 6
            c.check(end <= held, String(format: "no growth past the guard: the last 3 s (%.1f dBFS) at most its ceiling played by two terminals (%.1f dBFS; speech %.1f dBFS)", end, held, speech))
            return off.daemons + on.daemons
        }
    }
}

/// The suite's howling figures: the same two terminals in one room, the canceller bypassed and
/// then on for 60 s (smoke: 8 s).
final class SuiteHowlingTests: XCTestCase {
    func testSuiteHowlingWithAndWithoutEchoCancellation() throws {
        let mode = try SuiteMode.require()
        try Rig.require()
        let seconds = mode.isSmoke ? 8.0 : 60.0
        let off = try Howling.run(echo: false, seconds: mode.isSmoke ? 4 : 10)
        let on = try Howling.run(echo: true, seconds: seconds)
        XCTAssertFalse(on.levels.isEmpty || off.levels.isEmpty, "the room was recorded")
        func db(_ v: Double) -> String { String(format: "%.1f dBFS", v) }
        SuiteMode.emit("### Howling: two terminals in one room, in a call with each other, loop gain +12 dB (rig)")
        SuiteMode.emit("")
        SuiteMode.emit("Both terminals stand in rig room A (each microphone hears both speakers); speaker and microphone gain +6 dB each make the loop gain ×4 per pass. A person speaks once (a clip 12 dB down), then the room's air is recorded. Goal (issue 5): without echo cancellation the level grows to clipping (the test can fail); with it the level stays bounded for 60 s. Lower levels are better; clipped samples are the howl at full scale.")
        SuiteMode.emit("")
        SuiteMode.emit("| run | recorded | first peak at −1 dBFS after | clipped samples | loudest 250 ms | median while speaking (0-3 s) | median of the last 10 s |")
        SuiteMode.emit("|---|---|---|---|---|---|---|")
        for (name, r, length) in [("echo cancellation bypassed", off, mode.isSmoke ? 4.0 : 10.0), ("echo cancellation and howl guard on", on, seconds)] {
            SuiteMode.emit("| \(name) | \(Int(length)) s | \(r.clippedAfter.map { String(format: "%.2f s", $0) } ?? "never") | \(r.clippedSamples) of \(r.samples) | \(db(r.levels.max() ?? -.infinity)) | \(db(Howling.level(r, from: 0, to: 3))) | \(db(Howling.level(r, from: max(0, length - 10), to: length))) |")
        }
        // As the CI test judges it: no 250 ms window near full scale, clipped peaks at most 0.1 %.
        let bounded = (on.levels.max() ?? 0) < -6 && on.clippedSamples * 1000 < on.samples
        SuiteMode.emit("")
        SuiteMode.emit("Bounded for \(Int(seconds)) s with echo cancellation: \(bounded ? "yes" : "no"). The loop through the other terminal is outside each canceller's reference; the howl guard (`HowlGuard`: a −18 dBFS ceiling on what is sent, and −20 dB once the ceiling has held for 0.2 s, then 6 dB below the gain that sustained the loop) breaks it.")
        SuiteMode.emit("")
    }
}
