import Calls
import Control
import Foundation
import Keys
import SignalTools
import TestSupport
import XCTest

/// The users' acceptance scenarios with real daemons on the rig: state through the control
/// socket, audio by signal measurement (who hears whom).
final class CallTests: XCTestCase {
    /// Speech quality, asserted where two rooms share the rig's sound server.
    static let minSTOI = 0.80
    /// How far below the talker in the caller's room a callee may hear another callee (the
    /// caller's residual echo): 16 dB without the residual echo gate, 32-60 dB with it on the
    /// four-room rig (`Quality.minSTOIManyRooms`); a stream forwarded by mistake would be 0 dB.
    static let minLeakAttenuationDB = 30.0

    /// A talker not heard in a room: what reaches it (another room's residual echo, or nothing)
    /// is `minLeakAttenuationDB` below the same talker heard where it should be. Its level
    /// decides; STOI, blind to level, reads the shape of a leak at -85 dBFS as 0.39-0.62.
    static func checkNotHeard(_ c: Checks, _ leak: Quality, below heard: Quality, _ what: String) {
        c.check(leak.levelDb < heard.levelDb - minLeakAttenuationDB,
                "\(what): \(leak.levelDb) dBFS, less than \(minLeakAttenuationDB) dB below \(heard.levelDb) dBFS where it is heard (\(leak))")
    }

    /// A recording's level every half second (dBFS) and the caller's echo chain, printed with a
    /// leak check so that a failure shows when the leak came and what the canceller did.
    static func leakTrace(_ path: String, caller: DaemonProcess?) -> String {
        var trace = "?"
        if let samples = try? WAVAudio.read(path: path).samples {
            let x = Signals.toFloat(samples), half = 24_000
            trace = stride(from: 0, to: max(0, x.count - half + 1), by: half)
                .map { String(format: "%.0f", Levels.rmsDB(Array(x[$0..<($0 + half)]))) }.joined(separator: " ")
        }
        guard let a = try? caller?.statistics().audio else { return "levels per 0.5 s: \(trace)" }
        return "levels per 0.5 s: \(trace); caller's echo: ERLE \(String(format: "%.1f", a.echoReturnLossEnhancementDB)) dB, "
            + "delay \(a.echoDelayMs.map { String(format: "%.1f", $0) } ?? "-") ms, resets \(a.echoCancellerResets), "
            + "realignments \(a.echoCancellerRealignments), reference moves \(a.echoReferenceMoves), gated frames \(a.echoGatedFrames), xruns \(a.xruns)"
    }

    private func heard(_ r: TalkerProbe.Result) throws -> Quality {
        try Quality.measure(reference: r.clipPath, recording: r.recordingPath)
    }

