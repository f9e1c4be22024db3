import AudioPipeline
import Calls
import Posix
import SignalTools
import TestSupport
import XCTest

/// A terminal without a screen: every call event has its tone (engine effects, seeded
/// simulation), calls are answered and refused by hand, missed calls wait to be acknowledged and
/// are reminded, and the tones are told apart in a recording.
final class TerminalEventTests: XCTestCase {
    // MARK: the engine says what to play

    func testWithoutAutoAnswerTheCalleeRingsRepeatingTheCallerHearsRingbackAndAnswerConnectsBoth() {
        var sim = CallSim(rooms: 2, seed: 40) { $0.autoAnswer = false }
        sim.warmUp()
        sim.command(ra, .call(button: "b"))
        XCTAssertEqual(sim.ring[ra], .ringback, "the caller hears ringback at once")
        sim.run(for: 5)
        XCTAssertEqual(sim.ring[rb], .chimeRepeating, "the callee's chime repeats until someone acts")
        XCTAssertEqual(sim.engine(rb).state, .ringingIncoming)
        sim.command(rb, .answer)
        sim.run(for: 0.1)
        XCTAssertEqual(sim.engine(ra).state, .connected)
        XCTAssertEqual(sim.ring[ra], .off)
        XCTAssertEqual(sim.ring[rb], .off)
        XCTAssertEqual(sim.cueNames(ra), [.connected])
        XCTAssertEqual(sim.cueNames(rb), [.connected])
        sim.command(ra, .hangUp)
        sim.run(for: 0.1)
        XCTAssertEqual(sim.cueNames(ra).last, .callEnded)
        XCTAssertEqual(sim.cueNames(rb).last, .callEnded)
    }

    func testWithAutoAnswerTheChimePlaysOnce() {
        var sim = CallSim(rooms: 2, seed: 41)
        sim.warmUp()
        sim.command(ra, .call(button: "b"))
        sim.run(for: 0.05)
        XCTAssertEqual(sim.ring[rb], .chimeOnce)
        sim.run(for: settleTime(sim.timing(ra)))
        XCTAssertEqual(sim.engine(rb).state, .connected)
        XCTAssertEqual(sim.ring[ra], .off)
    }

    func testDeclineByHandTellsTheCallerWhoHearsDeclined() {
        var sim = CallSim(rooms: 2, seed: 42) { $0.autoAnswer = false }
        sim.warmUp()
        sim.command(ra, .call(button: "b"))
        sim.run(for: 1)
        sim.command(rb, .decline)
        sim.run(for: 0.2)
        XCTAssertEqual(sim.engine(ra).state, .idle)
        XCTAssertEqual(sim.engine(rb).state, .idle)
        XCTAssertEqual(sim.history[ra]?.last?.participants, [Participant(room: rb, status: .declined(.refused))])
        XCTAssertEqual(sim.history[rb]?.last?.outcome, .declined)
        XCTAssertEqual(sim.history[rb]?.last?.reason, .refused)
        XCTAssertEqual(sim.cueNames(ra), [.declined])
        XCTAssertEqual(sim.ring[ra], .off)
        XCTAssertEqual(sim.ring[rb], .off)
        XCTAssertEqual(sim.engine(rb).missedCalls, [], "a call refused by hand is not a missed call")
        sim.command(rb, .decline)
        XCTAssertEqual(sim.rejections[rb], [.nothingToDecline])
    }

    func testBusyOfflineAndDoNotDisturbEachHaveTheirTone() {
        var sim = CallSim(rooms: 4, seed: 43)
        sim.warmUp()
        sim.command(rd, .setDoNotDisturb(true))
        XCTAssertEqual(sim.cueNames(rd), [.doNotDisturbOn])
        sim.run(for: 0.1)
        sim.command(ra, .call(button: "d"))
        sim.run(for: 0.5)
        XCTAssertEqual(sim.cueNames(ra).last, .declined, "do-not-disturb")

        sim.command(ra, .call(button: "b"))
        sim.run(for: settleTime(sim.timing(ra)))
        sim.command(rc, .call(button: "b"))
        sim.run(for: 0.5)
        XCTAssertEqual(sim.cueNames(rc), [.busy])
        sim.command(ra, .hangUp)
        sim.run(for: 0.5)

        sim.stop(rc)
        sim.run(for: sim.timing(ra).offlineAfter + 1)
        sim.command(ra, .call(button: "c"))
        sim.run(for: settleTime(sim.timing(ra)))
        XCTAssertEqual(sim.cueNames(ra).last, .notReached)
        sim.command(rd, .toggleDoNotDisturb)
        XCTAssertEqual(sim.cueNames(rd).last, .doNotDisturbOff)
    }

