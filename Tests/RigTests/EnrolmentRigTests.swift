import Control
import Foundation
import Glibc
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
        XCTAssertEqual(pending.standing, "pending")
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
        let inForce = try XCTUnwrap(a.waitForStatistics(timeout: 5) { $0.site?.terminal?.standing == "approved" }?.site?.terminal, a.log)
        XCTAssertEqual(inForce.room, "desk1")
        XCTAssertNil(inForce.enrolmentCode, "an approved terminal shows no code")
        XCTAssertTrue(try SiteKit.run(["pending", "--dir", folder]).output.contains(": approved for desk1"))

        // A restart keeps the key, so the approval holds.
        _ = rooms.stop("desk1")
        let again = try SiteKit.start(rooms, "desk1", folder: folder)
        let restarted = try XCTUnwrap(again.waitForStatistics(timeout: 5) { $0.site?.terminal != nil }?.site?.terminal, again.log)
        XCTAssertEqual(restarted.key, pending.key)
        XCTAssertEqual(restarted.standing, "approved")

        let revoked = try SiteKit.run(["revoke", "--dir", folder, "--room", "desk1"])
        XCTAssertEqual(revoked.status, 0, revoked.output)
        try SiteKit.sign(folder)  // version 4
        XCTAssertTrue(try SiteKit.run(["publish", "--dir", folder]).output.contains("took version 4"))
        XCTAssertNotNil(again.waitForStatistics(timeout: 5) { $0.site?.terminal?.standing == "revoked" }, again.log)
        XCTAssertTrue(try SiteKit.run(["pending", "--dir", folder]).output.contains(": REVOKED"))
        let refused = try SiteKit.run(["approve", "--dir", folder, "--room", "desk1", "--code", code])
        XCTAssertEqual(refused.status, 1, refused.output)
        XCTAssertTrue(refused.output.contains("revokedIdentity"), refused.output)
    }
}
