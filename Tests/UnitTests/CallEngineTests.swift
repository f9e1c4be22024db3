import Calls
import Posix
import SignalTools
import Synchronization
import XCTest

/// The acceptance scenarios on a clean network, and the engine's edges.
final class CallEngineTests: XCTestCase {
    /// The accelerated soak found the caller's calls thread busy for the rest of every call that
    /// outlasted the answer timeout: a deadline no timer acts on stayed in the past and the
    /// thread's wait became zero. After every tick of every engine its next deadline now lies
    /// ahead: through a one-to-one call and a group call that outlast the answer timeout, and a
    /// callee leaving the group call while the others go on.
    func testNoDeadlineStaysInThePastThroughLongCalls() {
        var sim = CallSim(rooms: 3, seed: 77) { s in s.timing.answerTimeout = 3 }
        sim.checksDeadlines = true
        sim.warmUp()
        sim.command(ra, .call(button: "b"))
        sim.run(for: 5)
        XCTAssertEqual(sim.engine(rb).call?.isConnected, true, "still talking past the answer timeout")
        sim.command(ra, .hangUp)
        sim.run(for: 1)
        sim.command(ra, .call(button: "all"))
        sim.run(for: 4)
        sim.command(rc, .hangUp)
        sim.run(for: 2)
        XCTAssertEqual(sim.engine(ra).call?.status(of: rc), .left)
        XCTAssertEqual(sim.engine(rb).call?.isConnected, true)
        sim.command(ra, .hangUp)
        sim.run(for: 1)
        XCTAssertEqual(sim.stuckDeadlines.prefix(5), [], "\(sim.stuckDeadlines.count) ticks left a deadline in the past")
    }

    func testOneToOneConnectsOnBothSides() { CallScenarios.oneToOneConnectsOnBothSides(.clean, seed: 1) }
    func testGroupCallCallerHearsAllCalleesOnlyCaller() { CallScenarios.groupCallMediaPlans(.clean, seed: 2) }
    func testGroupCallOverMulticast() {
        CallScenarios.groupCallMediaPlans(.clean, seed: 3, multicast: IPv4Endpoint("239.255.0.9:5008")!)
    }
    func testChimeBeforeAudioThenAutoAccept() { CallScenarios.chimeThenAutoAccept(.clean, seed: 4) }
    func testDoNotDisturbDeclinesAndCalleeRecordsMissedCall() { CallScenarios.doNotDisturbDeclinesAndRecordsMissed(.clean, seed: 5) }
    func testOfflineCalleeUnavailableAndMissedCallDeliveredWhenBack() {
        CallScenarios.offlineCalleeUnavailableThenMissedWhenBack(.clean, seed: 6)
    }
    func testBusy() { CallScenarios.busyCalleeDeclines(.clean, seed: 7) }
    func testCalleeLeavesGroupCallOthersStay() { CallScenarios.calleeLeavesGroupOthersStay(.clean, seed: 8) }
    func testCalleeEndsOneToOneEndsOnBothSides() { CallScenarios.calleeEndsOneToOne(.clean, seed: 9) }
    func testCallerEndsEverywhere() { CallScenarios.callerEndsEverywhere(.clean, seed: 10) }
    func testMuteSeenByOtherSide() { CallScenarios.muteSeenByOtherSide(.clean, seed: 11) }
    func testVanishedCalleeIsLostWithinTwoSecondsOthersStay() { CallScenarios.vanishedCalleeIsLostWithinTwoSeconds(.clean, seed: 14) }

    func testWithoutAutoAnswerTheCallRingsUntilAnswered() {
        var sim = CallSim(rooms: 2, seed: 12) { $0.autoAnswer = false }
        sim.warmUp()
        sim.command(ra, .call(button: "b"))
        sim.run(for: settleTime(sim.timing(ra)))
        XCTAssertEqual(sim.engine(rb).state, .ringingIncoming)
        XCTAssertEqual(sim.chiming[rb], true)
        XCTAssertNil(sim.plan[rb])
        sim.command(rb, .answer)
        sim.run(for: sim.timing(ra).helloInterval)
        XCTAssertEqual(sim.engine(ra).state, .connected)
        XCTAssertEqual(sim.chiming[rb], false)
        sim.command(rb, .answer)
        XCTAssertEqual(sim.rejections[rb], [.nothingToAnswer])
    }