    func testAGroupMemberLeavingIsHeardQuietlyByTheCallerAndMuteIsQuietInACall() {
        var sim = CallSim(rooms: 3, seed: 44)
        sim.warmUp()
        sim.command(ra, .call(button: "all"))
        sim.run(for: settleTime(sim.timing(ra)))
        XCTAssertEqual(sim.engine(ra).state, .connected)
        sim.command(rb, .hangUp)
        sim.run(for: 0.2)
        let left = sim.cues[ra, default: []].last
        XCTAssertEqual(left?.cue, .participantLeft)
        XCTAssertEqual(left?.quiet, true, "a tone during a call is quiet")
        sim.command(ra, .toggleMicrophoneMute)
        XCTAssertEqual(sim.cues[ra, default: []].last?.cue, .microphoneMuted)
        XCTAssertEqual(sim.cues[ra, default: []].last?.quiet, true)
        sim.command(ra, .setMicrophoneMuted(false))
        XCTAssertEqual(sim.cues[ra, default: []].last?.cue, .microphoneUnmuted)
        sim.command(ra, .toggleSpeakerMute)
        XCTAssertEqual(sim.cues[ra, default: []].last?.cue, .microphoneUnmuted, "the speaker mute has no tone of its own")
    }

    // MARK: missed calls, reminders, acknowledgement, call back

    func testRingTimeoutKeepsAMissedCallRemindedUntilAcknowledgedAcrossARestart() {
        var sim = CallSim(rooms: 2, seed: 45) { s in
            s.autoAnswer = false
            s.timing.answerTimeout = 5
            s.timing.missedReminder = 3
        }
        sim.checksDeadlines = true
        sim.warmUp()
        sim.command(ra, .call(button: "b"))
        sim.run(for: 5.5)
        XCTAssertEqual(sim.engine(rb).state, .idle)
        XCTAssertEqual(sim.history[rb]?.last?.outcome, .missed)
        XCTAssertEqual(sim.history[rb]?.last?.acknowledged, false)
        XCTAssertEqual(sim.engine(rb).missedCalls.map(\.caller), [ra])
        XCTAssertEqual(sim.ring[rb], .off)
        // Reminded once the missed call is 3 s old (it started 5.5 s ago: at once), then every 3 s.
        sim.run(for: 6.2)
        let reminders = sim.cues[rb, default: []].filter { $0.cue == .missedCall }.map(\.time)
        XCTAssertEqual(reminders.count, 3, "\(reminders)")
        XCTAssertEqual(reminders[2] - reminders[1], 3, accuracy: 0.01)
        XCTAssertEqual(sim.engine(rb).statistics.missedCallReminders, 3, "each reminder counted")

        // A restart keeps it (from the history) and reminds at once, then every 3 s.
        sim.stop(rb)
        sim.start(rb)
        XCTAssertEqual(sim.engine(rb).missedCalls.map(\.caller), [ra])
        sim.run(for: 3.1)
        XCTAssertEqual(sim.cues[rb, default: []].filter { $0.cue == .missedCall }.count, 5)

        sim.command(rb, .acknowledge(all: false))
        XCTAssertEqual(sim.cueNames(rb).last, .acknowledged)
        XCTAssertEqual(sim.acknowledged[rb], [sim.history[rb]!.last!.callID])
        XCTAssertEqual(sim.engine(rb).missedCalls, [])
        sim.run(for: 7)
        XCTAssertEqual(sim.cues[rb, default: []].filter { $0.cue == .missedCall }.count, 5, "no reminder once acknowledged")
        sim.command(rb, .acknowledge(all: true))
        XCTAssertEqual(sim.rejections[rb], [.noMissedCall])
        XCTAssertEqual(sim.stuckDeadlines.prefix(5), [], "no timer left due and not acted on")
    }

