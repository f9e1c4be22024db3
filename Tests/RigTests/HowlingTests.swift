import AudioPipeline
import Control
import EchoCancel
import Foundation
import SignalTools
import TestSupport
import XCTest

/// Two terminals that hear each other, in a call with each other: both in one room (each
/// microphone hears both speakers at the rig's unity coupling) or in adjacent rooms (each room's air
/// leaks into the other through an open door, -6 dB and 10 ms). The microphone gain makes the loop
/// through the other terminal ×4 (+12 dB) per pass: my microphone → the other speaker → my
/// microphone, which only the loop canceller sees. With it and the howl guard bypassed the loop
/// must grow to clipping, which proves the measurement can fail; with them it must stay bounded.
enum Howling {
    enum Placement: String {
        case oneRoom = "one room"
        case adjacentRooms = "adjacent rooms"
    }

    struct Run {
        /// RMS per 250 ms window of room A's air (what A's microphone hears), dBFS.
        var levels: [Double]
        var clippedSamples: Int
        var daemons: [DaemonProcess]
        /// The first window at or above -1 dBFS peak, seconds after the kick; nil if none.
        var clippedAfter: Double?
        var samples: Int
        /// The terminals' own account at the end (A, B): loops the guard broke, what the loop canceller removes.
        var statistics: [DaemonStatistics.Audio]
        /// A's loop canceller (dB removed) and howl guard (dB taken off) every half second; B's the same.
        var trace: [(removed: Double, guardDB: Double)]
        var traceB: [(removed: Double, guardDB: Double)] = []
        /// The loudest sample A and B sent (their typed `sent_peak_dbfs`, polled every half second), dBFS.
        var sentPeaks: [Double]
        /// B's drift estimate for A's stream at the end (typed `stats`), ppm; nil if B played no stream.
        var driftPPM: Double?

        static func text(_ trace: [(removed: Double, guardDB: Double)]) -> String {
            trace.map { String(format: "%.0f/%.0f", $0.removed, $0.guardDB) }.joined(separator: " ")
        }
    }

    /// Loop gain ×4 through the other terminal, the speakers at unity so that nothing sent at or
    /// below the guard's ceiling clips them.
    static func gains(_ placement: Placement) -> String {
        "[mixer]\nspeaker_gain_db = -6.0\nmic_gain_db = \(placement == .oneRoom ? 18.0 : 24.0)"
    }
    static let doorDB = 6.0

