import Control
import Foundation
import RigKit
import SiteSecurity
import TestSupport
import XCTest

/// Under terminal keys each sender draws its stream's key for a call and gives it only in the
/// call's sealed invite or accept (docs/identity.md). With no site key anywhere, the call plays
/// as SRTP both ways; a recording of all its packets, with each terminal's long-term key taken
/// from its disk afterwards, opens none of the datagrams that carried the keys.
final class CallKeysRigTests: XCTestCase {
    func testACallKeyedInItsSignallingPlaysAsSRTPAndItsRecordingStaysClosedToTheTerminalsKeys() throws {
        try Rig.require()
        let ids = ["rooma", "roomb"]
        let rooms = try CallRooms(["roomA", "roomB"])
        defer { rooms.stopAll() }
        let folder = rooms.dir + "/site"
        try SiteKit.create(folder, document: SiteKit.document(rooms))  // no site key: versions 1 and 2
        for id in ids { try SiteKit.start(rooms, id, folder: folder) }
        func stats(_ id: String) -> DaemonStatistics? { try? rooms.daemons[id]?.statistics() }
        try SiteKit.approveAll(rooms, ids, folder: folder, version: 3)
        XCTAssertTrue(rooms.waitOnline("rooma", ["roomb"]))

        let capture = try PacketCapture()
        _ = try rooms.control("rooma", .perform(.call(button: "roomb")))
        XCTAssertTrue(rooms.wait(5) { rooms.isConnected("rooma") && rooms.isConnected("roomb") },
                      "the call connects: \(rooms.daemons["rooma"]!.log)\n\(rooms.daemons["roomb"]!.log)")
        XCTAssertTrue(rooms.wait(5) { rooms.plays("rooma", from: "roomb") && rooms.plays("roomb", from: "rooma") }, "the call plays both ways")
        _ = try rooms.control("rooma", .perform(.hangUp))
        XCTAssertTrue(rooms.wait(3) { rooms.isIdle("rooma") && rooms.isIdle("roomb") })
        let recorded = capture.stop()

        for id in ids {
            let srtp = try XCTUnwrap(stats(id)?.network?.srtp, id)
            XCTAssertGreaterThan(srtp.authenticated, 25, "\(id) took the other's media as SRTP, keyed by the call's signalling: \(srtp)")
            XCTAssertEqual(srtp.unauthenticated, 0, "\(id): \(srtp)")
            XCTAssertEqual(srtp.protectErrors, 0, "\(id): \(srtp)")
        }

        let media = Set(ids.map { UInt16(rooms.room($0).media) })
        XCTAssertGreaterThan(recorded.filter { media.contains($0.sourcePort) && media.contains($0.destinationPort) }.count, 100,
                             "the call's media was recorded")
        // A thief with one terminal's disk: its long-term key in a terminal of its own that takes
        // the other's recorded announcements (signed, not secret) and tries every datagram the
        // other sealed to it, invite and accept included.
        var keys: [String: TerminalIdentity] = [:]
        for id in ids { keys[id] = try TerminalIdentity(path: "\(rooms.dir)/\(id)-terminal.key") }
        let directory = keys.mapValues(\.publicIdentity)
        for (victim, sender) in [("roomb", "rooma"), ("rooma", "roomb")] {
            let from = UInt16(rooms.room(sender).signalling), to = UInt16(rooms.room(victim).signalling)
            let sent = recorded.filter { $0.sourcePort == from && $0.destinationPort == to }.map(\.payload)
            let announcements = sent.filter(SessionAnnouncement.looksLikeOne)
            let sealed = sent.filter { !SessionAnnouncement.looksLikeOne($0) }
            XCTAssertGreaterThan(sealed.count, 2, "\(sender)'s sealed datagrams to \(victim) were recorded")
            let thief = TerminalSeal(identity: keys[victim]!, room: victim, boot: 1 << 40, directory: directory)
            let taken = announcements.filter { if case .success = thief.heard($0) { true } else { false } }.count
            XCTAssertGreaterThan(taken, 0, "the thief takes \(sender)'s recorded announcements, as \(victim) did")
            var refused: [TerminalSeal.Failure: Int] = [:]
            var opened = 0
            for datagram in sealed {
                switch thief.open(datagram) {
                case .success: opened += 1
                case .failure(let why): refused[why, default: 0] += 1
                }
            }
            XCTAssertEqual(opened, 0, "\(victim)'s long-term key opens none of \(sender)'s \(sealed.count) sealed datagrams: \(refused)")
            print("call keys: \(sealed.count) datagrams \(sender) sealed to \(victim) tried with \(victim)'s long-term key: \(opened) opened, refused \(refused)")
        }
    }
}