    func testACalleeThatGivesUpRingingStopsTheCallersRingbackThoughTheCallerWouldWaitLonger() {
        var sim = CallSim(rooms: 2, seed: 48) { s in
            s.autoAnswer = false
            s.timing.answerTimeout = s.room == rb ? 3 : 30
        }
        sim.warmUp()
        sim.command(ra, .call(button: "b"))
        sim.run(for: 3.2)
        XCTAssertEqual(sim.engine(ra).state, .idle)
        XCTAssertEqual(sim.ring[ra], .off)
        XCTAssertEqual(sim.cueNames(ra), [.notReached])
        XCTAssertEqual(sim.history[rb]?.last?.outcome, .missed)
    }

    func testCallMissedCallsTheOldestMissedCallerAndAcknowledgesItOnceConnected() {
        var sim = CallSim(rooms: 3, seed: 46) { s in
            s.timing.missedReminder = 0
        }
        sim.warmUp()
        sim.command(rc, .setDoNotDisturb(true))
        sim.run(for: 0.2)
        sim.command(ra, .call(button: "c"))
        sim.run(for: 1)
        sim.command(rb, .call(button: "c"))
        sim.run(for: 1)
        XCTAssertEqual(sim.engine(rc).missedCalls.map(\.caller), [ra, rb], "oldest first")
        XCTAssertFalse(sim.cueNames(rc).contains(.missedCall), "reminders off")
        sim.command(rc, .setDoNotDisturb(false))
        sim.run(for: 0.2)
        sim.command(rc, .callMissed)
        XCTAssertEqual(sim.engine(rc).call?.participants.map(\.room), [ra])
        XCTAssertEqual(sim.engine(rc).missedCalls.count, 2, "not yet acknowledged: nobody answered yet")
        sim.run(for: settleTime(sim.timing(ra)))
        XCTAssertEqual(sim.engine(rc).state, .connected)
        XCTAssertEqual(sim.engine(rc).missedCalls.map(\.caller), [rb], "acknowledged once a answered")
        sim.command(rc, .hangUp)
        sim.run(for: 0.2)
        // Call back: the other side of the newest call (the one just made: a).
        sim.command(rc, .callBack)
        XCTAssertEqual(sim.engine(rc).call?.participants.map(\.room), [ra])
        sim.command(rc, .hangUp)
        sim.run(for: 0.2)
        // b calls c, c answers, b hangs up: c's call back reaches b.
        sim.command(rb, .call(button: "c"))
        sim.run(for: settleTime(sim.timing(rb)))
        sim.command(rb, .hangUp)
        sim.run(for: 0.2)
        sim.command(rc, .callBack)
        XCTAssertEqual(sim.engine(rc).call?.participants.map(\.room), [rb])
    }

    func testCallBackWithAnEmptyHistoryIsRefused() {
        var sim = CallSim(rooms: 2, seed: 47)
        sim.warmUp()
        sim.command(ra, .callBack)
        sim.command(ra, .callMissed)
        XCTAssertEqual(sim.rejections[ra], [.nobodyToCallBack, .noMissedCall])
    }

    // MARK: the sounds themselves

    /// Every cue's own pattern is found in its rendering, and no other cue's: the tests on the rig
    /// can name what a speaker played.
    func testEveryCueIsToldApartFromEveryOther() {
        for cue in Cue.allCases {
            let x = Tones.render(cue.notes.map { ($0.hz, $0.ms) }, peakDBFS: -30)
            let heard = Tones.notes(in: [Int16](repeating: 0, count: 4800) + x + [Int16](repeating: 0, count: 4800))
            for other in Cue.allCases {
                let found = Tones.occurrences(of: other.notes.map { ($0.hz, $0.ms) }, in: heard)
                XCTAssertEqual(found.count, other == cue ? 1 : 0, "\(other) in \(cue): \(heard)")
            }
            XCTAssertLessThanOrEqual(Double(x.count) / 48000, 0.45, "\(cue) is short")
        }
    }