    func testUnansweredCallTimesOutMissedAndUnavailable() {
        var sim = CallSim(rooms: 2, seed: 13) { $0.autoAnswer = false }
        sim.warmUp()
        sim.command(ra, .call(button: "b"))
        sim.run(for: sim.timing(ra).answerTimeout + settleTime(sim.timing(ra)))
        XCTAssertEqual(sim.engine(ra).state, .idle)
        XCTAssertEqual(sim.engine(rb).state, .idle)
        XCTAssertEqual(sim.history[ra]?.last?.participants, [Participant(room: rb, status: .unavailable)])
        XCTAssertEqual(sim.history[ra]?.last?.outcome, .notReached)
        XCTAssertEqual(sim.history[rb]?.last?.outcome, .missed)
        XCTAssertEqual(sim.chiming[rb], false)
        // The counts the metrics show: one placed and not reached, one missed and waiting.
        XCTAssertEqual(sim.engine(ra).statistics.callsEnded, [CallTally(.outgoing, .notReached): 1])
        XCTAssertEqual(sim.engine(rb).statistics.callsEnded, [CallTally(.incoming, .missed): 1])
        XCTAssertEqual(sim.engine(rb).missedCalls.count, 1)
        // Called again and answered: a finished call on each side.
        sim.command(ra, .call(button: "b"))
        sim.run(for: settleTime(sim.timing(ra)))
        sim.command(rb, .answer)
        sim.run(for: sim.timing(ra).helloInterval)
        sim.command(ra, .hangUp)
        sim.run(for: settleTime(sim.timing(ra)))
        XCTAssertEqual(sim.engine(ra).statistics.callsEnded[CallTally(.outgoing, .finished)], 1)
        XCTAssertEqual(sim.engine(rb).statistics.callsEnded[CallTally(.incoming, .finished)], 1)
    }

    func testNotPermittedIsDeclinedByCallerAndByCallee() {
        // The caller's own configuration forbids it: declined without a message.
        var sim = CallSim(rooms: 3, seed: 14) { s in
            s.permissions = .only([ra: [rc], rb: [ra], rc: [ra]])
        }
        sim.warmUp()
        let sentBefore = sim.sent
        sim.command(ra, .call(button: "b"))
        XCTAssertEqual(sim.engine(ra).state, .idle)
        XCTAssertEqual(sim.history[ra]?.last?.participants, [Participant(room: rb, status: .declined(.notPermitted))])
        XCTAssertEqual(sim.sent, sentBefore)
        // Only the callee's configuration forbids it (configurations disagree): the callee declines.
        var sim2 = CallSim(rooms: 2, seed: 15) { s in
            if s.room == rb { s.permissions = .only([:]) }
        }
        sim2.warmUp()
        sim2.command(ra, .call(button: "b"))
        sim2.run(for: settleTime(sim2.timing(ra)))
        XCTAssertEqual(sim2.history[ra]?.last?.participants, [Participant(room: rb, status: .declined(.notPermitted))])
        XCTAssertEqual(sim2.history[rb]?.last?.outcome, .declined)
        XCTAssertEqual(sim2.history[rb]?.last?.reason, .notPermitted)
    }

    /// A terminal without sound devices (the site service's member on a server) places and takes
    /// no calls, and sends and hears notifications as every terminal does.
    func testTerminalWithoutAudioPlacesAndTakesNoCallsButNotifies() {
        var sim = CallSim(rooms: 2, seed: 17) { s in
            if s.room == rb { s.audio = false }
            s.notifications = ["naechster": NotificationType(id: "naechster", label: "Nächster Patient", recipients: [ra])]
        }
        sim.warmUp()
        let sentBefore = sim.sent
        sim.command(rb, .callRooms([ra], kind: .normal))
        sim.command(rb, .callRooms([ra], kind: .emergency))
        sim.command(rb, .callBack)
        XCTAssertEqual(sim.rejections[rb], [.noAudio, .noAudio, .noAudio])
        XCTAssertEqual(sim.sent, sentBefore, "nothing went out for them")
        for kind in [CallKind.normal, .emergency] {
            sim.command(ra, .callRooms([rb], kind: kind))
            sim.run(for: settleTime(sim.timing(ra)))
            XCTAssertEqual(sim.engine(ra).state, .idle, "\(kind)")
            XCTAssertEqual(sim.history[ra]?.last?.participants, [Participant(room: rb, status: .declined(.notPermitted))], "\(kind)")
            XCTAssertEqual(sim.history[rb]?.last?.reason, .notPermitted, "\(kind)")
            XCTAssertTrue(sim.plan[rb]?.isIdle ?? true, "\(kind): no media opened")
        }
        sim.command(rb, .notify(type: "naechster"))
        XCTAssertNotNil(sim.run(until: { !$0.announcements[ra, default: []].isEmpty }, timeout: 5), "its notification is heard")
    }