    /// Terminals "rooma" and "roomb" call each other; once connected, a short speech clip is played
    /// into room A (someone speaks), then room A is recorded for `seconds`. `structure`: the loop
    /// canceller and the howl guard on (the defaults) or both off; `echo`: echo cancellation on
    /// (the default) or off.
    static func run(_ placement: Placement, structure: Bool, echo: Bool = true, seconds: Double) throws -> Run {
        let rooms = try CallRooms(["roomA", "roomB"], sharing: placement == .oneRoom ? ["roomb": "roomA"] : [:])
        defer { rooms.stopAll() }
        if placement == .adjacentRooms { try Rig.couple("roomB", "roomA", attenuationDB: doorDB, delayMs: 10, oneWay: true) }
        defer { if placement == .adjacentRooms { try? Rig.decouple("roomA", "roomB") } }
        let extra = "[echo]\nenabled = \(echo)\nloop_canceller = \(structure)\nhowl_guard = \(structure)\n\(gains(placement))"
        let a = try rooms.start("rooma", extra: extra), b = try rooms.start("roomb", extra: extra)
        guard rooms.waitOnline("rooma", ["roomb"]),
              case .success(.callPlaced) = try rooms.control("rooma", .perform(.call(button: "roomb"))),
              rooms.wait(5, { rooms.isConnected("rooma") && rooms.isConnected("roomb") }) else {
            throw RigError(description: "the two terminals did not connect: \(a.log)\n\(b.log)")
        }
        let streamB = StreamTrace(b)
        let air = try RoomRecorder(room: "roomA", path: "\(rooms.dir)/air-\(placement == .oneRoom ? "one" : "adjacent")-\(structure).wav")
        Thread.sleep(forTimeInterval: 0.5)
        // A person speaking (the clip 6 dB down): the air then clips only if the loop makes it.
        let kick = try Command.start("/usr/bin/paplay", ["--device=roomA", "--volume=32768", try Speech.roomA()])
        // A's own account every half second: what its loop canceller removes, what its guard takes
        // off; and the loudest sample each terminal sent.
        var trace: [(removed: Double, guardDB: Double)] = [], traceB = trace
        var sentPeaks = [-120.0, -120.0]
        let until = Date().addingTimeInterval(seconds)
        while Date() < until {
            Thread.sleep(forTimeInterval: min(0.5, max(0, until.timeIntervalSinceNow)))
            for (k, d) in [a, b].enumerated() {
                guard let s = try? d.statistics() else { continue }
                let point = (s.audio.loopRemovedDB ?? .nan, s.audio.howlGuardAttenuationDB ?? .nan)
                if k == 0 { trace.append(point) } else { traceB.append(point) }
                sentPeaks[k] = max(sentPeaks[k], s.network?.sentPeakDBFS ?? -120)
            }
        }
        air.stop()
        if kick.isRunning { kick.terminate() }
        let statistics = [try a.statistics().audio, try b.statistics().audio]
        let stream = try? b.statistics().network?.streams.first
        if let st = stream {
            print(String(format: "howling: B plays A's stream at %.1f ms (target %.1f), drift %.0f ppm, %d cut-backs, %d underruns, %d concealed",
                         st.delayMs, st.targetMs, st.driftPPM, st.cutBacks, st.underruns, st.concealed))
        }
        print("howling, structure \(structure ? "on" : "bypassed"): B's stream from A: \(streamB.story())")
        print("howling, structure \(structure ? "on" : "bypassed"): B's drift estimate/trim over time: \(streamB.driftPath())")
        _ = try? rooms.control("rooma", .perform(.hangUp))
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
        return Run(levels: levels, clippedSamples: clipped, daemons: [a, b], clippedAfter: clippedAfter, samples: samples.count,
                   statistics: statistics, trace: trace, traceB: traceB, sentPeaks: sentPeaks, driftPPM: stream.map { $0.driftPPM })
    }

    /// Median level of the windows from `from` to `to` seconds after the kick.
    static func level(_ r: Run, from: Double, to: Double) -> Double {
        let slice = r.levels.enumerated().filter { Double($0.offset) * 0.25 >= from && Double($0.offset) * 0.25 < to }.map(\.element).sorted()
        return slice.isEmpty ? -.infinity : slice[slice.count / 2]
    }
}

final class HowlingTests: XCTestCase {
    /// Bypassed, the loop (gain ×4) howls to clipping within seconds (a terminal sends full scale,
    /// from its typed statistics); with the loop canceller and the howl guard it stays bounded for
    /// 14 s: nothing sent above the guard's ceiling, no 250 ms window of the air near full scale,
    /// at most isolated clipped peaks. Whether the loop is gone by the end is printed: the loop
    /// canceller does not yet remove a ×4 loop reliably (issue 17). (`SuiteHowlingTests`: 60 s.)
    /// The control runs without the echo canceller too, so that nothing removes sound in it.
    func testInOneRoomTheLoopHowlsWithTheStructureBypassedAndStaysBoundedWithIt() throws {
        try check(.oneRoom)
    }

    func testInAdjacentRoomsTheLoopHowlsWithTheStructureBypassedAndStaysBoundedWithIt() throws {
        try check(.adjacentRooms)
    }