    /// 1:1: A calls B with a button; B's speaker plays the chime before the audio opens, B answers
    /// by itself, both are connected and hear each other; B (the callee) hangs up and the call
    /// ends on both sides; both histories keep it.
    func testOneToOneCallChimesAutoAnswersCarriesSpeechBothWaysAndEndsWhenTheCalleeHangsUp() throws {
        try Rig.require()
        try measureWithRetries("1:1 call") { c in
            let rooms = try CallRooms(["roomA", "roomB"])
            defer { rooms.stopAll() }
            try rooms.start("rooma")
            try rooms.start("roomb")
            XCTAssertTrue(rooms.waitOnline("rooma", ["roomb"]), "A sees B online")

            let speaker = try RoomRecorder(room: "roomB", path: "\(rooms.dir)/roomB-chime.wav")
            Thread.sleep(forTimeInterval: 0.3)
            let placed = try rooms.control("rooma", .perform(.call(button: "roomb")))
            guard case .success(.callPlaced(_, let to)) = placed else {
                XCTFail("call placed: \(placed)")
                return []
            }
            XCTAssertEqual(to.map(\.value), ["roomb"])
            XCTAssertEqual(rooms.participant(rooms.status("rooma"), "roomb"), .ringing, "B rings first")
            XCTAssertTrue(rooms.wait(5) { rooms.isConnected("rooma") && rooms.isConnected("roomb") }, "auto-answered: connected on both sides")
            Thread.sleep(forTimeInterval: 0.5)
            speaker.stop()
            let chime = try WAVAudio.read(path: speaker.path).samples
            XCTAssertGreaterThan(Levels.rmsDB(Signals.toFloat(chime)), -45, "the chime was played in B: \(speaker.path)")

            let ab = try c.probed(TalkerProbe(mouth: "roomA", ear: "roomB").run(clipPath: Speech.roomA(), folder: rooms.dir, name: "roomB-speaker"))
            let ba = try c.probed(TalkerProbe(mouth: "roomB", ear: "roomA").run(clipPath: Speech.roomB(), folder: rooms.dir, name: "roomA-speaker"))
            let q = try Quality.measure([(ab.clipPath, ab.recordingPath), (ba.clipPath, ba.recordingPath)])
            print("calls 1:1: A → B \(q[0]); B → A \(q[1]); \(rooms.streamHealth())")
            c.check(q[0].stoi >= Self.minSTOI, "A is heard in B: \(q[0])")
            c.check(q[1].stoi >= Self.minSTOI, "B is heard in A: \(q[1])")

            XCTAssertEqual(try rooms.control("roomb", .perform(.hangUp)), .success(.done))
            XCTAssertTrue(rooms.wait(3) { rooms.isIdle("rooma") && rooms.isIdle("roomb") }, "the callee's hang-up ends the call on both sides")
            XCTAssertEqual(rooms.history("rooma").last?.outcome, .finished, "\(rooms.history("rooma"))")
            XCTAssertEqual(rooms.history("roomb").last?.direction, .incoming)
            let all = Array(rooms.daemons.values)
            XCTAssertEqual(rooms.stop("rooma"), 0)
            XCTAssertEqual(rooms.stop("roomb"), 0)
            return all
        }
    }

