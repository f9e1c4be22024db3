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
        for id in ids { try SiteKit.start(rooms, id, folder: folder) }
        func stats(_ id: String) -> DaemonStatistics? { try? rooms.daemons[id]?.statistics() }
        func online(_ id: String) -> Set<String> {
            guard case .success(.rooms(let d))? = try? rooms.control(id, .rooms) else { return [] }
            return Set(d.rooms.filter(\.presence.online).map(\.id.value))
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

        XCTAssertEqual(stats("desk1")?.calls?.protection, .clear, "no site key and nothing approved: in the clear")
        XCTAssertTrue(rooms.waitOnline("desk1", ["desk2", "desk3"]))

        // desk1 and desk2 approved, desk3 pending.
        try approve("desk1")
        try approve("desk2")
        let signing = try publish(3)
        XCTAssertTrue(signing.contains("2 of 3 rooms have an approved terminal; silent until approved: desk3"), signing)
        for id in ids { XCTAssertEqual(stats(id)?.calls?.protection, .terminalKeys, "\(id) seals by terminal keys") }
        XCTAssertTrue(rooms.wait(8) { online("desk1") == ["desk2"] && online("desk2") == ["desk1"] && online("desk3").isEmpty },
                      "only the approved hear each other: desk1 \(online("desk1")), desk2 \(online("desk2")), desk3 \(online("desk3"))")
        _ = try rooms.control("desk1", .call(button: "desk2"))
        XCTAssertTrue(rooms.wait(5) { rooms.isConnected("desk1") && rooms.isConnected("desk2") }, "a call between approved terminals")
        _ = try rooms.control("desk1", .hangUp)
        XCTAssertTrue(rooms.wait(3) { rooms.isIdle("desk1") && rooms.isIdle("desk2") })
        // The pending terminal sends nothing (everyone would refuse it), not even its call.
        let sentBefore = stats("desk3")?.calls?.datagramsSent
        _ = try rooms.control("desk3", .call(button: "desk1"))
        let deadline = Date().addingTimeInterval(2)
        while Date() < deadline {
            XCTAssertNil(rooms.status("desk1")?.call, "the pending terminal's call never reaches desk1")
            Thread.sleep(forTimeInterval: 0.1)
        }
        _ = try rooms.control("desk3", .hangUp)
        XCTAssertNotNil(sentBefore)
        XCTAssertEqual(stats("desk3")?.calls?.datagramsSent, sentBefore, "a pending terminal is silent")

        // desk3 approved while it is off: back with version 3, under which it is silent, it hears
        // version 4 named in the others' announcements, fetches it and is taken in.
        try approve("desk3")
        XCTAssertEqual(rooms.stop("desk3"), 0)
        try publish(4)
        try SiteKit.start(rooms, "desk3", folder: folder)
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

        // desk2 revoked: put out.
        let revoked = try SiteKit.run(["revoke", "--dir", folder, "--room", "desk2"])
        XCTAssertEqual(revoked.status, 0, revoked.output)
        try publish(5)
        XCTAssertEqual(stats("desk2")?.site?.terminal?.standing, .revoked)
        XCTAssertTrue(rooms.wait(6) { online("desk1") == ["desk3"] && online("desk3") == ["desk1"] },
                      "nobody hears the revoked terminal: desk1 \(online("desk1")), desk3 \(online("desk3"))")
        _ = try rooms.control("desk1", .call(button: "desk2"))
        Thread.sleep(forTimeInterval: 1.5)
        XCTAssertNil(rooms.status("desk2")?.call, "the revoked terminal is not rung")
        _ = try rooms.control("desk1", .hangUp)
        XCTAssertTrue(rooms.wait(3) { rooms.isIdle("desk1") })

        // desk1 restarts: a second start, and it is back with desk3 at once.
        let startsFile = "\(rooms.dir)/desk1-terminal.key.starts"
        XCTAssertEqual(try String(contentsOfFile: startsFile, encoding: .utf8), "1\n")
        XCTAssertEqual(rooms.stop("desk1"), 0)
        try SiteKit.start(rooms, "desk1", folder: folder)
        XCTAssertEqual(try String(contentsOfFile: startsFile, encoding: .utf8), "2\n")
        var st = stat()
        XCTAssertEqual(stat(startsFile, &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o600)
        XCTAssertTrue(rooms.wait(4) { online("desk1") == ["desk3"] && online("desk3") == ["desk1"] },
                      "the restarted terminal is heard again: desk1 \(online("desk1")), desk3 \(online("desk3"))")
        _ = try rooms.control("desk1", .call(button: "desk3"))
        XCTAssertTrue(rooms.wait(5) { rooms.isConnected("desk1") && rooms.isConnected("desk3") }, "a call after the restart")
        _ = try rooms.control("desk1", .hangUp)
        let refusedAtDesk3 = stats("desk3")?.calls?.refused
        print("terminal keys: desk3 refused \(refusedAtDesk3.map { "\($0)" } ?? "-"); desk1 held \(stats("desk1")?.calls?.awaitingSession ?? -1) sends until a session was heard")
        XCTAssertEqual(refusedAtDesk3?.authentication, 0, "nothing failed to open between approved terminals")
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
        _ = try rooms.control("roomb", .hangUp)
        XCTAssertTrue(rooms.wait(3) { rooms.isIdle("roomb") })
        keys.press(3)
        XCTAssertTrue(rooms.wait(20) { stats("roomb")?.calls?.speech.announcements == 2 }, "say_enrolment_code reads it when approved too")
    }
}

