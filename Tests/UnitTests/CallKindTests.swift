import Calls
import Posix
import XCTest

/// Emergency calls and announcements between call engines on the simulated network, clean and
/// under loss, duplication and reordering.
final class CallKindTests: XCTestCase {
    /// Callees answer by hand here, so an emergency call or announcement that opens by itself shows.
    static func sim(_ net: CallNetConditions, seed: UInt64, rooms: Int = 4) -> CallSim {
        var sim = CallSim(rooms: rooms, conditions: net, seed: seed) { s in
            s.autoAnswer = false
            s.buttons["notfall"] = CallButton(rooms: s.directory.keys.filter { $0 != s.room }.sorted(), kind: .emergency)
        }
        sim.warmUp()
        return sim
    }

    static func connected(_ sim: CallSim, _ room: RoomID) -> Bool { sim.engine(room).state == .connected }
    static func kinds(_ sim: CallSim, _ room: RoomID) -> [CallKind] { sim.history[room, default: []].map(\.callKind) }

    func testEmergencyOpensAtOnceThroughDoNotDisturb() { emergencyThroughDoNotDisturb(.clean, seed: 1) }
    func testEmergencyThroughDoNotDisturbUnderLoss() { for seed: UInt64 in 11...14 { emergencyThroughDoNotDisturb(.lossy, seed: seed) } }

    func emergencyThroughDoNotDisturb(_ net: CallNetConditions, seed: UInt64) {
        var sim = Self.sim(net, seed: seed)
        sim.command(rb, .setDoNotDisturb(true))
        sim.command(rb, .setSpeakerMuted(true))
        sim.command(ra, .callRooms([rb], kind: .emergency))
        let t = sim.run(until: { Self.connected($0, rb) && Self.connected($0, ra) }, timeout: settleTime(sim.timing(ra)))
        XCTAssertNotNil(t, "seed \(seed): answered without anyone at the keys")
        XCTAssertEqual(sim.engine(rb).call?.kind, .emergency)
        XCTAssertTrue(sim.engine(rb).doNotDisturb, "do-not-disturb stays on for everything else")
        XCTAssertEqual(sim.muteApplied[rb]?.speaker, false, "the speaker opens for it")
        XCTAssertTrue(sim.cueNames(rb).contains(.emergencyCall), "its own tone")
        XCTAssertFalse(sim.cueNames(rb).contains(.connected))
        XCTAssertNil(sim.chimeLog[rb], "no chime to wait for")
        XCTAssertEqual(sim.plan[rb]?.sendTo, [sim.mediaEndpoint(ra)], "both ways")
        sim.command(ra, .hangUp)
        sim.run(for: settleTime(sim.timing(ra)))
        XCTAssertEqual(Self.kinds(sim, ra), [.emergency])
        XCTAssertEqual(Self.kinds(sim, rb), [.emergency])
        XCTAssertEqual(sim.history[rb]?.last?.outcome, .finished)
    }

    /// A room in a normal call as callee, another as caller: both calls end for the emergency,
    /// and the rooms left behind are told.
    func testEmergencyBreaksIntoCalls() { emergencyBreaksIn(.clean, seed: 2) }
    func testEmergencyBreaksIntoCallsUnderLoss() { for seed: UInt64 in 21...24 { emergencyBreaksIn(.lossy, seed: seed) } }

    func emergencyBreaksIn(_ net: CallNetConditions, seed: UInt64) {
        var sim = Self.sim(net, seed: seed)
        // c calls b (b is the callee), d is idle and then calls nobody.
        sim.command(rc, .callRooms([rb]))
        XCTAssertNotNil(sim.run(until: { $0.engine(rb).state == .ringingIncoming }, timeout: settleTime(sim.timing(ra))))
        sim.command(rb, .answer)
        XCTAssertNotNil(sim.run(until: { Self.connected($0, rc) }, timeout: settleTime(sim.timing(ra))), "seed \(seed)")
        sim.command(ra, .callRooms([rb], kind: .emergency))
        let t = sim.run(until: { $0.engine(rb).call?.kind == .emergency && Self.connected($0, rb) && $0.engine(rc).call == nil },
                        timeout: settleTime(sim.timing(ra)))
        XCTAssertNotNil(t, "seed \(seed): b takes the emergency, c's call is over")
        XCTAssertEqual(sim.engine(rb).statistics.callsBrokenByEmergency, 1)
        XCTAssertTrue(sim.cueNames(rc).contains(.callEnded), "c hears its call ended")
        XCTAssertEqual(sim.history[rc]?.last?.outcome, .finished)
        XCTAssertEqual(sim.history[rc]?.last?.participants.first?.status, .left, "b left c's call")

        // Now b is the caller of a normal call to d; an emergency from c ends it for d too.
        sim.command(ra, .hangUp)
        sim.run(for: settleTime(sim.timing(ra)))
        sim.command(rb, .callRooms([rd]))
        XCTAssertNotNil(sim.run(until: { $0.engine(rd).state == .ringingIncoming }, timeout: settleTime(sim.timing(ra))))
        sim.command(rd, .answer)
        XCTAssertNotNil(sim.run(until: { Self.connected($0, rd) }, timeout: settleTime(sim.timing(ra))), "seed \(seed)")
        sim.command(rc, .callRooms([rb], kind: .emergency))
        XCTAssertNotNil(sim.run(until: { $0.engine(rb).call?.caller == rc && Self.connected($0, rb) && $0.engine(rd).call == nil },
                                timeout: settleTime(sim.timing(ra))), "seed \(seed): d is told the call ended")
        XCTAssertEqual(sim.engine(rb).statistics.callsBrokenByEmergency, 2)
    }