    /// 1:n with three callees: A is heard in B, C and D; B is heard in A but not in C (callees do
    /// not hear each other); C leaves and B and D stay connected; A hangs up and all is idle.
    func testGroupCallEveryCalleeHearsTheCallerCalleesDoNotHearEachOtherAndOneMayLeave() throws {
        try Rig.require()
        try measureWithRetries("1:3 call") { c in
            let rooms = try CallRooms(["roomA", "roomB", "roomC", "roomD"])
            defer { rooms.stopAll() }
            for id in ["rooma", "roomb", "roomc", "roomd"] { try rooms.start(id) }
            XCTAssertTrue(rooms.waitOnline("rooma", ["roomb", "roomc", "roomd"]), "A sees everyone online")

            guard case .success(.callPlaced(_, let to)) = try rooms.control("rooma", .perform(.call(button: "all"))) else {
                XCTFail("call placed")
                return []
            }
            XCTAssertEqual(Set(to.map(\.value)), ["roomb", "roomc", "roomd"])
            XCTAssertTrue(rooms.wait(5) { ["rooma", "roomb", "roomc", "roomd"].allSatisfy(rooms.isConnected) }, "everyone connected")
            let a = rooms.status("rooma")
            for callee in ["roomb", "roomc", "roomd"] { XCTAssertEqual(rooms.participant(a, callee), .connected, "A sees \(callee) connected") }

            let earC = try RoomRecorder(room: "roomC", path: "\(rooms.dir)/roomC-A.wav")
            let earD = try RoomRecorder(room: "roomD", path: "\(rooms.dir)/roomD-A.wav")
            let ab = try c.probed(TalkerProbe(mouth: "roomA", ear: "roomB").run(clipPath: Speech.roomA(), folder: rooms.dir, name: "roomB-A"))
            earC.stop(); earD.stop()
            // What C hears of B is measured from here: A's last words, late after a stall of C's
            // audio, would count as B's leak (the start of this recording reads -66 dBFS when
            // taken at once, against -100 to -108 while B talks).
            Thread.sleep(forTimeInterval: 0.5)
            let echoBefore = try? rooms.daemons["rooma"]?.statistics().audio
            let earC2 = try RoomRecorder(room: "roomC", path: "\(rooms.dir)/roomC-B.wav")
            let ba = try c.probed(TalkerProbe(mouth: "roomB", ear: "roomA").run(clipPath: Speech.roomB(), folder: rooms.dir, name: "roomA-B"))
            earC2.stop()
            let echoAfter = try? rooms.daemons["rooma"]?.statistics().audio
            let health = rooms.streamHealth()
            let q = try Quality.measure([(ab.clipPath, ab.recordingPath), (ab.clipPath, earC.path), (ab.clipPath, earD.path),
                                         (ba.clipPath, ba.recordingPath), (ba.clipPath, earC2.path)])
            print("calls 1:3: A → B \(q[0].stoi), A → C \(q[1].stoi), A → D \(q[2].stoi), B → A \(q[3].stoi), B → C \(q[4].stoi); \(health)")
            for (i, who) in ["B", "C", "D"].enumerated() {
                c.check(q[i].stoi >= Quality.minSTOIManyRooms, "A is heard in \(who): \(q[i])")
            }
            c.check(q[3].stoi >= Quality.minSTOIManyRooms, "B is heard in A: \(q[3])")
            // B is not heard in C: what leaks is A's residual echo, far below B in A's room.
            Self.checkNotHeard(c, q[4], below: q[3], "B is not heard in C")
            // The canceller's model is of the path before a move: it learns the new one anew, and
            // on the rig the path moves only when the sound server holds A's streams up.
            if let echoBefore, let echoAfter, q[4].levelDb >= q[3].levelDb - Self.minLeakAttenuationDB {
                let moves = echoAfter.echoReferenceMoves - echoBefore.echoReferenceMoves
                let repairs = echoAfter.echoCancellerRealignments - echoBefore.echoCancellerRealignments
                if moves + repairs > 0 { c.rigFault("A's echo path moved while B talked (reference moves \(moves), re-pairings \(repairs))") }
            }
            print("calls 1:3: B in C, \(Self.leakTrace(earC2.path, caller: rooms.daemons["rooma"]))")

            XCTAssertEqual(try rooms.control("roomc", .perform(.hangUp)), .success(.done))
            XCTAssertTrue(rooms.wait(3) { rooms.isIdle("roomc") && rooms.participant(rooms.status("rooma"), "roomc") == .left }, "C left")
            XCTAssertTrue(rooms.isConnected("roomb") && rooms.isConnected("roomd") && rooms.isConnected("rooma"), "B and D stay")

            XCTAssertEqual(try rooms.control("rooma", .perform(.hangUp)), .success(.done))
            XCTAssertTrue(rooms.wait(3) { ["rooma", "roomb", "roomc", "roomd"].allSatisfy(rooms.isIdle) }, "the caller's hang-up ends it for all")
            let daemons = Array(rooms.daemons.values)
            rooms.stopAll()
            return daemons
        }
    }

