import Calls
import Control
import Foundation
import TestSupport
import XCTest

/// Faults in a running call, with every room on its own host (network namespaces on a bridge).
final class ResilienceTests: XCTestCase {
    /// A calls B, C and D; C's daemon is killed (SIGKILL: no leave is sent). A shows C unavailable
    /// within 2 s (call keepalives every 0.2 s, 1.5 s of silence); B and D stay connected and
    /// still hear A.
    func testKilledCalleeIsLostWithinTwoSecondsAndTheOthersGoOn() throws {
        try Rig.require()
        try measureWithRetries("callee killed in a 1:3 call") { c in
            let names = ["roomA", "roomB", "roomC", "roomD"]
            let lab = try NetLab(hosts: names)
            defer { lab.close() }
            let rooms = try CallRooms(names, lab: lab)
            defer { rooms.stopAll() }
            for id in names.map({ $0.lowercased() }) { try rooms.start(id) }
            c.require(rooms.waitOnline("rooma", ["roomb", "roomc", "roomd"]), "A sees B, C and D online")
            guard case .success(.callPlaced) = try rooms.control("rooma", .call(button: "all")) else {
                c.check(false, "call placed")
                return []
            }
            c.require(rooms.wait(5) { ["rooma", "roomb", "roomc", "roomd"].allSatisfy(rooms.isConnected) }, "everyone connected")

            let victim = rooms.daemons["roomc"]!
            kill(victim.process.processIdentifier, SIGKILL)
            let killed = Date()
            let noticed = rooms.wait(5) { rooms.participant(rooms.status("rooma"), "roomc") != .connected }
            let elapsed = Date().timeIntervalSince(killed)
            print(String(format: "resilience: A noticed the killed callee after %.2f s: %@", elapsed,
                         String(describing: rooms.participant(rooms.status("rooma"), "roomc"))))
            c.check(noticed && elapsed <= 2.0, String(format: "A sees C lost within 2 s (%.2f s)", elapsed))
            c.check(rooms.participant(rooms.status("rooma"), "roomc") == .unavailable, "C is shown unavailable")
            Thread.sleep(forTimeInterval: 1)
            c.check(["rooma", "roomb", "roomd"].allSatisfy(rooms.isConnected), "A, B and D stay in the call")

            let ab = try c.probed(TalkerProbe(mouth: "roomA", ear: "roomB").run(clipPath: Speech.roomA(), folder: rooms.dir, name: "roomB-A"))
            let q = try Quality.measure([(ab.clipPath, ab.recordingPath)])
            print("resilience: A → B after C was killed: \(q[0])")
            c.check(q[0].stoi >= CallTests.minSTOI, "B still hears A: \(q[0])")
            XCTAssertEqual(try rooms.control("rooma", .hangUp), .success(.done))
            return ["rooma", "roomb", "roomd"].map { rooms.daemons[$0]! }
        }
    }

    /// B's daemon restarts (SIGTERM, then SIGKILL on a second run): its do-not-disturb setting and
    /// its call history, including a missed call refused by do-not-disturb, are still there.
    func testDaemonRestartKeepsHistoryAndDoNotDisturb() throws {
        try Rig.require()
        let rooms = try CallRooms(["roomA", "roomB"])
        defer { rooms.stopAll() }
        try rooms.start("rooma")
        try rooms.start("roomb")
        XCTAssertTrue(rooms.waitOnline("rooma", ["roomb"]))
        // One finished call, then do-not-disturb and a refused one.
        guard case .success(.callPlaced) = try rooms.control("rooma", .call(button: "roomb")) else { return XCTFail("call placed") }
        XCTAssertTrue(rooms.wait(5) { rooms.isConnected("roomb") }, "connected")
        XCTAssertEqual(try rooms.control("rooma", .hangUp), .success(.done))
        XCTAssertTrue(rooms.wait(3) { rooms.isIdle("roomb") })
        XCTAssertEqual(try rooms.control("roomb", .setDoNotDisturb(true)), .success(.doNotDisturb(true)))
        guard case .success(.callPlaced) = try rooms.control("rooma", .call(button: "roomb")) else { return XCTFail("second call placed") }
        XCTAssertTrue(rooms.wait(3) { rooms.isIdle("rooma") }, "refused by do-not-disturb")
        XCTAssertTrue(rooms.wait(2) { rooms.history("roomb").count == 2 })
        let before = rooms.history("roomb")

        for signal in [SIGTERM, SIGKILL] {
            let d = rooms.daemons["roomb"]!
            kill(d.process.processIdentifier, signal)
            _ = d.wait(timeout: 5)
            try rooms.start("roomb")
            let status = rooms.status("roomb")
            XCTAssertEqual(status?.doNotDisturb, true, "do-not-disturb survives signal \(signal)")
            XCTAssertEqual(rooms.history("roomb"), before, "the history survives signal \(signal)")
        }
        print("resilience: after a SIGTERM and a SIGKILL restart B keeps do-not-disturb and \(before.count) history entries: \(before.map(\.outcome))")
    }

    /// An xrun storm during a call: A's daemon is frozen (SIGSTOP/SIGCONT, what a starved machine
    /// does to it) for 120 ms eight times in four seconds. Its xruns are counted, the call stays up
    /// on both sides, and afterwards B hears A again.
    func testXrunStormDuringACallIsRecoveredAndCountedAndTheCallGoesOn() throws {
        try Rig.require()
        try measureWithRetries("xrun storm in a call") { c in  // A's xruns are the point; B's would spoil the attempt
            let rooms = try CallRooms(["roomA", "roomB"])
            defer { rooms.stopAll() }
            let a = try rooms.start("rooma")
            let b = try rooms.start("roomb")
            c.require(rooms.waitOnline("rooma", ["roomb"]), "A sees B")
            guard case .success(.callPlaced) = try rooms.control("rooma", .call(button: "roomb")) else {
                c.check(false, "call placed")
                return [a, b]
            }
            c.require(rooms.wait(5) { rooms.isConnected("rooma") && rooms.isConnected("roomb") }, "connected")
            for _ in 0..<8 {
                kill(a.process.processIdentifier, SIGSTOP)
                usleep(120_000)
                kill(a.process.processIdentifier, SIGCONT)
                usleep(380_000)
            }
            Thread.sleep(forTimeInterval: 1)
            c.check(rooms.isConnected("rooma") && rooms.isConnected("roomb"), "the call survives the storm on both sides")
            let ab = try c.probed(TalkerProbe(mouth: "roomA", ear: "roomB").run(clipPath: Speech.roomA(), folder: rooms.dir, name: "roomB-A"))
            let q = try Quality.measure([(ab.clipPath, ab.recordingPath)])
            XCTAssertEqual(try rooms.control("rooma", .hangUp), .success(.done))
            _ = rooms.stop("rooma")
            let xruns = a.finalXruns ?? 0
            print("resilience: xrun storm: A counted \(xruns) xruns; afterwards A → B \(q[0])")
            c.check(xruns >= 1, "the stalls are counted as xruns: \(xruns)")
            c.check(q[0].stoi >= CallTests.minSTOI, "B hears A after the storm: \(q[0])")
            return [b]
        }
    }
}