    private func check(_ placement: Howling.Placement) throws {
        try Rig.require()
        let seconds = 14.0
        try measureWithRetries("howling, \(placement.rawValue)") { c in
            // The control has nothing that removes sound: no echo canceller either, which on
            // its own held the ×4 loop in about one CI run of ten (2026-11-28/29).
            let off = try Howling.run(placement, structure: false, echo: false, seconds: 6)
            let on = try Howling.run(placement, structure: true, seconds: seconds)
            let speech = Howling.level(on, from: 0, to: 3), end = Howling.level(on, from: seconds - 3.5, to: seconds - 0.5)
            let loudest = on.levels.max() ?? .infinity
            let a = on.statistics[0]
            print(String(format: "howling, %@: bypassed clipping after %@ s (%d clipped samples, loudest window %.1f dBFS); with the loop canceller and guard loudest %.1f dBFS, speech %.1f dBFS, last 3 s %.1f dBFS; A: %d loops broken, loop canceller removes %.1f dB, %d late reference frames",
                         placement.rawValue, off.clippedAfter.map { String(format: "%.2f", $0) } ?? "never", off.clippedSamples, off.levels.max() ?? -.infinity,
                         loudest, speech, end, a.howls ?? -1, a.loopRemovedDB ?? .nan, a.loopLateFrames ?? -1))
            print("howling, \(placement.rawValue): sent clipped A/B bypassed \(off.statistics.map(\.microphoneClippedSamples)), with \(on.statistics.map(\.microphoneClippedSamples)); played clipped bypassed \(off.statistics.map(\.speakerClippedSamples)), with \(on.statistics.map(\.speakerClippedSamples))")
            print("howling trace, \(placement.rawValue) (dBFS per second): " + stride(from: 0.0, to: seconds - 0.5, by: 1.0).map { String(format: "%.1f", Howling.level(on, from: $0, to: $0 + 1)) }.joined(separator: " "))
            print("howling, \(placement.rawValue), A's loop canceller removes / guard takes off (dB, every 0.5 s): \(Howling.Run.text(on.trace))")
            print("howling, \(placement.rawValue), B's loop canceller removes / guard takes off (dB, every 0.5 s): \(Howling.Run.text(on.traceB))")
            let ceiling = HowlGuard.Settings().ceilingDBFS
            let sentClipped = off.statistics.map(\.microphoneClippedSamples).max() ?? 0
            print(String(format: "howling, %@: the loudest sample sent by A, B: bypassed %.1f, %.1f dBFS (%d clipped); with the structure %.1f, %.1f dBFS; the loop %@ by the end",
                         placement.rawValue, off.sentPeaks[0], off.sentPeaks[1], sentClipped, on.sentPeaks[0], on.sentPeaks[1],
                         end < speech - 10 ? "gone" : "still there"))
            // The control: with nothing removing sound the loop must grow to clipping, or the
            // measurement cannot fail. Not a spoiled machine: a failure.
            let howled = (off.sentPeaks.max() ?? -120) >= -0.1 && sentClipped >= 48_000
            c.check(howled, String(format: "the control howls: with nothing removing sound the loop grows to clipping (loudest sent A, B %.1f, %.1f dBFS, %d samples clipped; "
                                   + "a terminal must send full scale for more than a second's worth of samples)",
                                   off.sentPeaks[0], off.sentPeaks[1], sentClipped))
            c.check(on.statistics.allSatisfy { $0.loopRemovedDB != nil }, "both terminals run a loop canceller")
            print("howling, \(placement.rawValue): loop canceller engagements A, B (typed stats): \(on.statistics.map { $0.loopEngagements ?? -1 })")
            // Through the door only A's microphone hears the loop; in one room both do, and the
            // first canceller to engage breaks it for the other (B alone engaged in 2 CI runs).
            let engaged = placement == .oneRoom ? on.statistics.map { $0.loopEngagements ?? 0 }.max() ?? 0 : a.loopEngagements ?? 0
            c.check(engaged >= 1, "\(placement == .oneRoom ? "a" : "A's") loop canceller engaged on the loop (typed `loop_engagements` A, B: \(on.statistics.map { $0.loopEngagements ?? -1 }))")
            c.check(off.statistics.allSatisfy { $0.loopEngagements == 0 }, "bypassed (switched off), no loop canceller engages: \(off.statistics.map { $0.loopEngagements ?? -1 })")
            c.check(on.sentPeaks.allSatisfy { $0 <= ceiling + 0.1 },
                    String(format: "with them what is sent stays bounded by the guard's ceiling (%.1f dBFS): A %.2f, B %.2f dBFS", ceiling, on.sentPeaks[0], on.sentPeaks[1]))
            c.check(loudest < -6, String(format: "and no 250 ms window of the room's air near full scale (loudest %.1f dBFS)", loudest))
            c.check(on.clippedSamples * 1000 < on.samples, "at most isolated clipped peaks in the air: \(on.clippedSamples) of \(on.samples)")
            // The rig's rooms run on one clock, also through the door (`rig.sh couple` keeps them exact).
            c.check([off, on].allSatisfy { abs($0.driftPPM ?? .infinity) <= 20 },
                    "B's drift estimate of A's stream reads 0 ± 20 ppm on the rig's one clock: \([off, on].map { $0.driftPPM.map { String(format: "%.0f", $0) } ?? "no stream" })")
            return off.daemons + on.daemons
        }
    }
}

/// The suite's howling figures: the same two terminals in one room and in adjacent rooms, the loop
/// canceller and howl guard bypassed and then on for 60 s (smoke: 8 s).
final class SuiteHowlingTests: XCTestCase {
    func testSuiteHowlingWithAndWithoutTheLoopCanceller() throws {
        let mode = try SuiteMode.require()
        try Rig.require()
        let seconds = mode.isSmoke ? 8.0 : 60.0
        let bypassedSeconds = mode.isSmoke ? 4.0 : 10.0
        func db(_ v: Double) -> String { String(format: "%.1f dBFS", v) }
        SuiteMode.emit("### Howling: two terminals that hear each other, in a call with each other, loop gain +12 dB (rig)")
        SuiteMode.emit("")
        SuiteMode.emitTable(intro: "One room: both terminals stand in rig room A (each microphone hears both speakers). Adjacent rooms: room B's air leaks into room A's at −\(Int(Howling.doorDB)) dB and 10 ms (an open door, `rig.sh couple --one-way`). Gains (\(Howling.gains(.oneRoom).split(separator: "\n").dropFirst().joined(separator: ", ")) in one room; \(Howling.gains(.adjacentRooms).split(separator: "\n").dropFirst().joined(separator: ", ")) through the door) make the loop through the other terminal ×4 per pass, the speakers low enough that nothing sent at or below the guard's ceiling clips them. A person speaks once (a clip 6 dB down), then room A's air is recorded. Echo cancellation is on in every run. Goal (issue 17): bypassed, the loop grows to clipping: a terminal sends full scale (its typed `sent_peak_dbfs`; the air itself stays below full scale at these speaker gains); with the loop canceller and the howl guard (−6 dBFS sample-peak ceiling) nothing is sent above the ceiling and the loop dies away, ideally without the guard breaking it. Lower levels are better.",
                            columns: ["placement", "run", "recorded", "loudest sample sent, A / B", "samples A sent clipped", "loudest 250 ms of A's air", "median while speaking (0-3 s)", "median of the last 10 s", "loops the guard broke (A)", "A's loop canceller removes"])
        for placement in [Howling.Placement.oneRoom, .adjacentRooms] {
            let off = try Howling.run(placement, structure: false, seconds: bypassedSeconds)
            let on = try Howling.run(placement, structure: true, seconds: seconds)
            XCTAssertFalse(on.levels.isEmpty || off.levels.isEmpty, "the room was recorded")
            for (name, r, length) in [("bypassed", off, bypassedSeconds), ("loop canceller and howl guard", on, seconds)] {
                let a = r.statistics[0]
                SuiteMode.emit("| \(placement.rawValue) | \(name) | \(Int(length)) s | \(r.sentPeaks.map { String(format: "%.1f", $0) }.joined(separator: " / ")) dBFS | \(a.microphoneClippedSamples) | \(db(r.levels.max() ?? -.infinity)) | \(db(Howling.level(r, from: 0, to: 3))) | \(db(Howling.level(r, from: max(0, length - 10), to: length))) | \(a.howls.map(String.init) ?? "–") | \(a.loopRemovedDB.map { String(format: "%.1f dB", $0) } ?? "–") |")
            }
        }
        SuiteMode.emit("")
    }
}