    func testPresenceOnlineOfflineAndInCall() {
        var sim = CallSim(rooms: 3, seed: 16)
        sim.warmUp()
        XCTAssertTrue(sim.engine(ra).presence(of: rb).online)
        sim.command(ra, .call(button: "b"))
        sim.run(for: settleTime(sim.timing(ra)))
        XCTAssertTrue(sim.engine(rc).presence(of: ra).inCall)
        XCTAssertFalse(sim.engine(rc).presence(of: ra).doNotDisturb)
        sim.stop(rc)
        let t = sim.timing(ra)
        sim.run(for: t.offlineAfter - t.helloInterval)
        XCTAssertTrue(sim.engine(ra).presence(of: rc).online, "not offline before offlineAfter")
        sim.run(for: t.helloInterval * 2)
        XCTAssertFalse(sim.engine(ra).presence(of: rc).online)
        XCTAssertTrue(sim.events[ra, default: []].contains { $0.event == .presenceChanged(room: rc, Presence(online: false)) })
    }

    func testCommandsAreCheckedBeforeAnythingIsSent() {
        var sim = CallSim(rooms: 2, seed: 17)
        sim.command(ra, .call(button: "nope"))
        sim.command(ra, .callRooms([ra]))
        sim.command(ra, .callRooms([]))
        sim.command(ra, .callRooms([CallSim.room("zz")]))
        sim.command(ra, .hangUp)
        XCTAssertEqual(sim.rejections[ra], [.unknownButton("nope"), .cannotCallSelf, .noTargets,
                                            .unknownRoom(CallSim.room("zz")), .noCall])
        XCTAssertEqual(sim.engine(ra).state, .idle)
        XCTAssertTrue(sim.inFlight.isEmpty)
    }

    /// Under terminal keys each stream's key is drawn by its sender for each call and reaches the
    /// rooms that hear that stream and no other: the caller's in its invite, each callee's in its
    /// accept; callees never get each other's.
    func testEachStreamsKeyIsDrawnByItsSenderPerCallAndReachesOnlyItsListeners() {
        let drawn = CountingKeys()
        var sim = CallSim(rooms: 3, seed: 19, mediaKeys: drawn)
        sim.warmUp()
        sim.command(ra, .call(button: "all"))
        sim.run(for: settleTime(sim.timing(ra)))
        let caller = sim.plan[ra] ?? .idle, atB = sim.plan[rb] ?? .idle, atC = sim.plan[rc] ?? .idle
        XCTAssertEqual(drawn.count, 3, "one key per stream: a's, b's, c's")
        let keyA = caller.sendKey
        XCTAssertNotNil(keyA)
        for (room, plan) in [(rb, atB), (rc, atC)] {
            XCTAssertEqual(plan.receiveFrom.map(\.key), [keyA], "\(room) hears a's stream under a's key")
            XCTAssertNotNil(plan.sendKey)
            XCTAssertEqual(caller.receiveFrom.first { $0.room == room }?.key, plan.sendKey, "a hears \(room)'s stream under its key")
        }
        XCTAssertEqual(Set([caller.sendKey, atB.sendKey, atC.sendKey]).count, 3, "three streams, three keys")
        sim.command(ra, .hangUp)
        sim.run(for: 1)
        sim.command(rb, .call(button: "a"))
        sim.run(for: settleTime(sim.timing(rb)))
        let again = sim.plan[rb] ?? .idle
        XCTAssertEqual(drawn.count, 5, "the next call draws new keys")
        XCTAssertNotNil(again.sendKey)
        XCTAssertFalse([caller.sendKey, atB.sendKey, atC.sendKey].contains(again.sendKey), "no key serves two calls")
        XCTAssertEqual(sim.plan[ra]?.receiveFrom.map(\.key), [again.sendKey])

        // Without a source (site key or clear), no key travels.
        var plain = CallSim(rooms: 2, seed: 20)
        plain.warmUp()
        plain.command(ra, .call(button: "b"))
        plain.run(for: settleTime(plain.timing(ra)))
        XCTAssertNil(plain.plan[ra]?.sendKey)
        XCTAssertEqual(plain.plan[rb]?.receiveFrom.map(\.key), [nil])
    }

