import Calls
import Control
import Foundation
import Glibc
import Posix
import RigKit
import SignalTools
import SiteSecurity
import TestSupport
import XCTest

/// Enrolment through a real daemon and the administrator's real tool (docs/identity.md): a new
/// terminal makes its key on its first start and is pending with a code; the tool lists it without
/// the code, refuses a wrong code and approves with the code read at the box; the signed, published
/// version makes the terminal approved for its room; one command and a version revoke it.
/// No sound card is needed: enrolment is signalling and files.
final class EnrolmentRigTests: XCTestCase {
    func testATerminalIsPendingUntilApprovedWithTheCodeReadAtItAndRevokedByOneCommand() throws {
        let rooms = try CallRooms(["desk1"], soundCards: false)
        defer { rooms.stopAll() }
        let folder = rooms.dir + "/site"
        try SiteKit.create(folder, document: SiteKit.document(rooms))  // versions 1 and 2
        let keyPath = "\(rooms.dir)/desk1-terminal.key"
        XCTAssertFalse(FileManager.default.fileExists(atPath: keyPath))
        let a = try SiteKit.start(rooms, "desk1", folder: folder)

        var st = stat()
        XCTAssertEqual(stat(keyPath, &st), 0, "the first start made the key")
        XCTAssertEqual(st.st_mode & 0o777, 0o600)
        let pending = try XCTUnwrap(a.waitForStatistics(timeout: 5) { $0.site?.terminal != nil }?.site?.terminal, a.log)
        XCTAssertEqual(pending.standing, .pending)
        let code = try XCTUnwrap(pending.enrolmentCode)
        let secret = try String(contentsOfFile: keyPath, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertFalse(a.log.contains(secret), "the key file's contents never reach the log")

        let listed = try SiteKit.run(["pending", "--dir", folder])
        XCTAssertEqual(listed.status, 0, listed.output)
        XCTAssertTrue(listed.output.contains("terminal \(pending.key), set up for room desk1") && listed.output.contains(": pending"), listed.output)
        XCTAssertFalse(listed.output.contains(code) || listed.output.contains(code.replacingOccurrences(of: " ", with: "")),
                       "the tool never learns the code from the network: \(listed.output)")

        let wrongCode = code == "111 111 111 111" ? "222 222 222 222" : "111 111 111 111"
        let wrong = try SiteKit.run(["approve", "--dir", folder, "--room", "desk1", "--code", wrongCode])
        XCTAssertEqual(wrong.status, 1, wrong.output)
        XCTAssertTrue(wrong.output.contains("wrongCode"), wrong.output)
        XCTAssertFalse(FileManager.default.fileExists(atPath: folder + "/enrolment.toml"), "a refusal writes nothing")

        let approved = try SiteKit.run(["approve", "--dir", folder, "--room", "desk1", "--code", code])
        XCTAssertEqual(approved.status, 0, approved.output)
        XCTAssertTrue(approved.output.contains("approved terminal \(pending.key) for desk1"), approved.output)
        try SiteKit.sign(folder)  // version 3
        let published = try SiteKit.run(["publish", "--dir", folder])
        XCTAssertTrue(published.output.contains("took version 3"), published.output)
        let inForce = try XCTUnwrap(a.waitForStatistics(timeout: 5) { $0.site?.terminal?.standing == .approved }?.site?.terminal, a.log)
        XCTAssertEqual(inForce.room, "desk1")
        XCTAssertNil(inForce.enrolmentCode, "an approved terminal shows no code")
        XCTAssertTrue(try SiteKit.run(["pending", "--dir", folder]).output.contains(": approved for desk1"))

        // A restart keeps the key, so the approval holds.
        _ = rooms.stop("desk1")
        let again = try SiteKit.start(rooms, "desk1", folder: folder)
        let restarted = try XCTUnwrap(again.waitForStatistics(timeout: 5) { $0.site?.terminal != nil }?.site?.terminal, again.log)
        XCTAssertEqual(restarted.key, pending.key)
        XCTAssertEqual(restarted.standing, .approved)

        let revoked = try SiteKit.run(["revoke", "--dir", folder, "--room", "desk1"])
        XCTAssertEqual(revoked.status, 0, revoked.output)
        try SiteKit.sign(folder)  // version 4
        XCTAssertTrue(try SiteKit.run(["publish", "--dir", folder]).output.contains("took version 4"))
        XCTAssertNotNil(again.waitForStatistics(timeout: 5) { $0.site?.terminal?.standing == .revoked }, again.log)
        XCTAssertTrue(try SiteKit.run(["pending", "--dir", folder]).output.contains(": REVOKED"))
        let refused = try SiteKit.run(["approve", "--dir", folder, "--room", "desk1", "--code", code])
        XCTAssertEqual(refused.status, 1, refused.output)
        XCTAssertTrue(refused.output.contains("revokedIdentity"), refused.output)
    }

    /// Signalling under terminal keys (docs/identity.md): once the document approves terminals,
    /// they seal to each other pair by pair; a pending terminal is heard by nobody and reaches
    /// nobody; an approval takes a terminal in and a revocation puts it out when the version
    /// arrives; a restarted terminal counts one more start and is back at once.
    func testApprovedTerminalsSealPairwiseAPendingOneIsKeptOutAndARevocationHolds() throws {
        let ids = ["desk1", "desk2", "desk3"]
        let rooms = try CallRooms(ids, soundCards: false)
        defer { rooms.stopAll() }
        let folder = rooms.dir + "/site"
        try SiteKit.create(folder, document: SiteKit.document(rooms))  // versions 1 and 2
        for id in ids { try SiteKit.start(rooms, id, folder: folder, lab: false) }
        func stats(_ id: String) -> DaemonStatistics? { try? rooms.daemons[id]?.statistics() }
        func online(_ id: String) -> Set<String> {
            guard case .success(.rooms(let d))? = try? rooms.control(id, .rooms) else { return [] }
            // The others it hears (a terminal's own room is online in its reply).
            return Set(d.rooms.filter { $0.presence.online && $0.id.value != id }.map(\.id.value))
        }
        func code(_ id: String) throws -> String { try XCTUnwrap(stats(id)?.site?.terminal?.enrolmentCode, "\(id) is pending with a code") }
        func approve(_ id: String) throws {
            let r = try SiteKit.run(["approve", "--dir", folder, "--room", id, "--code", try code(id)])
            XCTAssertEqual(r.status, 0, r.output)
        }
        /// Signs and publishes the next version; returns what signing printed.
        @discardableResult
        func publish(_ version: UInt64) throws -> String {
            let signed = try SiteKit.run(["sign", "--dir", folder])
            XCTAssertEqual(signed.status, 0, signed.output)
            let p = try SiteKit.run(["publish", "--dir", folder])
            XCTAssertTrue(p.output.contains("took version \(version)"), p.output)
            for id in ids where rooms.daemons[id] != nil {
                XCTAssertNotNil(rooms.daemons[id]!.waitForStatistics(timeout: 5) { $0.site?.version == version && $0.site?.appliedAt != nil },
                                "\(id) applied version \(version)")
            }
            return signed.output
        }

        // Secure by default: no site key and nothing approved, so nothing goes out or comes in.
        for id in ids { XCTAssertEqual(rooms.status(id)?.security, .unkeyed, "\(id): no key yet") }
        Thread.sleep(forTimeInterval: 1.5)  // hello rounds, were any sent
        for id in ids {
            XCTAssertTrue(online(id).isEmpty, "\(id) hears nobody: \(online(id))")
            XCTAssertEqual(stats(id)?.calls?.datagramsSent, 0, "\(id) sends nothing")
        }
        _ = try rooms.control("desk1", .perform(.call(button: "desk2")))
        let stranger = try UDPSocket(bind: .loopback(port: 0))
        let clearHello = Array("a hello in the clear".utf8)
        _ = clearHello.withUnsafeBytes { stranger.send($0, to: .loopback(port: UInt16(rooms.room("desk1").signalling))) }
        XCTAssertNotNil(rooms.daemons["desk1"]!.waitForStatistics(timeout: 3) { ($0.calls?.refused.silent ?? 0) >= 1 },
                        "a datagram in the clear is refused and counted")
        XCTAssertEqual(stats("desk1")?.calls?.datagramsSent, 0, "a call placed before approval sends nothing")
        XCTAssertNil(rooms.status("desk2")?.call)
        _ = try rooms.control("desk1", .perform(.hangUp))

        // desk1 and desk2 approved, desk3 pending.
        try approve("desk1")
        try approve("desk2")
        let signing = try publish(3)
        XCTAssertTrue(signing.contains("2 of 3 rooms have an approved terminal; silent until approved: desk3"), signing)
        for id in ids { XCTAssertEqual(stats(id)?.calls?.protection, .terminalKeys, "\(id) seals by terminal keys") }
        XCTAssertTrue(rooms.wait(8) { online("desk1") == ["desk2"] && online("desk2") == ["desk1"] && online("desk3").isEmpty },
                      "only the approved hear each other: desk1 \(online("desk1")), desk2 \(online("desk2")), desk3 \(online("desk3"))")
        _ = try rooms.control("desk1", .perform(.call(button: "desk2")))
        XCTAssertTrue(rooms.wait(5) { rooms.isConnected("desk1") && rooms.isConnected("desk2") }, "a call between approved terminals")
        _ = try rooms.control("desk1", .perform(.hangUp))
        XCTAssertTrue(rooms.wait(3) { rooms.isIdle("desk1") && rooms.isIdle("desk2") })
        // The pending terminal sends nothing (everyone would refuse it), not even its call.
        let sentBefore = stats("desk3")?.calls?.datagramsSent
        _ = try rooms.control("desk3", .perform(.call(button: "desk1")))
        let deadline = Date().addingTimeInterval(2)
        while Date() < deadline {
            XCTAssertNil(rooms.status("desk1")?.call, "the pending terminal's call never reaches desk1")
            Thread.sleep(forTimeInterval: 0.1)
        }
        _ = try rooms.control("desk3", .perform(.hangUp))
        XCTAssertNotNil(sentBefore)
        XCTAssertEqual(stats("desk3")?.calls?.datagramsSent, sentBefore, "a pending terminal is silent")

        // desk3 approved while it is off: back with version 3, under which it is silent, it hears
        // version 4 named in the others' announcements, fetches it and is taken in.
        try approve("desk3")
        XCTAssertEqual(rooms.stop("desk3"), 0)
        try publish(4)
        try SiteKit.start(rooms, "desk3", folder: folder, lab: false)
        XCTAssertTrue(rooms.wait(8) { stats("desk3")?.site?.version == 4 && stats("desk3")?.site?.appliedAt != nil },
                      "desk3 fetched and applied the version that approves it")
        let from = stats("desk3")?.site?.arrival?.from
        XCTAssertTrue(from == "desk1" || from == "desk2", "fetched from an approved terminal: \(from ?? "-")")
        XCTAssertTrue(rooms.wait(6) { online("desk1") == ["desk2", "desk3"] && online("desk3") == ["desk1", "desk2"] },
                      "desk3 approved is heard: desk1 \(online("desk1")), desk3 \(online("desk3"))")

        // An announcement for desk3 signed by another key: refused, counted, and desk3's session stays.
        let forger = TerminalSeal(identity: TerminalIdentity(), room: "desk3", boot: 1 << 40, directory: [:])
        let socket = try UDPSocket(bind: .loopback(port: 0))
        forger.announcement().withUnsafeBytes { _ = socket.send($0, to: .loopback(port: UInt16(rooms.room("desk1").signalling))) }
        XCTAssertTrue(rooms.wait(2) { stats("desk1")?.calls?.refused.badSignature == 1 }, "the forged announcement is refused as such")
        Thread.sleep(forTimeInterval: 1.5)
        XCTAssertEqual(online("desk1"), ["desk2", "desk3"], "desk3 is still heard after the forgery")

        // desk2 revoked during a call of desk1 with desk2 and desk3: put out of it at once, at
        // every terminal, and the call with desk3 goes on.
        _ = try rooms.control("desk1", .perform(.callRooms([RoomID("desk2")!, RoomID("desk3")!])))
        XCTAssertTrue(rooms.wait(5) { ids.allSatisfy { rooms.isConnected($0) } }, "a call of the three")
        let revoked = try SiteKit.run(["revoke", "--dir", folder, "--room", "desk2"])
        XCTAssertEqual(revoked.status, 0, revoked.output)
        let published = Date()
        try publish(5)
        XCTAssertEqual(stats("desk2")?.site?.terminal?.standing, .revoked)
        func outOfCall() -> Bool {
            rooms.status("desk1")?.call?.participants.first { $0.room.value == "desk2" }?.status == .left && rooms.isIdle("desk2")
        }
        XCTAssertTrue(rooms.wait(2) { outOfCall() }, "desk2 is out of desk1's call and its own side ended: \(String(describing: rooms.status("desk1")?.call))")
        print("terminal keys: revoked terminal out of the call \(String(format: "%.2f", Date().timeIntervalSince(published))) s after publishing")
        XCTAssertTrue(rooms.isConnected("desk1") && rooms.isConnected("desk3"), "the call with desk3 goes on")
        XCTAssertEqual(rooms.status("desk1")?.call?.participants.first { $0.room.value == "desk3" }?.status, .connected)
        _ = try rooms.control("desk1", .perform(.hangUp))
        XCTAssertTrue(rooms.wait(3) { rooms.isIdle("desk1") && rooms.isIdle("desk3") })
        XCTAssertTrue(rooms.wait(6) { online("desk1") == ["desk3"] && online("desk3") == ["desk1"] },
                      "nobody hears the revoked terminal: desk1 \(online("desk1")), desk3 \(online("desk3"))")
        _ = try rooms.control("desk1", .perform(.call(button: "desk2")))
        Thread.sleep(forTimeInterval: 1.5)
        XCTAssertNil(rooms.status("desk2")?.call, "the revoked terminal is not rung")
        _ = try rooms.control("desk1", .perform(.hangUp))
        XCTAssertTrue(rooms.wait(3) { rooms.isIdle("desk1") })

        // desk1 restarts: a second start, and it is back with desk3 at once.
        let startsFile = "\(rooms.dir)/desk1-terminal.key.starts"
        XCTAssertEqual(try String(contentsOfFile: startsFile, encoding: .utf8), "1\n")
        XCTAssertEqual(rooms.stop("desk1"), 0)
        try SiteKit.start(rooms, "desk1", folder: folder, lab: false)
        XCTAssertEqual(try String(contentsOfFile: startsFile, encoding: .utf8), "2\n")
        var st = stat()
        XCTAssertEqual(stat(startsFile, &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o600)
        XCTAssertTrue(rooms.wait(4) { online("desk1") == ["desk3"] && online("desk3") == ["desk1"] },
                      "the restarted terminal is heard again: desk1 \(online("desk1")), desk3 \(online("desk3"))")
        _ = try rooms.control("desk1", .perform(.call(button: "desk3")))
        XCTAssertTrue(rooms.wait(5) { rooms.isConnected("desk1") && rooms.isConnected("desk3") }, "a call after the restart")
        _ = try rooms.control("desk1", .perform(.hangUp))
        let refusedAtDesk3 = stats("desk3")?.calls?.refused
        print("terminal keys: desk3 refused \(refusedAtDesk3.map { "\($0)" } ?? "-"); desk1 held \(stats("desk1")?.calls?.awaitingSession ?? -1) sends until a session was heard")
        XCTAssertEqual(refusedAtDesk3?.authentication, 0, "nothing failed to open between approved terminals")
    }

    /// Under terminal keys freshness needs no clock (docs/identity.md): a terminal whose clock
    /// is 3 h off, and one whose clock reads 1970 (no saved time after a power cut), are heard,
    /// called and call like any other. Their clocks are faked by libfaketime (the monotonic
    /// clock, which timers run on, stays true).
    func testTerminalsWithAClockHoursOffOrNoneAtAllWork() throws {
        let library = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"
        XCTAssertTrue(FileManager.default.fileExists(atPath: library), "libfaketime (scripts/setup.sh installs it)")
        let ids = ["desk1", "desk2", "desk3"]
        let rooms = try CallRooms(ids, soundCards: false)
        defer { rooms.stopAll() }
        let folder = rooms.dir + "/site"
        try SiteKit.create(folder, document: SiteKit.document(rooms))
        func faked(_ time: String) -> [String: String] { ["LD_PRELOAD": library, "FAKETIME": time, "DONT_FAKE_MONOTONIC": "1"] }
        try SiteKit.start(rooms, "desk1", folder: folder)
        try SiteKit.start(rooms, "desk2", folder: folder, environment: faked("-3h"))
        try SiteKit.start(rooms, "desk3", folder: folder, environment: faked("@1970-01-01 00:00:00"))
        func stats(_ id: String) -> DaemonStatistics? { try? rooms.daemons[id]?.statistics() }
        try SiteKit.approveAll(rooms, ids, folder: folder, version: 3)
        // The fakes took: each applied version 3 at the time its own clock read.
        let now = Date().timeIntervalSince1970
        let applied = ids.map { stats($0)?.site?.appliedAt ?? .nan }
        print("clocks: version 3 applied at \(applied.map { String(format: "%.0f", $0) }) (true time \(String(format: "%.0f", now)))")
        XCTAssertEqual(applied[0], now, accuracy: 60, "desk1's clock is true")
        XCTAssertEqual(applied[1], now - 3 * 3600, accuracy: 60, "desk2's clock is 3 h behind")
        XCTAssertLessThan(applied[2], 3600, "desk3's clock reads 1970")

        for id in ids { XCTAssertTrue(rooms.waitOnline(id, ids.filter { $0 != id }), "\(id) hears the others") }
        for (caller, callee) in [("desk1", "desk2"), ("desk2", "desk3"), ("desk3", "desk1")] {
            _ = try rooms.control(caller, .perform(.call(button: callee)))
            XCTAssertTrue(rooms.wait(5) { rooms.isConnected(caller) && rooms.isConnected(callee) }, "\(caller) calls \(callee)")
            _ = try rooms.control(caller, .perform(.hangUp))
            XCTAssertTrue(rooms.wait(3) { rooms.isIdle(caller) && rooms.isIdle(callee) })
        }
        for id in ids {
            let refused = stats(id)?.calls?.refused
            XCTAssertEqual(refused.map { $0.authentication + $0.replay }, 0, "\(id) refused nothing: \(String(describing: refused))")
        }
    }

    /// A terminal that was off while another was revoked learns of it before it takes anything
    /// from the revoked one, even when that one keeps the old document: here a thief with desk2's
    /// key from its disk, on desk2's address, announcing itself and calling desk3 as it returns.
    func testATerminalBackFromOffTakesNothingFromARevokedOneThatKeepsTheOldDocument() throws {
        let ids = ["desk1", "desk2", "desk3"]
        let rooms = try CallRooms(ids, soundCards: false)
        defer { rooms.stopAll() }
        let folder = rooms.dir + "/site"
        try SiteKit.create(folder, document: SiteKit.document(rooms))
        for id in ids { try SiteKit.start(rooms, id, folder: folder) }
        func stats(_ id: String) -> DaemonStatistics? { try? rooms.daemons[id]?.statistics() }
        try SiteKit.approveAll(rooms, ids, folder: folder, version: 3)
        XCTAssertTrue(rooms.waitOnline("desk3", ["desk1", "desk2"]))

        // desk3 goes off; desk2's box is taken, its key read from its disk; desk2 is revoked.
        XCTAssertEqual(rooms.stop("desk3"), 0)
        XCTAssertEqual(rooms.stop("desk2"), 0)
        var keys: [String: PublicIdentity] = [:]
        for id in ids { keys[id] = try TerminalIdentity(path: "\(rooms.dir)/\(id)-terminal.key").publicIdentity }
        let stolen = try TerminalIdentity(path: "\(rooms.dir)/desk2-terminal.key")
        XCTAssertEqual(try SiteKit.run(["revoke", "--dir", folder, "--room", "desk2"]).status, 0)
        try SiteKit.sign(folder)
        XCTAssertTrue(try SiteKit.run(["publish", "--dir", folder]).output.contains("took version 4"))
        XCTAssertNotNil(rooms.daemons["desk1"]!.waitForStatistics(timeout: 5) { $0.site?.version == 4 && $0.site?.appliedAt != nil })

        // The thief, on desk2's address with the document of version 3, answers desk3's
        // announcement with its own and calls desk3 every 100 ms from the moment it can seal to it.
        let thief = TerminalSeal(identity: stolen, room: "desk2", boot: 1 << 40, directory: keys)
        let socket = try UDPSocket(bind: .loopback(port: UInt16(rooms.room("desk2").signalling)))
        let desk3 = IPv4Endpoint.loopback(port: UInt16(rooms.room("desk3").signalling))
        let invite = SignalCodec.encode(Envelope(sender: RoomID("desk2")!, messageID: 7, message: .invite(
            CallID(0x5EC), participants: [RoomID("desk3")!],
            media: InviteMedia(callerMedia: .loopback(port: UInt16(rooms.room("desk2").media)), voice: .unicast), kind: .normal)))
        func send(_ bytes: [UInt8]) { bytes.withUnsafeBytes { _ = socket.send($0, to: desk3) } }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 2048, alignment: 8)
        defer { buffer.deallocate() }
        try SiteKit.start(rooms, "desk3", folder: folder)
        var invitesSent = 0, rang = false
        let deadline = Date().addingTimeInterval(6)
        var nextInvite = Date()
        while Date() < deadline {
            if socket.waitReadable(milliseconds: 20) {
                while let (count, from) = socket.receive(into: buffer) {
                    let datagram = [UInt8](UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
                    if from == desk3, SessionAnnouncement.looksLikeOne(datagram),
                       case .success(let (_, newSession, _)) = thief.heard(datagram), newSession {
                        send(thief.announcement())
                    }
                }
            }
            if Date() >= nextInvite, let sealed = thief.seal(invite, for: "desk3") {
                send(sealed)
                invitesSent += 1
                nextInvite = Date().addingTimeInterval(0.1)
            }
            if rooms.status("desk3")?.call != nil { rang = true }
        }
        let after = try XCTUnwrap(stats("desk3"))
        print("back from off: the thief sent \(invitesSent) invites; desk3 refused \(after.calls?.refused.behind ?? -1) while behind, then \(after.calls?.refused.unknownSender ?? -1) as from an unknown sender; version \(after.site?.version ?? 0)")
        XCTAssertGreaterThan(invitesSent, 0, "the thief could seal to desk3 (it took the announcement signed by desk2's key)")
        XCTAssertFalse(rang, "desk3 never took the revoked terminal's call")
        XCTAssertEqual(after.site?.version, 4, "desk3 fetched the version that revokes desk2")
        XCTAssertGreaterThan(after.calls?.refused.behind ?? 0, 0, "the invites that came before it held version 4 were not taken")
        XCTAssertGreaterThan(after.calls?.refused.unknownSender ?? 0, 0, "after it, the thief's datagrams are refused as from an unknown sender")
        XCTAssertEqual(rooms.history("desk3").filter { $0.caller.value == "desk2" && $0.callID == CallID(0x5EC) }.count, 0, "nothing of it in desk3's history")
        // The refusals are logged, once in the 6 s (`RefusalLog`: at once, then once a minute).
        let logged = rooms.daemons["desk3"]!.log.split(separator: "\n").filter { $0.contains("calls: refused ") }
        XCTAssertEqual(logged.count, 1, "one line for \(after.calls?.refused.total ?? -1) refusals: \(logged)")
        XCTAssertTrue(logged.first?.contains("127.0.0.1:\(rooms.room("desk2").signalling)") == true, "naming the thief's address: \(logged)")
    }

    /// A terminal nobody hears (terminal keys in force, its own not approved) reads its enrolment
    /// code aloud at any key, for the installer at the box, and does nothing else; approved, its
    /// keys do what they say, and `say_enrolment_code` still reads the code.
    func testAPendingTerminalReadsItsCodeAtAnyKeyAndAnApprovedOneWhenAsked() throws {
        try Rig.require()
        let rooms = try CallRooms(["roomA", "roomB"])
        defer { rooms.stopAll() }
        let folder = rooms.dir + "/site"
        // The keys' map is the site's; the key device is the box's own.
        try SiteKit.create(folder, document: SiteKit.document(rooms, extra: "[keys.map]\nKEY_1 = \"call:rooma\"\nKEY_2 = \"say_enrolment_code\"\n"))
        let fifo = "\(rooms.dir)/roomb-keys"
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        try SiteKit.start(rooms, "rooma", folder: folder)
        try SiteKit.start(rooms, "roomb", folder: folder, own: "[keys]\ndevice = \"\(fifo)\"")
        let keys = try FIFOKeyWriter(path: fifo)
        func stats(_ id: String) -> DaemonStatistics? { try? rooms.daemons[id]?.statistics() }
        func approve(_ id: String, version: UInt64) throws {
            let code = try XCTUnwrap(stats(id)?.site?.terminal?.enrolmentCode)
            let approved = try SiteKit.run(["approve", "--dir", folder, "--room", id, "--code", code])
            XCTAssertEqual(approved.status, 0, approved.output)
            try SiteKit.sign(folder)
            XCTAssertTrue(try SiteKit.run(["publish", "--dir", folder]).output.contains("took version \(version)"))
            for d in rooms.daemons.values {
                XCTAssertNotNil(d.waitForStatistics(timeout: 5) { $0.site?.version == version && $0.site?.appliedAt != nil }, d.log)
            }
        }
        try approve("rooma", version: 3)
        XCTAssertEqual(stats("roomb")?.site?.terminal?.standing, .pending)

        // KEY_1 (call:rooma) at the pending box: its code, read aloud; no call.
        let path = "\(rooms.dir)/roomb-speaker.wav"
        let recorder = try RoomRecorder(room: rooms.room("roomb").rig, path: path)
        keys.press(2)
        XCTAssertTrue(rooms.wait(20) { stats("roomb")?.calls?.speech.spoken == 1 && rooms.status("roomb")?.call == nil }, "the code is read")
        Thread.sleep(forTimeInterval: 8)  // the digits, twice
        recorder.stop()
        XCTAssertNil(rooms.status("rooma")?.call, "the pending terminal's key called nobody")
        XCTAssertEqual(stats("roomb")?.calls?.speech.failures, 0)
        let heard = try WAVAudio.read(path: path).floats()
        let window = 2400
        let loud = stride(from: 0, to: heard.count - window, by: window).filter { Levels.rmsDB(Array(heard[$0..<($0 + window)])) > -45 }.count
        let seconds = Double(loud * window) / 48000
        print("enrolment code read aloud: \(String(format: "%.1f", seconds)) s of sound at roomb")
        XCTAssertGreaterThan(seconds, 4, "a tone and 24 digits were heard at roomb")

        // Approved: KEY_1 calls; KEY_2 reads the code.
        try approve("roomb", version: 4)
        XCTAssertTrue(rooms.waitOnline("roomb", ["rooma"]))
        keys.press(2)
        XCTAssertTrue(rooms.wait(5) { rooms.isConnected("rooma") && rooms.isConnected("roomb") }, "the approved terminal's key calls")
        XCTAssertEqual(stats("roomb")?.calls?.speech.announcements, 1)
        _ = try rooms.control("roomb", .perform(.hangUp))
        XCTAssertTrue(rooms.wait(3) { rooms.isIdle("roomb") })
        keys.press(3)
        XCTAssertTrue(rooms.wait(20) { stats("roomb")?.calls?.speech.announcements == 2 }, "say_enrolment_code reads it when approved too")
    }
}

