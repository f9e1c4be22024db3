import Calls
import Control
import Foundation
import Posix
import RealTime
import TestSupport
import XCTest

/// Signalling sealed and media protected (SRTP) with the site key between real daemons: rooms
/// with the key call each other and hear each other; a room with another site's key is refused
/// before the call engine sees anything.
final class SealedSignallingTests: XCTestCase {
    func testRoomsWithTheSiteKeyCallEachOtherAndAnotherKeyNeverRingsOrChangesAnything() throws {
        try Rig.require()
        let rooms = try CallRooms(["roomA", "roomB", "roomC"])
        defer { rooms.stopAll() }
        let site = try SiteKit.siteKeyFile(in: rooms.dir, seed: 7), other = try SiteKit.siteKeyFile(in: rooms.dir, seed: 9)
        try rooms.start("rooma", extra: "[security]\nsite_key = \"\(site)\"")
        try rooms.start("roomb", extra: "[security]\nsite_key = \"\(site)\"")
        let c = try rooms.start("roomc", extra: "[security]\nsite_key = \"\(other)\"")

        XCTAssertTrue(rooms.waitOnline("rooma", ["roomb"]), "A sees B through sealed hellos")
        _ = try rooms.control("rooma", .perform(.call(button: "roomb")))
        XCTAssertTrue(rooms.wait(5) { rooms.isConnected("rooma") && rooms.isConnected("roomb") }, "a sealed call connects")
        // Media is SRTP under the call's keys, and plays both ways.
        XCTAssertTrue(rooms.wait(5) { rooms.plays("rooma", from: "roomb") && rooms.plays("roomb", from: "rooma") }, "SRTP plays both ways")
        _ = try rooms.control("rooma", .perform(.hangUp))
        XCTAssertTrue(rooms.wait(3) { rooms.isIdle("rooma") && rooms.isIdle("roomb") })
        let historyA = rooms.history("rooma").count

        // C holds another site's key: A never sees it online, and C's call does not ring at A.
        _ = try rooms.control("roomc", .perform(.call(button: "rooma")))
        XCTAssertTrue(rooms.wait(6) { rooms.isIdle("roomc") }, "C's attempt ends unanswered")
        XCTAssertEqual(rooms.history("roomc").last?.outcome, .notReached, "\(rooms.history("roomc"))")
        XCTAssertTrue(rooms.isIdle("rooma"), "A was never called")
        XCTAssertEqual(rooms.history("rooma").count, historyA, "nothing of C's reached A's history")
        guard case .success(.rooms(let seen)) = try rooms.control("rooma", .rooms) else { return XCTFail("rooms") }
        XCTAssertEqual(seen.rooms.first { $0.id.value == "roomc" }?.presence.online, false, "C is not online for A")

        let a = rooms.daemons["rooma"]!
        let stats = try a.statistics()
        XCTAssertEqual(rooms.stop("rooma"), 0)
        let refused = try XCTUnwrap(stats.calls?.refused)
        XCTAssertGreaterThan(refused.authentication, 0, "C's datagrams are counted as failing authentication: \(refused)")
        XCTAssertNotNil(try c.statistics().calls, "C ran with calls")
        let srtp = try XCTUnwrap(stats.network?.srtp)
        XCTAssertGreaterThan(srtp.authenticated, 25, "A took B's media as SRTP: \(srtp)")
        XCTAssertEqual(srtp.protectErrors, 0, "A protected all it sent: \(srtp)")
        print("sealed signalling: A refused \(refused.authentication) of C's datagrams (authentication); \(refused); A took \(srtp.authenticated) SRTP packets")
    }

