import Calls
import Posix
import XCTest

/// Every scenario again under 20 % loss, 20 % duplication and up to 20 ms of reordering, with
/// several seeds; then the setup time from the caller's command to audio at every callee.
final class CallLossTests: XCTestCase {
    let seeds: [UInt64] = [101, 202, 303, 404, 505]

    func testScenariosUnderLossDuplicationAndReordering() {
        for seed in seeds {
            CallScenarios.oneToOneConnectsOnBothSides(.lossy, seed: seed)
            CallScenarios.groupCallMediaPlans(.lossy, seed: seed)
            CallScenarios.groupCallMediaPlans(.lossy, seed: seed, multicast: IPv4Endpoint("239.255.0.9:5008")!)
            CallScenarios.chimeThenAutoAccept(.lossy, seed: seed)
            CallScenarios.doNotDisturbDeclinesAndRecordsMissed(.lossy, seed: seed)
            CallScenarios.offlineCalleeUnavailableThenMissedWhenBack(.lossy, seed: seed)
            CallScenarios.busyCalleeDeclines(.lossy, seed: seed)
            CallScenarios.calleeLeavesGroupOthersStay(.lossy, seed: seed)
            CallScenarios.calleeEndsOneToOne(.lossy, seed: seed)
            CallScenarios.callerEndsEverywhere(.lossy, seed: seed)
            CallScenarios.muteSeenByOtherSide(.lossy, seed: seed)
            CallScenarios.vanishedCalleeIsLostWithinTwoSeconds(.lossy, seed: seed)
        }
    }

    /// The lossy network really lost, duplicated and reordered: retransmissions and duplicates counted.
    func testTheLossyNetworkExercisesRetransmissionAndDedupe() {
        var sim = CallSim(rooms: 4, conditions: .lossy, seed: 7)
        sim.warmUp()
        sim.command(ra, .call(button: "all"))
        sim.run(for: settleTime(sim.timing(ra)))
        sim.command(ra, .hangUp)
        sim.run(for: settleTime(sim.timing(ra)))
        let stats = [ra, rb, rc, rd].map { sim.engine($0).statistics }
        XCTAssertGreaterThan(stats.map(\.retransmissions).reduce(0, +), 0)
        XCTAssertGreaterThan(stats.map(\.duplicates).reduce(0, +), 0)
        XCTAssertEqual(stats.map(\.decodeErrorCount).reduce(0, +), 0)
        for r in [ra, rb, rc, rd] { XCTAssertEqual(sim.engine(r).state, .idle) }
    }

    /// Simulated time from the caller's command until every callee's media plan sends to and
    /// plays the caller (callee side open) and until the caller's plan has every callee, minus the
    /// configured ring time. Goal of the issue: under 100 ms on a LAN.
    func testCallSetupTime() {
        let goal = 0.1
        for (name, net) in [("LAN", CallNetConditions.clean), ("20% loss+dup+20ms reorder", .lossy)] {
            for callees in [1, 4] {
                var calleeSide: [Double] = []
                var bothSides: [Double] = []
                for seed in seeds.prefix(3) {
                    var sim = CallSim(rooms: callees + 1, conditions: net, seed: seed)
                    sim.warmUp()
                    for _ in 0..<4 {
                        let others = sim.engines.keys.filter { $0 != ra }
                        let ring = sim.timing(ra).ringTime
                        sim.command(ra, .call(button: "all"))
                        let open = sim.run(until: { s in
                            others.allSatisfy { r in
                                let p = s.plan[r] ?? .idle
                                return p.receiveFrom.contains { $0.room == ra } && p.sendTo == [s.mediaEndpoint(ra)]
                            }
                        }, timeout: settleTime(sim.timing(ra)))
                        let full = sim.run(until: { s in Set((s.plan[ra] ?? .idle).receiveFrom.map(\.room)) == Set(others) },
                                           timeout: settleTime(sim.timing(ra)))
                        guard let open, let full else { return XCTFail("\(name) 1:\(callees) seed \(seed): no setup") }
                        calleeSide.append(open - ring)
                        bothSides.append(open + full - ring)
                        sim.command(ra, .hangUp)
                        sim.run(for: sim.timing(ra).giveUpAfter * 2)
                    }
                }
                let ms = { (v: [Double]) in
                    let s = v.sorted()
                    return String(format: "median %.1f ms, max %.1f ms", s[s.count / 2] * 1000, s.last! * 1000)
                }
                print("call setup \(name) 1:\(callees), ring time excluded, \(calleeSide.count) calls: "
                      + "every callee open \(ms(calleeSide)); caller mixing every callee \(ms(bothSides))")
                if net.loss == 0 {
                    XCTAssertLessThan(calleeSide.max()!, goal)
                    XCTAssertLessThan(bothSides.max()!, goal)
                }
            }
        }
    }
}
