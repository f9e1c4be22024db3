import Calls
import Control
import Foundation
import Keys
import SignalTools
import TestSupport
import XCTest

/// A terminal with keys and no screen, through real daemons on the rig: every event's tone is
/// heard at the right terminal (found in its speaker's recording by its notes, and the others'
/// absent); calls are answered and declined by command, key and intercomctl with auto-answer
/// off; a ring timeout gives a missed call that is reminded, survives a restart, is called back
/// and acknowledged; the history is pruned by age.
final class TerminalEventRigTests: XCTestCase {
    /// What a recording is searched for, by its notes (a note the machine put a hole in is still
    /// that note): each cue, the chime and the ringback.
    private static func sounds() -> [(name: String, notes: [(hz: Double, ms: Double)], minSeconds: Double)] {
        Cue.allCases.map { c in (c.rawValue, c.notes.map { ($0.hz, $0.ms) }, 0) }
            + [("chime", ChimeSettings().heardNotes, 0), ("ringback", Cue.ringbackNotes.map { ($0.hz, $0.ms) }, 0.5)]
    }

    private static func heard(_ path: String) throws -> Set<String> {
        let notes = Tones.notes(in: try WAVAudio.read(path: path).samples)
        var found: Set<String> = []
        for s in sounds() {
            // A ringback cut short at once (the callee refused within milliseconds) is not one.
            if Tones.matches(of: s.notes, in: notes).contains(where: { $0.end - $0.start >= s.minSeconds }) {
                found.insert(s.name)
            }
        }
        return found
    }

    /// Muting the speaker silences the far ends, not the terminal: its tones are still heard.
    func testTonesAreHeardWithTheSpeakerMuted() throws {
        try Rig.require()
        let rooms = try CallRooms(["roomA", "roomB"])
        defer { rooms.stopAll() }
        try rooms.start("roomb")
        _ = try rooms.control("roomb", .perform(.setSpeakerMuted(true)))
        XCTAssertEqual(rooms.status("roomb")?.mute.speaker, true)
        let recorder = try RoomRecorder(room: rooms.room("roomb").rig, path: "\(rooms.dir)/roomb-speaker.wav")
        Thread.sleep(forTimeInterval: 0.3)
        _ = try rooms.control("roomb", .perform(.setDoNotDisturb(true)))
        Thread.sleep(forTimeInterval: 0.7)
        _ = try rooms.control("roomb", .perform(.setDoNotDisturb(false)))
        Thread.sleep(forTimeInterval: 0.7)
        recorder.stop()
        XCTAssertEqual(try Self.heard("\(rooms.dir)/roomb-speaker.wav"), ["dnd_on", "dnd_off"], "heard through a muted speaker")
    }

