import Calls
import Posix
import XCTest

// The acceptance scenarios, each run on a simulated network; CallEngineTests runs them on
// a clean network, CallLossTests under loss, duplication and reordering with several seeds.

let ra = CallSim.room("a"), rb = CallSim.room("b"), rc = CallSim.room("c"), rd = CallSim.room("d")

/// Long enough for setup through retransmissions: ring time, giving up, and some slack.
func settleTime(_ t: CallTiming) -> Double { t.ringTime + t.giveUpAfter * 2 + t.helloInterval }

enum CallScenarios {
    static func oneToOneConnectsOnBothSides(_ net: CallNetConditions, seed: UInt64) {
        var sim = CallSim(rooms: 2, conditions: net, seed: seed)
        sim.warmUp()
        sim.command(ra, .call(button: "b"))
        XCTAssertEqual(sim.engine(ra).state, .ringingOutgoing)
        sim.run(for: settleTime(sim.timing(ra)))
        XCTAssertEqual(sim.engine(ra).state, .connected)
        XCTAssertEqual(sim.engine(rb).state, .connected)
        XCTAssertEqual(sim.status(ra, of: rb), .connected)
        let id = sim.engine(ra).call?.id
        XCTAssertNotNil(id)
        XCTAssertEqual(sim.plan[ra], MediaPlan(sendTo: [sim.mediaEndpoint(rb)],
                                               receiveFrom: [MediaPeer(room: rb, endpoint: sim.mediaEndpoint(rb))], call: id))
        XCTAssertEqual(sim.plan[rb], MediaPlan(sendTo: [sim.mediaEndpoint(ra)],
                                               receiveFrom: [MediaPeer(room: ra, endpoint: sim.mediaEndpoint(ra))], call: id))
        XCTAssertEqual(sim.engine(ra).call?.id, sim.engine(rb).call?.id)
    }

    /// Caller hears every callee; each callee hears only the caller.
    static func groupCallMediaPlans(_ net: CallNetConditions, seed: UInt64, multicast: IPv4Endpoint? = nil) {
        var sim = CallSim(rooms: 4, conditions: net, seed: seed) { s in
            if let multicast { s.callerVoice = .multicast(group: multicast) }
        }
        sim.warmUp()
        sim.command(ra, .call(button: "all"))
        sim.run(for: settleTime(sim.timing(ra)))
        let callees = [rb, rc, rd]
        for r in callees { XCTAssertEqual(sim.status(ra, of: r), .connected, "\(r)") }
        let callerPlan = sim.plan[ra] ?? .idle
        XCTAssertEqual(Set(callerPlan.receiveFrom.map(\.room)), Set(callees))
        XCTAssertEqual(Set(callerPlan.sendTo), multicast.map { [$0] } ?? Set(callees.map(sim.mediaEndpoint)))
        for r in callees {
            let p = sim.plan[r] ?? .idle
            XCTAssertEqual(p.receiveFrom, [MediaPeer(room: ra, endpoint: sim.mediaEndpoint(ra))], "\(r) hears only the caller")
            XCTAssertEqual(p.sendTo, [sim.mediaEndpoint(ra)], "\(r) talks only to the caller")
            XCTAssertEqual(p.joinGroups, multicast.map { [$0] } ?? [])
        }
    }

    /// The chime plays for the ring time with no audio; then it stops and the audio opens.
    static func chimeThenAutoAccept(_ net: CallNetConditions, seed: UInt64) {
        var sim = CallSim(rooms: 2, conditions: net, seed: seed)
        sim.warmUp()
        sim.command(ra, .call(button: "b"))
        sim.run(for: settleTime(sim.timing(ra)))
        let chime = sim.chimeLog[rb] ?? []
        XCTAssertEqual(chime.map(\.on), [true, false])
        guard chime.count == 2, let opened = sim.planLog[rb]?.first else { return XCTFail("no chime or no audio") }
        XCTAssertEqual(chime[1].time - chime[0].time, sim.timing(rb).ringTime, accuracy: sim.step * 1.5)
        XCTAssertEqual(opened.time, chime[1].time, "audio opens when the chime stops")
        XCTAssertFalse(opened.plan.isIdle)
        XCTAssertGreaterThanOrEqual(opened.time - chime[0].time, sim.timing(rb).ringTime)
    }