    /// A note heard in pieces, 70 ms of an underrun's zeros inside it (a CI run's alarm), is still
    /// that note: every notification tone and cue is found once, with or without the hole in its
    /// longest note, and no other is. The CI run's case: the alarm's second note heard as 110 ms,
    /// 70 ms of zeros, 70 ms (a match of frequencies alone took the pieces for two notes).
    func testATonePlayedWithAnUnderrunInsideANoteIsStillThatTone() {
        let alarm = NotificationTone.alarm.notes.map { (hz: $0.hz, ms: $0.ms) }
        let x = Tones.render(alarm, peakDBFS: -15)
        let cut = Int((alarm[0].ms + 110) / 1000 * 48000)
        let ci = Tones.notes(in: [Int16](repeating: 0, count: 4800) + Array(x[..<cut])
                             + [Int16](repeating: 0, count: 3360) + Array(x[cut...]) + [Int16](repeating: 0, count: 4800))
        XCTAssertEqual(ci.count, alarm.filter { $0.hz > 0 }.count + 1, "the hole splits a note in two: \(ci)")
        XCTAssertEqual(Tones.occurrences(of: alarm, in: ci).count, 1, "with the notes' lengths: \(ci)")

        let sounds: [(String, [(hz: Double, ms: Double)])] =
            NotificationTone.allCases.map { ($0.rawValue, $0.notes.map { ($0.hz, $0.ms) }) }
            + Cue.allCases.map { ($0.rawValue, $0.notes.map { ($0.hz, $0.ms) }) }
        let pad = [Int16](repeating: 0, count: 4800)
        for (name, notes) in sounds {
            let x = Tones.render(notes, peakDBFS: -15)
            // The longest note's start and length in samples; the hole goes 60 % into it.
            var at = 0, longest = (start: 0, count: 0)
            for note in notes {
                let n = Int((note.ms / 1000 * 48000).rounded())
                if note.hz > 0 && n > longest.count { longest = (at, n) }
                at += n
            }
            let cut = longest.start + longest.count * 6 / 10
            let holed = Array(x[..<cut]) + [Int16](repeating: 0, count: 3360) + Array(x[cut...])
            for (label, signal) in [("whole", x), ("with a hole", holed)] {
                let heard = Tones.notes(in: pad + signal + pad)
                for (other, otherNotes) in sounds {
                    let found = Tones.occurrences(of: otherNotes, in: heard)
                    XCTAssertEqual(found.count, other == name ? 1 : 0, "\(other) in \(name), \(label): \(heard)")
                    if other == name, let start = found.first {
                        XCTAssertEqual(start, 0.1, accuracy: 0.03, "\(name), \(label)")
                    }
                }
            }
        }
    }

    /// The chime is found by the notes a listener hears in it, and a ringback with a hole (a CI
    /// run's: 425 Hz heard as 210 ms, about 20 ms of zeros, then the rest) is one ring as long as
    /// it was played, not two short ones.
    func testTheChimeIsFoundByItsHeardNotesAndARingbackWithAHoleIsOneLongRing() {
        let pad = [Int16](repeating: 0, count: 4800)
        let chime = Tones.notes(in: pad + Chime.generate() + pad)
        XCTAssertEqual(Tones.occurrences(of: ChimeSettings().heardNotes, in: chime).count, 1, "\(chime)")
        XCTAssertEqual(Tones.occurrences(of: ChimeSettings().heardNotes, in: chime).first ?? -1, 0.1, accuracy: 0.03)

        let ring = Tones.render(Cue.ringbackNotes.map { ($0.hz, $0.ms) }, peakDBFS: -15)
        let cut = 210 * 48
        let heard = Tones.notes(in: pad + Array(ring[..<cut]) + [Int16](repeating: 0, count: 960) + Array(ring[cut...]) + pad)
        XCTAssertGreaterThan(heard.count, 1, "the hole splits the note: \(heard)")
        let rings = Tones.matches(of: Cue.ringbackNotes.map { ($0.hz, $0.ms) }, in: heard)
        XCTAssertEqual(rings.count, 1, "\(heard)")
        XCTAssertEqual((rings.first?.end ?? 0) - (rings.first?.start ?? 0), 1.02, accuracy: 0.05, "as long as played, hole included")
    }