    func testEveryEventIsHeardAtTheRightTerminalAndCallsAreTakenRefusedMissedAndCalledBackByHand() throws {
        try Rig.require()
        let rooms = try CallRooms(["roomA", "roomB", "roomC"])
        defer { rooms.stopAll() }
        // C's history holds a call 100 days old and one from yesterday; 30 days are kept.
        let now = Date().timeIntervalSince1970
        let old = HistoryEntry(callID: CallID(0xA1), direction: .incoming, caller: RoomID("rooma")!,
                               participants: [Participant(room: RoomID("roomc")!, status: .connected)], outcome: .finished,
                               started: now - 100 * 86400, ended: now - 100 * 86400 + 20)
        var recent = old
        recent.callID = CallID(0xA2)
        recent.started = now - 86400
        recent.ended = now - 86400 + 20
        let file = ["format": 2, "entries": try [old, recent].map { try JSONSerialization.jsonObject(with: Data(Wire.encode($0))) },
                    "notifications": [Any]()] as [String: Any]
        try JSONSerialization.data(withJSONObject: file).write(to: URL(fileURLWithPath: "\(rooms.dir)/roomc-history.json"))

        let fifo = "\(rooms.dir)/roomB-keys"
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        let bCalls = "auto_answer = false\nanswer_timeout_ms = 4500\nmissed_reminder_s = 2"
        let bKeys = "[keys]\ndevice = \"\(fifo)\"\n[keys.map]\nKEY_1 = \"answer\"\nKEY_2 = \"decline\"\nKEY_3 = \"acknowledge\"\nKEY_4 = \"call_missed\"\nKEY_5 = \"call_back\"\nKEY_ESC = \"hang_up\""
        // A's missed calls (B finding it busy) are not reminded: its recording must hold only its own tones.
        try rooms.start("rooma", calls: "missed_reminder_s = 0")
        try rooms.start("roomb", calls: bCalls, extra: bKeys)
        try rooms.start("roomc", calls: "history_max_age_days = 30")
        XCTAssertTrue(rooms.waitOnline("rooma", ["roomb", "roomc"]))
        XCTAssertTrue(rooms.waitOnline("roomb", ["rooma", "roomc"]))
        XCTAssertEqual(rooms.history("roomc").map(\.callID), [CallID(0xA2)], "the entry older than 30 days is dropped at start")
        let keys = try FIFOKeyWriter(path: fifo)
        let ctl = Repo.builtProgram("intercomctl")
        func intercomctl(_ room: String, _ args: [String]) throws -> String {
            try Command.run(ctl, args + ["--socket", rooms.room(room).socket])
        }
        let recorders = try ["rooma", "roomb", "roomc"].map { id in
            (id, try RoomRecorder(room: rooms.room(id).rig, path: "\(rooms.dir)/\(id)-speaker.wav"))
        }
        Thread.sleep(forTimeInterval: 0.3)
        func idle() -> Bool { ["rooma", "roomb", "roomc"].allSatisfy(rooms.isIdle) }
        /// A calls B and waits until B rings.
        func aRingsB() throws {
            _ = try rooms.control("rooma", .perform(.call(button: "roomb")))
            XCTAssertTrue(rooms.wait(3) { rooms.status("roomb")?.call != nil })
        }
        func pause() { Thread.sleep(forTimeInterval: 0.7) }  // lets the last tone play out before the next

        // 1-4: A calls B, B rings until answered by key; mute tones at A; A hangs up.
        _ = try rooms.control("rooma", .perform(.call(button: "roomb")))
        Thread.sleep(forTimeInterval: 3.4)
        XCTAssertEqual(rooms.status("roomb")?.call?.connected, false, "with auto-answer off B still rings after 3.4 s (its chime twice)")
        keys.press(2 + 0)  // KEY_1: answer
        XCTAssertTrue(rooms.wait(3) { rooms.isConnected("rooma") && rooms.isConnected("roomb") }, "answered by key")
        pause()
        _ = try rooms.control("rooma", .perform(.setMicrophoneMuted(true)))
        pause()
        _ = try rooms.control("rooma", .perform(.setMicrophoneMuted(false)))
        pause()
        _ = try rooms.control("rooma", .perform(.hangUp))
        XCTAssertTrue(rooms.wait(3, idle))
        pause()

        // 5: do-not-disturb at B: A is declined.
        _ = try rooms.control("roomb", .perform(.setDoNotDisturb(true)))
        pause()
        _ = try rooms.control("rooma", .perform(.call(button: "roomb")))
        XCTAssertTrue(rooms.wait(3, idle))
        pause()
        _ = try rooms.control("roomb", .perform(.setDoNotDisturb(false)))
        pause()
        // The call refused by do-not-disturb is a missed call for B: acknowledged with intercomctl.
        XCTAssertEqual(rooms.status("roomb")?.missedCalls, 1)
        XCTAssertTrue(try intercomctl("roomb", ["acknowledge", "--all"]).contains("acknowledged"))
        XCTAssertEqual(rooms.status("roomb")?.missedCalls, 0)
        pause()

        // 6: C calls B, B declines with intercomctl; B calls back (key) and reaches C.
        _ = try rooms.control("roomc", .perform(.call(button: "roomb")))
        XCTAssertTrue(rooms.wait(3) { rooms.status("roomb")?.call != nil })
        Thread.sleep(forTimeInterval: 1)
        _ = try intercomctl("roomb", ["decline"])
        XCTAssertTrue(rooms.wait(3, idle))
        XCTAssertEqual(rooms.history("roomc").last?.participants.first?.status, .declined(.refused), "C sees B refused")
        pause()
        keys.press(2 + 4)  // KEY_5: call back
        XCTAssertTrue(rooms.wait(3) { rooms.status("roomb")?.call?.participants.map(\.room.value) == ["roomc"] }, "B's call back goes to C")
        XCTAssertTrue(rooms.wait(5) { rooms.isConnected("roomb") })
        pause()
        _ = try rooms.control("roomb", .perform(.hangUp))
        XCTAssertTrue(rooms.wait(3, idle))
        pause()

        // Decline by key and by command, answer by command.
        try aRingsB()
        keys.press(2 + 1)  // KEY_2: decline
        XCTAssertTrue(rooms.wait(3, idle), "declined by key")
        XCTAssertEqual(rooms.history("rooma").last?.participants.first?.status, .declined(.refused))
        pause()
        try aRingsB()
        XCTAssertEqual(try rooms.control("roomb", .perform(.decline)), .success(.done))
        XCTAssertTrue(rooms.wait(3, idle), "declined by command")
        pause()
        try aRingsB()
        XCTAssertEqual(try rooms.control("roomb", .perform(.answer)), .success(.done))
        XCTAssertTrue(rooms.wait(3) { rooms.isConnected("rooma") && rooms.isConnected("roomb") }, "answered by command")
        _ = try rooms.control("roomb", .perform(.hangUp))
        XCTAssertTrue(rooms.wait(3, idle))
        pause()

        // 7: A and C talk; B finds A busy.
        _ = try rooms.control("rooma", .perform(.call(button: "roomc")))
        XCTAssertTrue(rooms.wait(5) { rooms.isConnected("roomc") })
        _ = try rooms.control("roomb", .perform(.call(button: "rooma")))
        XCTAssertTrue(rooms.wait(3) { rooms.isIdle("roomb") })
        pause()
        _ = try rooms.control("rooma", .perform(.hangUp))
        XCTAssertTrue(rooms.wait(3, idle))
        pause()

        // 8: A calls B and C; B answers with intercomctl; C leaves (A hears it); A hangs up.
        _ = try rooms.control("rooma", .perform(.call(button: "all")))
        XCTAssertTrue(rooms.wait(5) { rooms.isConnected("roomc") && rooms.status("roomb")?.call != nil })
        XCTAssertTrue(try intercomctl("roomb", ["answer"]).contains("answered"))
        XCTAssertTrue(rooms.wait(3) { rooms.isConnected("roomb") })
        pause()
        _ = try rooms.control("roomc", .perform(.hangUp))
        pause()
        _ = try rooms.control("rooma", .perform(.hangUp))
        XCTAssertTrue(rooms.wait(3, idle))
        pause()

        // 9: a key that can do nothing.
        keys.press(1)  // KEY_ESC: hang up, with no call
        pause()

        // 10: B's ring timeout (4.5 s) keeps a missed call, reminded every 2 s; it survives a
        // restart; a second one; B acknowledges one by key and calls the other back by key.
        _ = try rooms.control("rooma", .perform(.call(button: "roomb")))
        XCTAssertTrue(rooms.wait(6, idle), "the ring timeout ends the call on both sides")
        XCTAssertEqual(rooms.history("roomb").last?.outcome, .missed)
        XCTAssertEqual(rooms.history("roomb").last?.acknowledged, false)
        XCTAssertEqual(rooms.status("roomb")?.missedCalls, 1)
        Thread.sleep(forTimeInterval: 2.5)
        XCTAssertEqual(rooms.stop("roomb"), 0)
        try rooms.start("roomb", calls: bCalls, extra: bKeys)
        XCTAssertEqual(rooms.status("roomb")?.missedCalls, 1, "the missed call survives a restart")
        XCTAssertTrue(rooms.waitOnline("rooma", ["roomb"]))
        let keys2 = try FIFOKeyWriter(path: fifo)
        _ = try rooms.control("rooma", .perform(.call(button: "roomb")))
        XCTAssertTrue(rooms.wait(6, idle))
        XCTAssertEqual(rooms.status("roomb")?.missedCalls, 2)
        keys2.press(2 + 2)  // KEY_3: acknowledge the oldest
        XCTAssertTrue(rooms.wait(2) { rooms.status("roomb")?.missedCalls == 1 }, "acknowledged by key")
        pause()
        keys2.press(2 + 3)  // KEY_4: call the missed caller
        XCTAssertTrue(rooms.wait(5) { rooms.isConnected("roomb") }, "the missed caller answers")
        XCTAssertEqual(rooms.status("roomb")?.call?.participants.map(\.room.value), ["rooma"])
        XCTAssertTrue(rooms.wait(2) { rooms.status("roomb")?.missedCalls == 0 }, "calling back acknowledges it")
        XCTAssertEqual(rooms.history("roomb").filter(\.awaitsAcknowledgement).count, 0)
        pause()
        _ = try rooms.control("roomb", .perform(.hangUp))
        XCTAssertTrue(rooms.wait(3, idle))
        Thread.sleep(forTimeInterval: 1)
        for (_, r) in recorders { r.stop() }

        // C's age limit holds after a restart too.
        XCTAssertEqual(rooms.stop("roomc"), 0)
        try rooms.start("roomc", calls: "history_max_age_days = 30")
        XCTAssertFalse(rooms.history("roomc").contains { $0.callID == CallID(0xA1) })
        XCTAssertTrue(rooms.history("roomc").contains { $0.callID == CallID(0xA2) })

        let expected: [String: Set<String>] = [
            "rooma": ["ringback", "connected", "mic_muted", "mic_unmuted", "call_ended", "declined", "participant_left",
                      "not_reached", "chime"],
            "roomb": ["chime", "connected", "call_ended", "dnd_on", "dnd_off", "ringback", "busy", "error", "missed_call",
                      "acknowledged"],
            "roomc": ["ringback", "chime", "connected", "declined", "call_ended"],
        ]
        // That none of A's in-call tones reaches B even faintly is an acoustic bar on A's echo
        // canceller: InCallToneRigTests measures it, with the machine's stops taken into account.
        for (id, r) in recorders {
            let got = try Self.heard(r.path)
            print("terminal tones: \(id) heard \(got.sorted().joined(separator: ", "))")
            XCTAssertEqual(got.subtracting(expected[id]!), [], "\(id) heard tones that are not its own: \(r.path)")
            XCTAssertEqual(expected[id]!.subtracting(got), [], "\(id) did not hear: \(r.path)")
        }
    }
}