    static func doNotDisturbDeclinesAndRecordsMissed(_ net: CallNetConditions, seed: UInt64) {
        var sim = CallSim(rooms: 2, conditions: net, seed: seed)
        sim.command(rb, .setDoNotDisturb(true))
        let seen = sim.run(until: { $0.engine(ra).presence(of: rb).doNotDisturb }, timeout: sim.timing(ra).helloInterval * 10)
        XCTAssertNotNil(seen, "presence shows do-not-disturb")
        sim.command(ra, .call(button: "b"))
        sim.run(for: settleTime(sim.timing(ra)))
        XCTAssertEqual(sim.engine(ra).state, .idle)
        XCTAssertTrue(sim.events[ra, default: []].contains { $0.event == .participantStatus(sim.engine(ra).call?.id ?? callID(sim, ra), room: rb, status: .declined(.doNotDisturb)) })
        XCTAssertEqual(sim.history[ra]?.last?.outcome, .notReached)
        XCTAssertEqual(sim.history[ra]?.last?.participants, [Participant(room: rb, status: .declined(.doNotDisturb))])
        XCTAssertEqual(sim.history[rb]?.count, 1)
        XCTAssertEqual(sim.history[rb]?.last?.outcome, .missed)
        XCTAssertEqual(sim.history[rb]?.last?.reason, .doNotDisturb)
        XCTAssertTrue(sim.chimeLog[rb]?.isEmpty ?? true, "no chime under do-not-disturb")
    }

    static func offlineCalleeUnavailableThenMissedWhenBack(_ net: CallNetConditions, seed: UInt64) {
        var sim = CallSim(rooms: 3, conditions: net, seed: seed)
        sim.stop(rb)
        sim.warmUp()
        sim.command(ra, .call(button: "all"))
        sim.run(for: settleTime(sim.timing(ra)))
        let id = callID(sim, ra)
        XCTAssertEqual(sim.status(ra, of: rb), .unavailable)
        XCTAssertEqual(sim.status(ra, of: rc), .connected, "the room that is online still connects")
        XCTAssertEqual(sim.engine(ra).pendingDeferred, 1)
        sim.command(ra, .hangUp)
        sim.run(for: sim.timing(ra).helloInterval)
        XCTAssertNil(sim.history[rb], "nothing reaches an offline room")
        sim.start(rb)
        let delivered = sim.run(until: { $0.history[rb]?.isEmpty == false }, timeout: sim.timing(ra).offlineAfter * 2)
        XCTAssertNotNil(delivered, "missed call delivered once the room is back")
        let entry = sim.history[rb]?.first
        XCTAssertEqual(entry?.outcome, .missed)
        XCTAssertEqual(entry?.callID, id)
        XCTAssertEqual(entry?.caller, ra)
        XCTAssertEqual(entry?.direction, .incoming)
        sim.run(for: settleTime(sim.timing(ra)))
        XCTAssertEqual(sim.history[rb]?.count, 1, "delivered once")
        XCTAssertEqual(sim.engine(ra).pendingDeferred, 0)
    }

    static func busyCalleeDeclines(_ net: CallNetConditions, seed: UInt64) {
        var sim = CallSim(rooms: 3, conditions: net, seed: seed)
        sim.warmUp()
        sim.command(ra, .call(button: "b"))
        sim.run(for: settleTime(sim.timing(ra)))
        XCTAssertEqual(sim.engine(rb).state, .connected)
        sim.command(rc, .call(button: "b"))
        sim.run(for: settleTime(sim.timing(rc)))
        XCTAssertEqual(sim.engine(rc).state, .idle)
        XCTAssertEqual(sim.history[rc]?.last?.participants, [Participant(room: rb, status: .declined(.busy))])
        XCTAssertEqual(sim.engine(rb).state, .connected, "the running call is unharmed")
        XCTAssertEqual(sim.engine(ra).state, .connected)
        // The caller of a running call is busy as well; a command to call is refused locally.
        sim.command(rc, .call(button: "a"))
        sim.run(for: settleTime(sim.timing(rc)))
        XCTAssertEqual(sim.history[rc]?.last?.participants, [Participant(room: ra, status: .declined(.busy))])
        sim.command(ra, .call(button: "c"))
        XCTAssertEqual(sim.rejections[ra], [.alreadyInCall])
    }

    static func calleeLeavesGroupOthersStay(_ net: CallNetConditions, seed: UInt64) {
        var sim = CallSim(rooms: 4, conditions: net, seed: seed)
        sim.warmUp()
        sim.command(ra, .call(button: "all"))
        sim.run(for: settleTime(sim.timing(ra)))
        sim.command(rc, .hangUp)
        sim.run(for: settleTime(sim.timing(ra)))
        XCTAssertEqual(sim.status(ra, of: rc), .left)
        XCTAssertEqual(sim.engine(rc).state, .idle)
        XCTAssertEqual(sim.plan[rc], .idle)
        for r in [rb, rd] {
            XCTAssertEqual(sim.status(ra, of: r), .connected)
            XCTAssertEqual(sim.engine(r).state, .connected)
        }
        XCTAssertEqual(Set(sim.plan[ra]?.receiveFrom.map(\.room) ?? []), [rb, rd])
        XCTAssertEqual(sim.history[rc]?.last?.outcome, .finished)
        // The last callee leaving ends the caller's call.
        sim.command(rb, .hangUp)
        sim.command(rd, .hangUp)
        sim.run(for: settleTime(sim.timing(ra)))
        XCTAssertEqual(sim.engine(ra).state, .idle)
        XCTAssertEqual(sim.ended(ra), [.finished])
    }