    /// D refuses calls: A's call is declined with the reason, D keeps a missed-call entry; B is in a
    /// call: C's call to B is declined as busy; C is offline: A's call is unavailable, and C gets
    /// the missed call when it comes back. History and do-not-disturb survive a restart.
    func testDoNotDisturbBusyAndOfflineAreShownToTheCallerAndKeptAsMissed() throws {
        try Rig.require()
        let rooms = try CallRooms(["roomA", "roomB", "roomC", "roomD"])
        defer { rooms.stopAll() }
        for id in ["rooma", "roomb", "roomc", "roomd"] { try rooms.start(id) }
        XCTAssertTrue(rooms.waitOnline("rooma", ["roomb", "roomc", "roomd"]))

        XCTAssertEqual(try rooms.control("roomd", .perform(.setDoNotDisturb(true))), .success(.doNotDisturb(true)))
        _ = try rooms.control("rooma", .perform(.call(button: "roomd")))
        XCTAssertTrue(rooms.wait(3) { rooms.isIdle("rooma") && rooms.history("rooma").count == 1 }, "the refused call ends at once")
        let refused = rooms.history("rooma").last
        XCTAssertEqual(refused?.outcome, .notReached, "\(String(describing: refused))")
        XCTAssertEqual(refused?.participants.first?.status, .declined(.doNotDisturb), "A sees why: \(String(describing: refused))")
        XCTAssertTrue(rooms.wait(2) { rooms.history("roomd").last?.outcome == .missed }, "D keeps a missed call: \(rooms.history("roomd"))")

        _ = try rooms.control("rooma", .perform(.call(button: "roomb")))
        XCTAssertTrue(rooms.wait(5) { rooms.isConnected("roomb") })
        _ = try rooms.control("roomc", .perform(.call(button: "roomb")))
        XCTAssertTrue(rooms.wait(3) { rooms.isIdle("roomc") }, "busy ends C's attempt")
        XCTAssertEqual(rooms.history("roomc").last?.participants.first?.status, .declined(.busy), "C sees B busy: \(rooms.history("roomc"))")
        XCTAssertTrue(rooms.isConnected("rooma") && rooms.isConnected("roomb"), "A ↔ B undisturbed")
        _ = try rooms.control("rooma", .perform(.hangUp))
        XCTAssertTrue(rooms.wait(3) { rooms.isIdle("rooma") && rooms.isIdle("roomb") })

        XCTAssertEqual(rooms.stop("roomc"), 0)
        XCTAssertTrue(rooms.wait(8) {
            guard case .success(.rooms(let d))? = try? rooms.control("rooma", .rooms) else { return false }
            return d.rooms.first { $0.id.value == "roomc" }?.presence.online == false
        }, "A sees C offline")
        _ = try rooms.control("rooma", .perform(.call(button: "roomc")))
        XCTAssertTrue(rooms.wait(5) { rooms.isIdle("rooma") }, "unavailable ends the attempt")
        XCTAssertEqual(rooms.history("rooma").last?.outcome, .notReached)
        try rooms.start("roomc")
        XCTAssertTrue(rooms.wait(8) { rooms.history("roomc").contains { $0.outcome == .missed && $0.caller.value == "rooma" } },
                      "the missed call reaches C when it is back: \(rooms.history("roomc"))")

        // A's history and D's do-not-disturb survive a restart.
        let before = rooms.history("rooma")
        XCTAssertEqual(rooms.stop("rooma"), 0)
        XCTAssertEqual(rooms.stop("roomd"), 0)
        try rooms.start("rooma")
        try rooms.start("roomd")
        XCTAssertEqual(rooms.history("rooma"), before, "the history is kept across a restart")
        XCTAssertEqual(rooms.status("roomd")?.doNotDisturb, true, "do-not-disturb is kept across a restart")
    }