    func testTonePlayerPlaysOnceLoopsStopsAndScales() {
        let a = [Int16](repeating: 1000, count: 700)
        let player = TonePlayer(sounds: [a, [Int16](repeating: -2000, count: 300)])
        let frame = UnsafeMutablePointer<Int16>.allocate(capacity: 480)
        defer { frame.deallocate() }
        XCTAssertFalse(player.readFrame(into: frame, count: 480), "silent before any request")
        player.play(0)
        XCTAssertTrue(player.readFrame(into: frame, count: 480))
        XCTAssertTrue(player.readFrame(into: frame, count: 480))
        XCTAssertEqual(frame[219], 1000)
        XCTAssertEqual(frame[220], 0, "padded with silence after its end")
        XCTAssertFalse(player.readFrame(into: frame, count: 480), "played once")
        player.play(1, loop: true, gain: 0.5)
        for _ in 0..<5 { XCTAssertTrue(player.readFrame(into: frame, count: 480)) }
        XCTAssertEqual(frame[0], -1000, "at half gain")
        player.stop()
        XCTAssertFalse(player.readFrame(into: frame, count: 480))
    }

    /// A reload swaps the sounds while one plays: it goes on in its new form from the same place;
    /// a set offered twice before a frame is read is taken once, the newer.
    func testTonePlayerReplacesItsSoundsWhilePlaying() {
        let player = TonePlayer(sounds: [[Int16](repeating: 1000, count: 1000), [Int16](repeating: 5, count: 10)])
        let frame = UnsafeMutablePointer<Int16>.allocate(capacity: 480)
        defer { frame.deallocate() }
        player.play(0, loop: true)
        XCTAssertTrue(player.readFrame(into: frame, count: 480))
        XCTAssertEqual(frame[479], 1000)
        player.replace(sounds: [[Int16](repeating: 2000, count: 1000), [Int16](repeating: 6, count: 10)])
        player.replace(sounds: [[Int16](repeating: 3000, count: 1000), [Int16](repeating: 7, count: 10)])
        XCTAssertTrue(player.readFrame(into: frame, count: 480))
        XCTAssertEqual(frame[0], 3000, "the newer set, from the same place")
        XCTAssertEqual(player.replaced.load, 1)
        XCTAssertTrue(player.readFrame(into: frame, count: 480))
        XCTAssertEqual(frame[39], 3000)
        XCTAssertEqual(frame[40], 3000, "looped across its end")
        // Shorter than where it stood: a sound played once ends there.
        player.play(0)
        XCTAssertTrue(player.readFrame(into: frame, count: 480))
        player.replace(sounds: [[Int16](repeating: 4000, count: 200), [Int16](repeating: 8, count: 10)])
        XCTAssertFalse(player.readFrame(into: frame, count: 480), "past the new sound's end")
        player.play(1)
        XCTAssertTrue(player.readFrame(into: frame, count: 480))
        XCTAssertEqual(frame[9], 8)
        XCTAssertEqual(frame[10], 0)
        XCTAssertEqual(player.replaced.load, 2)
    }

    /// The audio thread's side allocates nothing while requests come and go.
    func testTonePlayerReadsWithoutAllocating() {
        let player = TonePlayer(sounds: Cue.allCases.map { Tones.render($0.notes.map { ($0.hz, $0.ms) }) })
        final class Box: @unchecked Sendable { var count: UInt64 = 0 }
        let box = Box()
        let thread = Thread {
            AllocationCounter.trackCurrentThread()
            let frame = UnsafeMutablePointer<Int16>.allocate(capacity: 480)
            let before = AllocationCounter.count
            for k in 0..<3000 {
                if k % 50 == 0 { player.play(k / 50 % player.soundCount, loop: k % 100 == 0, gain: k % 150 == 0 ? 0.25 : 1) }
                _ = player.readFrame(into: frame, count: 480)
                if k % 20 == 0 { usleep(100) }  // room for the replacements below
            }
            box.count = AllocationCounter.count - before
            frame.deallocate()
        }
        AllocationCounter.arm()
        thread.start()
        // Reloads on another thread meanwhile: the sets are made and freed here, never there.
        let other = Cue.allCases.map { Tones.render($0.notes.map { ($0.hz, $0.ms) }, peakDBFS: -30) }
        while !thread.isFinished {
            player.replace(sounds: other)
            usleep(1000)
        }
        AllocationCounter.disarm()
        XCTAssertEqual(box.count, 0, "allocations: \(AllocationCounter.callers)")
        XCTAssertGreaterThan(player.replaced.load, 10, "sets were taken while it played")
    }
}
