import Calls
import XCTest

/// The network loopback test's reflector: a probe comes back once, unchanged, from the room it was
/// sent to, without acknowledgements or retries, and without touching a call.
final class CallProbeTests: XCTestCase {
    func testProbeIsReflectedOnceWithItsFieldsAndNoRetries() throws {
        var sim = CallSim(rooms: 2, seed: 40)
        sim.warmUp()
        var a = sim.engines[ra]!
        let effects = a.probe(rb, sequence: 0x0300_0007, sentMicros: 123_456_789, now: sim.now)
        sim.engines[ra] = a
        sim.apply(try XCTUnwrap(effects), at: ra)
        // Long enough for any retry to have gone out (and been reflected a second time).
        sim.run(for: settleTime(sim.timing(ra)))
        XCTAssertEqual(sim.reflected[ra]?.count, 1)
        XCTAssertEqual(sim.reflected[ra]?.first?.0, rb)
        XCTAssertEqual(sim.reflected[ra]?.first?.1, 0x0300_0007)
        XCTAssertEqual(sim.reflected[ra]?.first?.2, 123_456_789)
        XCTAssertNil(sim.reflected[rb], "a reply must not be reflected again")
    }

    func testProbeToUnknownOrOwnRoomIsRefused() {
        var sim = CallSim(rooms: 2, seed: 41)
        sim.warmUp()
        XCTAssertNil(sim.engines[ra]!.probe(RoomID("nowhere")!, sequence: 1, sentMicros: 1, now: sim.now))
        XCTAssertNil(sim.engines[ra]!.probe(ra, sequence: 1, sentMicros: 1, now: sim.now))
    }

    func testProbesDuringACallLeaveItAlone() {
        var sim = CallSim(rooms: 2, seed: 42)
        sim.warmUp()
        sim.command(ra, .call(button: "b"))
        sim.run(for: settleTime(sim.timing(ra)))
        XCTAssertEqual(sim.engine(ra).state, .connected)
        let planA = sim.plan[ra], planB = sim.plan[rb], events = sim.events[rb]?.count
        for i in 0..<20 {
            var a = sim.engines[ra]!
            let effects = a.probe(rb, sequence: UInt32(i), sentMicros: UInt64(i), now: sim.now)!
            sim.engines[ra] = a
            sim.apply(effects, at: ra)
            sim.advance()
        }
        sim.run(for: 0.2)
        XCTAssertEqual(sim.reflected[ra]?.map(\.1), (0..<20).map { UInt32($0) })
        XCTAssertEqual(sim.engine(ra).state, .connected)
        XCTAssertEqual(sim.engine(rb).state, .connected)
        XCTAssertEqual(sim.plan[ra], planA)
        XCTAssertEqual(sim.plan[rb], planB)
        XCTAssertEqual(sim.events[rb]?.count, events, "a probe is not a call event")
    }
}