    func testEmergencyDoesNotBreakAnotherEmergency() {
        var sim = Self.sim(.clean, seed: 3)
        sim.command(ra, .callRooms([rb], kind: .emergency))
        sim.run(for: 1)
        XCTAssertTrue(Self.connected(sim, rb))
        sim.command(rc, .callRooms([rb], kind: .emergency))
        sim.run(for: settleTime(sim.timing(ra)))
        XCTAssertEqual(sim.engine(rb).call?.caller, ra, "b stays in the first emergency")
        XCTAssertEqual(sim.history[rc]?.last?.participants.first?.status, .declined(.busy))
        XCTAssertEqual(sim.cueNames(rc).last, .busy)
    }

    /// Staff in a normal call press the emergency button: their call ends, the emergency goes out.
    func testEmergencyButtonEndsOwnCall() {
        var sim = Self.sim(.clean, seed: 4)
        sim.command(ra, .callRooms([rb]))
        sim.run(for: 0.5)
        sim.command(rb, .answer)
        sim.run(for: 1)
        XCTAssertTrue(Self.connected(sim, ra))
        sim.command(ra, .call(button: "notfall"))
        sim.run(for: settleTime(sim.timing(ra)))
        XCTAssertEqual(sim.engine(ra).call?.kind, .emergency)
        XCTAssertEqual(Set(sim.engine(ra).call?.connectedRooms ?? []), [rb, rc, rd], "every room took it at once")
        XCTAssertNil(sim.rejections[ra])
        // A second emergency from the same caller is refused: one call at a time.
        sim.command(ra, .callRooms([rc], kind: .emergency))
        XCTAssertEqual(sim.rejections[ra], [.alreadyInCall])
    }

    func testAnnouncementIsOneWayAndOpensWithoutAnswer() { announcementOneWay(.clean, seed: 5) }
    func testAnnouncementUnderLoss() { for seed: UInt64 in 51...54 { announcementOneWay(.lossy, seed: seed) } }

    func announcementOneWay(_ net: CallNetConditions, seed: UInt64) {
        var sim = Self.sim(net, seed: seed)
        sim.command(rd, .setDoNotDisturb(true))
        sim.command(ra, .callRooms([rb, rc, rd], kind: .announcement))
        let t = sim.run(until: { Self.connected($0, rb) && Self.connected($0, rc) }, timeout: settleTime(sim.timing(ra)))
        XCTAssertNotNil(t, "seed \(seed): open after the chime, nobody answered")
        sim.run(until: { $0.engine(ra).call?.connectedRooms.count == 2 }, timeout: settleTime(sim.timing(ra)))
        XCTAssertGreaterThanOrEqual(t ?? 0, sim.timing(ra).ringTime - 0.01, "after the chime")
        XCTAssertEqual(sim.chimeLog[rb]?.first?.on, true)
        for callee in [rb, rc] {
            XCTAssertEqual(sim.plan[callee]?.sendTo, [], "seed \(seed): \(callee)'s microphone goes nowhere")
            XCTAssertEqual(sim.plan[callee]?.receiveFrom.map(\.room), [ra])
        }
        XCTAssertEqual(sim.plan[ra]?.receiveFrom, [], "the caller hears nobody")
        XCTAssertEqual(Set(sim.plan[ra]?.sendTo ?? []), [sim.mediaEndpoint(rb), sim.mediaEndpoint(rc)])
        XCTAssertEqual(sim.engine(rd).call, nil, "do-not-disturb keeps an announcement out")
        sim.command(ra, .hangUp)
        sim.run(for: settleTime(sim.timing(ra)))
        XCTAssertEqual(Self.kinds(sim, rb), [.announcement])
        XCTAssertEqual(sim.history[rd]?.last?.outcome, .declined, "not a missed call to call back")
        XCTAssertTrue(sim.engine(rd).missedCalls.isEmpty)
        XCTAssertEqual(sim.history[ra]?.last?.callKind, .announcement)
    }

    func testAnnouncementOverMulticast() {
        var sim = CallSim(rooms: 3, conditions: .clean, seed: 6) { s in
            s.callerVoice = .multicast(group: IPv4Endpoint("239.255.0.9:5010")!)
        }
        sim.warmUp()
        sim.command(ra, .callRooms([rb, rc], kind: .announcement))
        sim.run(for: settleTime(sim.timing(ra)))
        XCTAssertEqual(sim.plan[ra]?.sendTo, [IPv4Endpoint("239.255.0.9:5010")!])
        XCTAssertEqual(sim.plan[rb]?.joinGroups, [IPv4Endpoint("239.255.0.9:5010")!])
        XCTAssertEqual(sim.plan[rb]?.sendTo, [])
    }
}