    /// A revoked terminal's room leaves every call at once and shows offline; the call among the
    /// others goes on. A callee whose caller is revoked ends its side.
    func testADistrustedRoomLeavesTheCallAtOnceAndTheOthersStay() {
        var sim = CallSim(rooms: 3, seed: 21)
        sim.warmUp()
        sim.command(ra, .call(button: "all"))
        sim.run(for: settleTime(sim.timing(ra)))
        XCTAssertEqual(sim.status(ra, of: rc), .connected)
        XCTAssertTrue(sim.engine(ra).presence(of: rc).online)
        let effects = sim.engines[ra]!.distrust([rc], now: sim.now)
        sim.apply(effects, at: ra)
        XCTAssertEqual(sim.status(ra, of: rc), .left)
        XCTAssertEqual(sim.status(ra, of: rb), .connected, "the call with b goes on")
        XCTAssertEqual(sim.plan[ra]?.receiveFrom.map(\.room), [rb], "c's stream is dropped at once")
        XCTAssertFalse(sim.engine(ra).presence(of: rc).online, "c shows offline at once")
        XCTAssertFalse(effects.contains { if case .send(let room, _, _) = $0 { room == rc } else { false } }, "nothing is sent to c")
        XCTAssertEqual(sim.engine(ra).state, .connected)

        let atB = sim.engines[rb]!.distrust([ra], now: sim.now)
        sim.apply(atB, at: rb)
        XCTAssertEqual(sim.engine(rb).state, .idle, "b's caller is revoked: b's side ends")
        XCTAssertEqual(sim.plan[rb], .idle)
    }

