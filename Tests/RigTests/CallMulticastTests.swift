import Calls
import Control
import Foundation
import TestSupport
import XCTest

/// A group call whose caller sends one multicast stream, with every room on its own host (network
/// namespaces on a bridge) and the ports of an installation: the shape that cannot be built on one
/// loopback host, where all rooms would share the group's port on one address.
final class CallMulticastTests: XCTestCase {
    static let group = "239.255.7.1:5004"

    /// A calls B and C with `caller_voice = "multicast"`: both hear A from the one group stream
    /// (A sends one packet per frame, not one per callee), B is heard in A by unicast and not in C,
    /// C leaves and B stays; the caller's hang-up ends the call and the callees leave the group.
    func testMulticastGroupCallReachesEveryCalleeFromOneStreamAcrossHosts() throws {
        try Rig.require()
        try measureWithRetries("1:2 multicast call") { c in
            let lab = try NetLab(hosts: ["roomA", "roomB", "roomC"])
            defer { lab.close() }
            let rooms = try CallRooms(["roomA", "roomB", "roomC"], lab: lab)
            defer { rooms.stopAll() }
            let multicast = "caller_voice = \"multicast\"\nmulticast_group = \"\(Self.group)\""
            for id in ["rooma", "roomb", "roomc"] { try rooms.start(id, calls: multicast) }
            XCTAssertTrue(rooms.waitOnline("rooma", ["roomb", "roomc"]), "A sees B and C online across the LAN")

            guard case .success(.callPlaced(_, let to)) = try rooms.control("rooma", .perform(.call(button: "all"))) else {
                XCTFail("call placed")
                return []
            }
            XCTAssertEqual(Set(to.map(\.value)), ["roomb", "roomc"])
            XCTAssertTrue(rooms.wait(5) { ["rooma", "roomb", "roomc"].allSatisfy(rooms.isConnected) }, "everyone connected")
            let a = rooms.daemons["rooma"]!
            XCTAssertEqual(try a.statistics().calls?.mediaTo, [Self.group], "A sends its voice to the group only")

            let earC = try RoomRecorder(room: "roomC", path: "\(rooms.dir)/roomC-A.wav")
            let ab = try c.probed(TalkerProbe(mouth: "roomA", ear: "roomB").run(clipPath: Speech.roomA(), folder: rooms.dir, name: "roomB-A"))
            earC.stop()
            // What C hears of B is measured from here: A's last words, late after a stall of C's
            // audio, would count as B's leak (the start of this recording reads -66 dBFS when
            // taken at once, against -100 to -108 while B talks).
            Thread.sleep(forTimeInterval: 0.5)
            let earC2 = try RoomRecorder(room: "roomC", path: "\(rooms.dir)/roomC-B.wav")
            let ba = try c.probed(TalkerProbe(mouth: "roomB", ear: "roomA").run(clipPath: Speech.roomB(), folder: rooms.dir, name: "roomA-B"))
            earC2.stop()
            let q = try Quality.measure([(ab.clipPath, ab.recordingPath), (ab.clipPath, earC.path),
                                         (ba.clipPath, ba.recordingPath), (ba.clipPath, earC2.path)])
            print("calls 1:2 multicast: A → B \(q[0].stoi), A → C \(q[1].stoi), B → A \(q[2].stoi), B → C \(q[3].stoi)")
            c.check(q[0].stoi >= Quality.minSTOIManyRooms, "A is heard in B through the group: \(q[0])")
            c.check(q[1].stoi >= Quality.minSTOIManyRooms, "A is heard in C through the group: \(q[1])")
            c.check(q[2].stoi >= Quality.minSTOIManyRooms, "B is heard in A: \(q[2])")
            CallTests.checkNotHeard(c, q[3], below: q[2], "B is not heard in C")
            print("calls 1:2 multicast: B in C, \(CallTests.leakTrace(earC2.path, caller: a)); \(rooms.streamHealth())")

            XCTAssertEqual(try rooms.control("roomc", .perform(.hangUp)), .success(.done))
            XCTAssertTrue(rooms.wait(3) { rooms.isIdle("roomc") && rooms.participant(rooms.status("rooma"), "roomc") == .left }, "C left")
            XCTAssertTrue(rooms.isConnected("roomb") && rooms.isConnected("rooma"), "B stays")
            XCTAssertEqual(try rooms.control("rooma", .perform(.hangUp)), .success(.done))
            XCTAssertTrue(rooms.wait(3) { ["rooma", "roomb", "roomc"].allSatisfy(rooms.isIdle) }, "the caller's hang-up ends it for all")

            let daemons = Array(rooms.daemons.values)
            var stats: [String: DaemonStatistics.Network] = [:]
            for id in ["rooma", "roomb", "roomc"] {
                let d = rooms.daemons[id]!
                XCTAssertEqual(rooms.stop(id), 0, "\(id) exits cleanly: \(d.log)")
                stats[id] = d.finalNetwork
            }
            // One stream for two callees: A sent about as many packets as B received from it
            // (unicast to each would be twice as many).
            if let sa = stats["rooma"], let sb = stats["roomb"], let sc = stats["roomc"] {
                print("calls 1:2 multicast: A sent \(sa.sent), B received \(sb.accepted), C received \(sc.accepted)")
                XCTAssertGreaterThan(sb.accepted, 300, "B received A's stream: \(sb.summary)")
                XCTAssertGreaterThan(sc.accepted, 300, "C received A's stream: \(sc.summary)")
                XCTAssertLessThan(Double(sa.sent), 1.3 * Double(sb.accepted), "A sends one stream, not one per callee: \(sa.summary) / \(sb.summary)")
            } else {
                XCTFail("final network statistics of every room: \(stats.keys)")
            }
            return daemons
        }
    }
}