    /// In a call: A's microphone mute reaches B as silence and B is told; B's speaker mute silences
    /// B's speaker; 40 control clients sending garbage leave the call unharmed; intercomctl reads
    /// the status from the real daemon; and a key press read from A's key device (a FIFO) hangs up.
    func testMuteReachesTheOtherSideGarbageClientsLeaveTheCallAloneAndAKeyHangsUp() throws {
        try Rig.require()
        try measureWithRetries("mute, garbage, key") { c in
            let rooms = try CallRooms(["roomA", "roomB"])
            defer { rooms.stopAll() }
            let fifo = "\(rooms.dir)/roomA-keys"
            XCTAssertEqual(mkfifo(fifo, 0o600), 0)
            try rooms.start("rooma", extra: "[keys]\ndevice = \"\(fifo)\"\n[keys.map]\nKEY_ESC = \"hang_up\"")
            try rooms.start("roomb")
            XCTAssertTrue(rooms.waitOnline("rooma", ["roomb"]))
            _ = try rooms.control("rooma", .perform(.call(button: "roomb")))
            XCTAssertTrue(rooms.wait(5) { rooms.isConnected("rooma") && rooms.isConnected("roomb") })

            // Mic mute: B hears silence and is told.
            let events = try ControlClient(path: rooms.room("roomb").socket, timeout: 5)
            defer { events.close() }
            _ = try events.send(.subscribe)
            XCTAssertEqual(try rooms.control("rooma", .perform(.setMicrophoneMuted(true))), .success(.mute(MuteState(microphone: true, speaker: false))))
            var told = false
            let deadline = Date().addingTimeInterval(3)
            while !told, Date() < deadline, let event = try events.readEvent(timeout: 0.5) {
                told = event == .call(.muteChanged(room: RoomID("rooma")!, MuteState(microphone: true, speaker: false)))
            }
            XCTAssertTrue(told, "B is told that A muted its microphone")
            // B answered as its incoming-call chime (0.6 s, 60 whole frames) was mixed; its last one
            // or two frames were still in the sound server's buffer, and a probe started at once
            // recorded them: 10-20 ms of the chime's 989 Hz note, identical samples in every run,
            // -62.0 or -58.8 dBFS over the recording (the mute check's old failures). A's voice cannot
            // reach B that early; waiting for B's buffers to play out measures only what A sends.
            usleep(300_000)
            let muted = try TalkerProbe(mouth: "roomA", ear: "roomB").run(clipPath: Speech.roomA(), folder: rooms.dir, name: "roomB-A-muted")
            let mutedLevel = Levels.rmsDB(Signals.toFloat(muted.recording))
            XCTAssertLessThan(mutedLevel, -60, "A muted: B's speaker is silent (\(mutedLevel) dBFS)")
            _ = try rooms.control("rooma", .perform(.setMicrophoneMuted(false)))

            // Speaker mute in B, by the name a key's action has (one vocabulary: protocol 2).
            XCTAssertEqual(try rooms.control("roomb", .perform(.toggleSpeakerMute)), .success(.mute(MuteState(microphone: false, speaker: true))))
            let deaf = try TalkerProbe(mouth: "roomA", ear: "roomB").run(clipPath: Speech.roomA(), folder: rooms.dir, name: "roomB-A-deaf")
            let deafLevel = Levels.rmsDB(Signals.toFloat(deaf.recording))
            XCTAssertLessThan(deafLevel, -60, "B's speaker muted: silent (\(deafLevel) dBFS)")
            XCTAssertEqual(try rooms.control("roomb", .perform(.toggleSpeakerMute)), .success(.mute(MuteState())))

            // Forty clients at once, each sending garbage; then the call still carries speech.
            var abusers: [ControlClient] = []
            for i in 0..<40 {
                guard let c = try? ControlClient(path: rooms.room("rooma").socket, timeout: 2) else { continue }
                try? c.sendLine(i % 2 == 0 ? "{\"id\": \(i), \"cmd\": \"warp\"}" : String(repeating: "\u{7}garbage{[", count: 50))
                abusers.append(c)
            }
            // Repeated (at most 3 times) only when the probe counted xruns during a failing attempt.
            var q = try Quality.measure(reference: Speech.roomA(), recording: Speech.roomA())
            for attempt in 1...3 {
                let heard = try TalkerProbe(mouth: "roomA", ear: "roomB").run(clipPath: Speech.roomA(), folder: rooms.dir, name: "roomB-A-abused-\(attempt)")
                q = try Quality.measure(reference: heard.clipPath, recording: heard.recordingPath)
                if q.stoi >= Self.minSTOI || heard.xruns == 0 || attempt == 3 { break }
                Retries.record("calls: garbage clients", attempt: attempt, cause: "probe xruns \(heard.xruns)", failures: ["\(q)"])
            }
            for c in abusers { c.close() }
            print("calls: muted \(mutedLevel) dBFS, speaker muted \(deafLevel) dBFS, with \(abusers.count) garbage clients \(q)")
            c.check(q.stoi >= Self.minSTOI, "the call is unharmed by garbage clients: \(q)")
            // The server drops the closed clients as it reads their ends; until then a new client may
            // find all `max_clients` places taken (answered "too many control clients").
            c.check(rooms.wait(2) { rooms.isConnected("rooma") && rooms.isConnected("roomb") }, "still connected after the garbage clients")

            // intercomctl against the daemon.
            let ctl = URL(fileURLWithPath: DaemonProcess.binary).deletingLastPathComponent().appendingPathComponent("intercomctl").path
            let out = try Command.run(ctl, ["--socket", rooms.room("rooma").socket, "status", "--json"])  // throws unless exit 0
            XCTAssertTrue(out.contains("roomb") && out.contains("connected"), out)

            // The hang-up key.
            let keys = try FIFOKeyWriter(path: fifo)
            keys.press(1)  // KEY_ESC
            XCTAssertTrue(rooms.wait(3) { rooms.isIdle("rooma") && rooms.isIdle("roomb") }, "the key hung up on both sides")
            let daemons = Array(rooms.daemons.values)
            rooms.stopAll()
            return daemons
        }
    }