    /// Garbage, truncated datagrams, unknown senders and spoofed sources: counted, state unharmed.
    func testMalformedDatagramsAreCountedAndDropped() {
        var sim = CallSim(rooms: 2, seed: 18)
        sim.warmUp()
        sim.command(ra, .call(button: "b"))
        sim.run(for: settleTime(sim.timing(ra)))
        let before = sim.engine(rb).call
        let from = sim.settings[ra]!.directory[ra]!.signalling
        var rng = SplitMix64(seed: 99)
        let valid = SignalCodec.encode(Envelope(sender: ra, messageID: 1, message: .end(before!.id)))
        var garbage = 0
        for n in 0..<2_000 {
            let bytes = n % 2 == 0 ? (0..<Int(rng.next() % 64)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
                                   : Array(valid.prefix(Int(rng.next() % UInt64(valid.count))))
            guard case .failure = SignalCodec.decode(bytes) else { continue }
            garbage += 1
            sim.inject(bytes, to: rb, from: from)
        }
        XCTAssertEqual(sim.engine(rb).statistics.decodeErrorCount, garbage)
        // A valid end, but from a room the directory does not know, and one from the wrong host.
        let stranger = SignalCodec.encode(Envelope(sender: CallSim.room("zz"), messageID: 1, message: .end(before!.id)))
        sim.inject(stranger, to: rb, from: from)
        sim.inject(valid, to: rb, from: IPv4Endpoint(address: from.address + 100, port: from.port))
        XCTAssertEqual(sim.engine(rb).statistics.unknownSender, 1)
        XCTAssertEqual(sim.engine(rb).statistics.addressMismatch, 1)
        XCTAssertEqual(sim.engine(rb).call, before, "the call is unharmed")
        XCTAssertEqual(sim.engine(rb).state, .connected)
    }

    /// A room that moved (10.0.0.2 → 10.0.0.99, its directory unchanged): in the clear, as under
    /// the one site key, a room speaks from its own host alone, so it is refused, counted and
    /// goes offline; under terminal keys its seal proves it, and it is followed there (presence,
    /// calls both ways, media to and from the new address, not the one its invite names), and
    /// back when it returns.
    func testARoomThatMovedIsFollowedOnlyWhenItsOwnKeyVouchesForIt() {
        var sim = CallSim(rooms: 2, seed: 41)
        sim.warmUp()
        let t = sim.timing(ra)
        sim.movedTo[rb] = 0x0A00_0063
        sim.run(for: t.offlineAfter + t.helloInterval)
        XCTAssertFalse(sim.engine(ra).presence(of: rb).online, "in the clear a room at another address is not taken")
        XCTAssertGreaterThan(sim.engine(ra).statistics.addressMismatch, 0)
        XCTAssertEqual(sim.engine(ra).movedRooms, [:])

        sim.sealedByTerminalKeys = true
        sim.run(for: t.helloInterval * 2)
        let moved = IPv4Endpoint(address: 0x0A00_0063, port: 5060)
        XCTAssertEqual(sim.engine(ra).movedRooms, [rb: moved])
        XCTAssertEqual(sim.engine(ra).signalling(of: rb), moved)
        XCTAssertTrue(sim.engine(ra).presence(of: rb).online, "online again once its sealed hellos are taken")
        XCTAssertEqual(sim.engine(ra).statistics.addressChanges, 1)

        sim.command(ra, .call(button: "b"))
        sim.run(for: settleTime(t))
        XCTAssertEqual(sim.engine(ra).state, .connected, "A reaches B where it is")
        XCTAssertEqual(sim.plan[ra]?.sendTo, [moved.with(port: 5004)], "A's voice goes to B's new address")
        sim.command(ra, .hangUp)
        sim.run(for: settleTime(t))
        XCTAssertEqual(sim.engine(rb).state, .idle)
        sim.command(rb, .call(button: "a"))
        sim.run(for: settleTime(t))
        XCTAssertEqual(sim.engine(ra).state, .connected, "B reaches A from where it is")
        XCTAssertEqual(sim.plan[ra]?.sendTo, [moved.with(port: 5004)], "A answers B's voice at its new address, not the one its invite names")
        XCTAssertEqual(sim.plan[ra]?.receiveFrom.map(\.endpoint), [moved.with(port: 5004)])
        sim.command(rb, .hangUp)
        sim.run(for: settleTime(t))
        XCTAssertEqual(sim.history[ra]?.map(\.outcome), [.finished, .finished], "both calls once in A's history")

        sim.movedTo[rb] = nil
        sim.run(for: t.helloInterval * 2)
        XCTAssertEqual(sim.engine(ra).movedRooms, [:], "back at its directory address")
        XCTAssertTrue(sim.engine(ra).presence(of: rb).online)
    }

    /// A duplicate is acked again but handled once; an end that overtakes its invite wins.
    func testDuplicatesAndReorderedEndBeforeInvite() {
        var sim = CallSim(rooms: 2, seed: 19)
        let from = sim.settings[ra]!.directory[ra]!.signalling
        let id = CallID(0x1234)
        let invite = SignalCodec.encode(Envelope(sender: ra, messageID: 7, message: .invite(
            id, participants: [rb], media: InviteMedia(callerMedia: sim.mediaEndpoint(ra), voice: .unicast), kind: .normal)))
        sim.inject(invite, to: rb, from: from)
        sim.inject(invite, to: rb, from: from)
        XCTAssertEqual(sim.events[rb, default: []].filter { if case .incomingCall = $0.event { true } else { false } }.count, 1)
        XCTAssertEqual(sim.engine(rb).statistics.duplicates, 1)
        XCTAssertEqual(sim.inFlight.filter { $0.to == from }.count, 2, "every copy is acked")

        var sim2 = CallSim(rooms: 2, seed: 20)
        let end = SignalCodec.encode(Envelope(sender: ra, messageID: 8, message: .end(id)))
        sim2.inject(end, to: rb, from: from)
        sim2.inject(invite, to: rb, from: from)
        XCTAssertEqual(sim2.engine(rb).state, .idle)
        XCTAssertEqual(sim2.engine(rb).statistics.stale, 2)
    }

    /// A hello a few ids behind the newest is a late copy (ignored); one far behind is a room that
    /// restarted with a new id start (taken at once, not after offline_after).
    func testLateHelloIsStaleButARestartedRoomsHelloCounts() {
        var sim = CallSim(rooms: 2, seed: 21)
        let from = sim.settings[ra]!.directory[ra]!.signalling
        func hello(_ id: UInt32, dnd: Bool) -> [UInt8] {
            SignalCodec.encode(Envelope(sender: ra, messageID: id, message: .hello(doNotDisturb: dnd, call: nil)))
        }
        sim.inject(hello(1_000_000, dnd: false), to: rb, from: from)
        sim.inject(hello(999_990, dnd: true), to: rb, from: from)
        XCTAssertEqual(sim.engine(rb).statistics.stale, 1)
        XCTAssertFalse(sim.engine(rb).presence(of: ra).doNotDisturb, "the late copy changed nothing")
        sim.inject(hello(17, dnd: true), to: rb, from: from)
        XCTAssertEqual(sim.engine(rb).statistics.stale, 1)
        XCTAssertTrue(sim.engine(rb).presence(of: ra).doNotDisturb, "the restarted room's hello counts")
    }

    /// Each room's directory-wide hellos carry what it announces; the others keep the newest while
    /// it is online (a call's keepalives carry none and change nothing), and forget it once it is not.
    func testAnnouncementsTravelInHellosAndAreKeptWhileTheRoomIsOnline() {
        var sim = CallSim(rooms: 3, seed: 5)
        let stamp = SiteStamp(version: 4, digest: 42, length: 900)
        sim.engines[ra]!.announce(SiteAnnouncement(software: "0.9.0", site: stamp, appliedAt: 1_700_000_100))
        sim.engines[rb]!.announce(SiteAnnouncement(software: "0.8.9", site: nil, appliedAt: nil))
        sim.run(for: 2.5)
        XCTAssertEqual(sim.engine(rc).announcements[ra]?.site, stamp)
        XCTAssertEqual(sim.engine(rc).announcements[ra]?.appliedAt, 1_700_000_100)
        XCTAssertEqual(sim.engine(rc).announcements[rb]?.software, "0.8.9")
        XCTAssertNil(sim.engine(rc).announcements[rc], "not its own")
        for room in [ra, rb, rc] { XCTAssertEqual(sim.engine(rc).announcement(of: room), sim.engine(rc).announcements[room], "one room's, looked up") }
        sim.command(ra, .call(button: rb.value))
        sim.run(for: 3)
        XCTAssertEqual(sim.engine(rb).announcements[ra]?.site, stamp, "kept through a call's keepalives")
        sim.stop(ra)
        sim.run(for: sim.timing(rb).offlineAfter + 1.5)
        XCTAssertNil(sim.engine(rb).announcements[ra], "offline: nothing shown")
        XCTAssertNil(sim.engine(rb).announcement(of: ra))
    }

    /// Each terminal tells every room how it is doing every `healthInterval`, once it has
    /// something to tell; a change waits for the next round; a room gone offline shows nothing;
    /// and the round's timer never leaves a deadline behind.
    func testHealthGoesToEveryRoomEveryIntervalAndIsShownWhileOnline() {
        var sim = CallSim(rooms: 3, seed: 15) { $0.timing.healthInterval = 2 }
        sim.checksDeadlines = true
        sim.run(for: 2.5)
        XCTAssertEqual(sim.engine(rc).healths, [:], "nothing reported, nothing told")
        let fine = TerminalHealth(audio: .running, xruns: 0, selfTest: .passed, uptimeSeconds: 10)
        sim.engines[ra]!.report(fine)
        sim.run(for: 0.1)
        XCTAssertEqual(sim.engine(rb).healths[ra], fine, "the first round at the next tick")
        XCTAssertEqual(sim.engine(rc).healths[ra], fine)
        XCTAssertEqual(sim.engine(ra).health, fine, "its own, as reported")
        XCTAssertNil(sim.engine(ra).healths[ra], "not among the others'")
        let faulty = TerminalHealth(audio: .unavailable, xruns: 3, selfTest: .passed, uptimeSeconds: 11)
        sim.engines[ra]!.report(faulty)
        sim.run(for: 1)
        XCTAssertEqual(sim.engine(rb).healths[ra], fine, "a change costs no message of its own")
        sim.run(for: 1.2)
        XCTAssertEqual(sim.engine(rb).healths[ra], faulty, "told with the next round")
        XCTAssertEqual(sim.engine(rc).healths[ra], faulty)
        sim.stop(ra)
        sim.run(for: sim.timing(rb).offlineAfter + 1.5)
        XCTAssertNil(sim.engine(rb).healths[ra], "offline: nothing shown")
        // A room that comes online hears the others' at once, not at their next round.
        sim.engines[rb]!.report(fine)
        sim.run(for: 0.1)
        sim.start(ra)
        sim.run(for: 0.3)
        XCTAssertLessThan(0.4, sim.timing(rb).healthInterval, "rb's next round is not due yet")
        XCTAssertEqual(sim.engine(ra).healths[rb], fine, "told as it came online")
        XCTAssertNil(sim.engine(ra).healths[rc], "rc reported nothing")
        XCTAssertEqual(sim.stuckDeadlines.prefix(5), [], "\(sim.stuckDeadlines.count) ticks left a deadline in the past")
    }

    /// A new site document is announced at once, not a hello interval later: the spread of a
    /// change across a site goes one hop per fetch.
    func testAChangedAnnouncementGoesOutAtTheNextTick() {
        var sim = CallSim(rooms: 3, seed: 6)
        sim.engines[ra]!.announce(SiteAnnouncement(software: "0.9.0", site: SiteStamp(version: 4, digest: 42, length: 900), appliedAt: 1))
        sim.run(for: 2.5)
        let changes = sim.engine(rc).siteChanges
        let newer = SiteStamp(version: 5, digest: 43, length: 950)
        sim.engines[ra]!.announce(SiteAnnouncement(software: "0.9.0", site: newer, appliedAt: nil))
        sim.run(for: 0.1)
        XCTAssertLessThan(0.1, sim.timing(ra).helloInterval)
        XCTAssertEqual(sim.engine(rc).announcements[ra]?.site, newer, "heard within 0.1 s")
        XCTAssertEqual(sim.engine(rb).announcements[ra]?.site, newer)
        XCTAssertEqual(sim.engine(rc).siteChanges, changes + 1, "the follower is told once")
        // Applied: the hellos say when; the document named is the same, so nobody is told again.
        sim.engines[ra]!.announce(SiteAnnouncement(software: "0.9.0", site: newer, appliedAt: 2))
        sim.run(for: 2.5)
        XCTAssertEqual(sim.engine(rc).announcements[ra]?.appliedAt, 2)
        XCTAssertEqual(sim.engine(rc).siteChanges, changes + 1)
    }

    func testSettingsProblemsNameTheKey() {
        var s = CallSim(rooms: 2).settings[ra]!
        XCTAssertEqual(s.problems(), [])
        s.buttons["x"] = CallButton(rooms: [CallSim.room("zz")])
        s.timing.offlineAfter = s.timing.helloInterval
        s.callerVoice = .multicast(group: IPv4Endpoint("10.0.0.1:5")!)
        let problems = s.problems()
        XCTAssertTrue(problems.contains { $0.hasPrefix("buttons.x:") })
        XCTAssertTrue(problems.contains { $0.hasPrefix("timing.offline_after:") })
        XCTAssertTrue(problems.contains { $0.hasPrefix("caller_voice:") })
    }
}

/// Keys 1, 2, 3, ... (each byte the key's number), counted.
private final class CountingKeys: MediaKeySource, Sendable {
    private let drawn = Mutex(0)
    var count: Int { drawn.withLock { $0 } }
    func newKey() -> MediaKey? {
        let n = drawn.withLock { n -> Int in n += 1; return n }
        return MediaKey(bytes: [UInt8](repeating: UInt8(n), count: MediaKey.length))
    }
}