    /// Every datagram from A to B arrives twice (a relay that duplicates all): the copies are
    /// refused as replays before the call engine, and A and B still see each other.
    func testReplayedSealedDatagramsAreRefusedAndCounted() throws {
        try Rig.require()
        let rooms = try CallRooms(["roomA", "roomB"])
        defer { rooms.stopAll() }
        let site = try SiteKit.siteKeyFile(in: rooms.dir, seed: 7)
        let relay = try ImpairmentRelayProcess(targetPort: rooms.room("roomb").signalling, options: ["--duplicate", "100", "--seed", "3"])
        defer { relay.stop() }
        try rooms.start("rooma", extra: "[security]\nsite_key = \"\(site)\"", signallingVia: ["roomb": relay.port])
        let b = try rooms.start("roomb", extra: "[security]\nsite_key = \"\(site)\"")
        XCTAssertTrue(rooms.waitOnline("roomb", ["rooma"]), "B hears A's hellos through the relay")
        Thread.sleep(forTimeInterval: 1)
        let calls = try XCTUnwrap(b.statistics().calls)
        XCTAssertEqual(rooms.stop("roomb"), 0)
        XCTAssertGreaterThan(calls.refused.replay, 0, "the copies are counted as replays: \(calls)")
        XCTAssertEqual(calls.duplicates, 0, "none reached the engine's own duplicate check: \(calls)")
        print("sealed signalling: B refused \(calls.refused.replay) replayed copies; \(calls)")
    }
    /// Someone on the network copies every datagram A sends B to C as well: C, with the site's
    /// key, opens A's hellos (sealed for every room; the copy of one C already had is a replay)
    /// but not what A sealed for B: A's call to B does not ring at C, and the copies are counted
    /// as failing authentication. B and A call as ever.
    func testADatagramSealedForOneRoomAndCopiedToAnotherIsRefusedThere() throws {
        try Rig.require()
        let rooms = try CallRooms(["roomA", "roomB", "roomC"])
        defer { rooms.stopAll() }
        let site = try SiteKit.siteKeyFile(in: rooms.dir, seed: 7)
        let tap = try UDPSocket(bind: .loopback(port: 0))
        let copying = Flag(false)
        let b = IPv4Endpoint.loopback(port: UInt16(rooms.room("roomb").signalling))
        let c = IPv4Endpoint.loopback(port: UInt16(rooms.room("roomc").signalling))
        let tapThread = Thread {
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 2048, alignment: 8)
            defer { buffer.deallocate() }
            var fd = pollfd(fd: tap.descriptor, events: Int16(POLLIN), revents: 0)
            while !copying.isSet {
                guard poll(&fd, 1, 100) > 0 else { continue }
                while let (n, _) = tap.receive(into: buffer) {
                    let bytes = UnsafeRawBufferPointer(rebasing: buffer[0..<n])
                    _ = tap.send(bytes, to: b)
                    _ = tap.send(bytes, to: c)
                }
            }
        }
        tapThread.start()
        defer { copying.set(true) }
        let key = "[security]\nsite_key = \"\(site)\""
        try rooms.start("rooma", extra: key, signallingVia: ["roomb": Int(tap.local.port)])
        try rooms.start("roomb", extra: key)
        let roomC = try rooms.start("roomc", extra: key)
        XCTAssertTrue(rooms.waitOnline("rooma", ["roomb", "roomc"]), "A sees B and C")
        XCTAssertTrue(rooms.waitOnline("roomb", ["rooma"]), "B hears A's hellos through the tap")
        let before = try XCTUnwrap(roomC.statistics().calls?.refused)
        _ = try rooms.control("rooma", .perform(.call(button: "roomb")))
        XCTAssertTrue(rooms.wait(5) { rooms.isConnected("rooma") && rooms.isConnected("roomb") }, "A's call to B connects")
        XCTAssertTrue(rooms.isIdle("roomc"), "C does not ring with A's call to B")
        _ = try rooms.control("rooma", .perform(.hangUp))
        XCTAssertTrue(rooms.wait(3) { rooms.isIdle("rooma") && rooms.isIdle("roomb") })
        XCTAssertTrue(rooms.history("roomc").isEmpty, "nothing of A's call to B reached C's history: \(rooms.history("roomc"))")
        // A's next round of hellos after C came up reaches C twice (a run that got this far in
        // 0.9 s read C's statistics before it): wait for one.
        XCTAssertTrue(rooms.wait(3) { ((try? roomC.statistics().calls?.refused.replay) ?? 0) > 0 },
                      "A's hellos came to C twice, the copy refused as a replay")
        let after = try XCTUnwrap(roomC.statistics().calls?.refused)
        XCTAssertGreaterThanOrEqual(after.authentication - before.authentication, 2,
                                    "the invite and the hang-up sealed for B fail at C: \(after)")
        XCTAssertGreaterThan(after.replay, 0, "A's hellos came to C twice, the copy refused as a replay: \(after)")
        XCTAssertEqual(after.notForEveryone, 0)
        print("sealed signalling: C refused \(after.authentication - before.authentication) datagrams sealed for B (authentication), \(after.replay) copies of A's hellos (replay)")
    }
}