    /// A callee's daemon dies in a 1:3 call (no leave is sent): the caller sees it unavailable
    /// within 2 s, the other two stay connected, and the caller's media plan drops it.
    static func vanishedCalleeIsLostWithinTwoSeconds(_ net: CallNetConditions, seed: UInt64) {
        var sim = CallSim(rooms: 4, conditions: net, seed: seed)
        sim.warmUp()
        sim.command(ra, .call(button: "all"))
        sim.run(for: settleTime(sim.timing(ra)))
        XCTAssertEqual(sim.status(ra, of: rc), .connected)
        sim.stop(rc)
        let lost = sim.run(until: { $0.status(ra, of: rc) != .connected }, timeout: 5)
        XCTAssertNotNil(lost, "the caller noticed")
        XCTAssertLessThanOrEqual(lost ?? .infinity, 2.0, "within 2 s")
        XCTAssertEqual(sim.status(ra, of: rc), .unavailable)
        for r in [rb, rd] {
            XCTAssertEqual(sim.status(ra, of: r), .connected)
            XCTAssertEqual(sim.engine(r).state, .connected)
        }
        XCTAssertEqual(Set(sim.plan[ra]?.receiveFrom.map(\.room) ?? []), [rb, rd])
        // The caller vanishing ends the call at every callee, as quickly.
        sim.stop(ra)
        let ended = sim.run(until: { s in [rb, rd].allSatisfy { s.engine($0).state == .idle } }, timeout: 5)
        XCTAssertLessThanOrEqual(ended ?? .infinity, 2.0, "the callees notice the caller gone within 2 s")
    }

    static func calleeEndsOneToOne(_ net: CallNetConditions, seed: UInt64) {
        var sim = CallSim(rooms: 2, conditions: net, seed: seed)
        sim.warmUp()
        sim.command(ra, .call(button: "b"))
        sim.run(for: settleTime(sim.timing(ra)))
        XCTAssertEqual(sim.engine(ra).state, .connected)
        sim.command(rb, .hangUp)
        sim.run(for: settleTime(sim.timing(ra)))
        for r in [ra, rb] {
            XCTAssertEqual(sim.engine(r).state, .idle, "\(r)")
            XCTAssertEqual(sim.plan[r], .idle, "\(r)")
            XCTAssertEqual(sim.ended(r), [.finished], "\(r)")
        }
        XCTAssertEqual(sim.history[ra]?.last?.participants, [Participant(room: rb, status: .left)])
    }

    static func callerEndsEverywhere(_ net: CallNetConditions, seed: UInt64) {
        var sim = CallSim(rooms: 4, conditions: net, seed: seed)
        sim.warmUp()
        sim.command(ra, .call(button: "all"))
        sim.run(for: settleTime(sim.timing(ra)))
        XCTAssertEqual(sim.engine(rd).state, .connected)
        sim.command(ra, .hangUp)
        XCTAssertEqual(sim.engine(ra).state, .idle, "the caller's side ends at once")
        sim.run(for: settleTime(sim.timing(ra)))
        for r in [ra, rb, rc, rd] {
            XCTAssertEqual(sim.engine(r).state, .idle, "\(r)")
            XCTAssertEqual(sim.plan[r], .idle, "\(r)")
            XCTAssertEqual(sim.history[r]?.last?.outcome, .finished, "\(r)")
        }
    }

    static func muteSeenByOtherSide(_ net: CallNetConditions, seed: UInt64) {
        var sim = CallSim(rooms: 3, conditions: net, seed: seed)
        sim.warmUp()
        sim.command(ra, .call(button: "all"))
        sim.run(for: settleTime(sim.timing(ra)))
        sim.command(rb, .toggleMicrophoneMute)
        sim.command(ra, .setSpeakerMuted(true))
        sim.run(for: settleTime(sim.timing(ra)))
        XCTAssertEqual(sim.muteApplied[rb], MuteState(microphone: true))
        XCTAssertEqual(sim.engine(ra).call?.remoteMute[rb], MuteState(microphone: true))
        XCTAssertNil(sim.engine(rc).call?.remoteMute[rb], "callees do not see each other")
        for r in [rb, rc] { XCTAssertEqual(sim.engine(r).call?.remoteMute[ra], MuteState(speaker: true), "\(r)") }
        // Unmute and mute again quickly: reordering must not leave an old state behind.
        sim.command(rb, .toggleMicrophoneMute)
        sim.command(rb, .toggleMicrophoneMute)
        sim.command(rb, .toggleMicrophoneMute)
        sim.run(for: settleTime(sim.timing(ra)))
        XCTAssertEqual(sim.engine(ra).call?.remoteMute[rb], MuteState())
    }

    static func callID(_ sim: CallSim, _ room: RoomID) -> CallID {
        sim.events[room, default: []].compactMap { if case .outgoingCall(let id, _, _) = $0.event { id } else { nil } }.last
            ?? CallID(0)
    }
}