    /// Call set-up time for BENCHMARKS.md, ring time 0 (the chime excluded), 1:1 and 1:4, 7 calls
    /// each, from the control command to (a) the caller's events that every callee is connected
    /// (signalling) and (b) every callee's status showing the caller's stream played on its speaker
    /// (audio flowing: frames decoded out of the jitter buffer, so its start-up delay is included).
    /// Asserts that every call connects and its audio flows within 2 s; the figures are printed.
    func testCallSetupTimeFrom1to1And1to4CommandsIsMeasured() throws {
        try Rig.require()
        let all = ["rooma", "roomb", "roomc", "roomd", "roome"]
        let rooms = try CallRooms(["roomA", "roomB", "roomC", "roomD", "roomE"], ringMs: 0)
        defer { rooms.stopAll() }
        for id in all { try rooms.start(id) }
        XCTAssertTrue(rooms.waitOnline("rooma", Array(all.dropFirst())))
        let events = try ControlClient(path: rooms.room("rooma").socket, timeout: 5)
        defer { events.close() }
        _ = try events.send(.subscribe)
        let callerSource = "127.0.0.1:\(rooms.room("rooma").media)"
        // One open connection per callee: polling costs the daemons as little as possible.
        var clients: [String: ControlClient] = [:]
        for id in all.dropFirst() { clients[id] = try ControlClient(path: rooms.room(id).socket, timeout: 5) }
        defer { clients.values.forEach { $0.close() } }
        func playsCaller(_ id: String) -> Bool {
            guard case .success(.status(let s))? = try? clients[id]!.run(.status) else { return false }
            return s.media.contains { $0.source == callerSource && $0.played > 0 }
        }
        var connected: [String: [Double]] = [:], flowing: [String: [Double]] = [:]
        for (button, callees) in [("roomb", ["roomb"]), ("all", Array(all.dropFirst()))] {
            for _ in 0..<7 {
                XCTAssertFalse(callees.contains(where: playsCaller), "no audio from A before the call")
                let t0 = Date()
                guard case .success(.callPlaced) = try rooms.control("rooma", .perform(.call(button: button))) else { return XCTFail("call \(button)") }
                // One loop watches both: the caller's events (1 ms read timeout) and each callee's status.
                var silent = Set(callees), waiting = Set(callees)
                var flowMs: Double?, connectedMs: Double?
                while (flowMs == nil || connectedMs == nil), Date().timeIntervalSince(t0) < 2 {
                    // Every event queued so far (a timeout keeps a partly read line for the next read).
                    while let line = (try? events.readLine(timeout: 0.0005)) ?? nil {
                        if line.contains("participant_status"), line.contains("\"connected\"") {
                            waiting = waiting.filter { !line.contains("\"\($0)\"") }
                        }
                    }
                    silent = silent.filter { !playsCaller($0) }
                    let ms = Date().timeIntervalSince(t0) * 1000
                    if waiting.isEmpty, connectedMs == nil { connectedMs = ms }
                    if silent.isEmpty, flowMs == nil { flowMs = ms }
                }
                XCTAssertTrue(silent.isEmpty, "\(button): no audio from A within 2 s at \(silent)")
                XCTAssertTrue(waiting.isEmpty, "\(button): not connected: \(waiting)")
                if let flowMs, let connectedMs {
                    flowing[button, default: []].append(flowMs)
                    connected[button, default: []].append(connectedMs)
                }
                _ = try rooms.control("rooma", .perform(.hangUp))
                XCTAssertTrue(rooms.wait(3) { all.allSatisfy(rooms.isIdle) })
                while (try? events.readLine(timeout: 0.2)) ?? nil != nil {}
            }
        }
        for button in ["roomb", "all"] {
            func median(_ v: [Double]) -> String {
                let s = v.sorted()
                return String(format: "median %.1f ms [%.1f-%.1f]", s[s.count / 2], s.first!, s.last!)
            }
            print("calls: set-up 1:\(button == "all" ? all.count - 1 : 1) over \(flowing[button]!.count) calls: "
                  + "audio playing at every callee \(median(flowing[button]!)); connected (signalling, upper bound) \(median(connected[button]!))")
        }
    }
}
