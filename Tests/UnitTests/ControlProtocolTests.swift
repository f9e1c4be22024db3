import Foundation
import Calls
import Control
import SignalTools
import XCTest

/// The JSON shapes: every event and reply survives encode → line → parse → decode, statuses read as words.
final class ControlProtocolTests: XCTestCase {
    let k = RoomID("kueche")!
    let b = RoomID("buero")!

    func testEveryEventRoundTripsThroughItsJSONLine() throws {
        let entry = HistoryEntry(callID: CallID(.max), direction: .incoming, caller: k,
                                 participants: [Participant(room: b, status: .declined(.notPermitted)), Participant(room: k, status: .left)],
                                 outcome: .declined, reason: .notPermitted, started: 1_700_000_000.25, ended: 1_700_000_001.5)
        let events: [CallEvent] = [
            .incomingCall(CallID(0xABC), from: k, participants: [b]),
            .incomingCall(CallID(0xABD), from: k, participants: [b], kind: .emergency),
            .outgoingCall(CallID(1), to: [k, b]),
            .outgoingCall(CallID(2), to: [k, b], kind: .announcement),
            .historyAdded(HistoryEntry(callID: CallID(3), direction: .outgoing, caller: b, participants: [Participant(room: k, status: .connected)],
                                       outcome: .finished, started: 1_700_000_000, ended: 1_700_000_009, kind: .emergency)),
            .participantStatus(CallID(1), room: b, status: .ringing),
            .participantStatus(CallID(1), room: b, status: .declined(.busy)),
            .participantStatus(CallID(1), room: b, status: .unavailable),
            .connected(CallID(1)),
            .callEnded(CallID(1), outcome: .finished),
            .muteChanged(room: k, MuteState(microphone: false, speaker: true)),
            .presenceChanged(room: b, Presence(online: false)),
            .doNotDisturbChanged(false),
            .historyAdded(entry),
            .participantStatus(CallID(1), room: b, status: .declined(.refused)),
            .missedAcknowledged([CallID(1), CallID(0xFFFF_FFFF_FFFF)]),
            .historyErased,
        ]
        for e in events {
            let line = try Wire.encode(e)
            XCTAssertFalse(line.contains(UInt8(ascii: "\n")))
            XCTAssertEqual(try Wire.decode(ControlEvent.self, from: line), .call(e), String(decoding: line, as: UTF8.self))
        }
        XCTAssertEqual(try Wire.decode(ControlEvent.self, from: Wire.encode(ControlEvent.eventsLost(3))), .eventsLost(3))
    }

    func testStatusesAreWordsWithAReasonAndKeysAreSnakeCase() throws {
        let text = try Wire.string(CallEvent.participantStatus(CallID(0x2A), room: b, status: .declined(.doNotDisturb)))
        XCTAssertEqual(text, #"{"call_id":"2a","event":"participant_status","reason":"do_not_disturb","room":"buero","status":"declined"}"#)
        let presence = try Wire.string(CallEvent.presenceChanged(room: k, Presence(online: true, doNotDisturb: true, inCall: true)))
        XCTAssertEqual(presence, #"{"dnd":true,"event":"presence_changed","in_call":true,"online":true,"room":"kueche"}"#)
    }

    func testEveryReplyRoundTripsForItsCommand() throws {
        let status = ControlStatus(room: k, name: "Küche \"Nord\"", doNotDisturb: true, mute: MuteState(microphone: true),
                                   call: ActiveCall(callID: CallID(5), direction: .incoming, caller: b,
                                                    participants: [Participant(room: k, status: .connected)], connected: false),
                                   media: [MediaStream(source: "10.77.0.11:5004", received: 812, played: 790, delayMs: 42.5)],
                                   missedCalls: 2)
        var missed = HistoryEntry(callID: CallID(11), direction: .incoming, caller: b, participants: [Participant(room: k, status: .unavailable)],
                                  outcome: .missed, started: 1_800_000_000, ended: 1_800_000_000)
        missed.acknowledged = false
        let pairs: [(ControlCommand, ControlReply)] = [
            (.perform(.call(button: "Alle")), .callPlaced(CallID(9), to: [k, b])),
            (.perform(.callRooms([k])), .callPlaced(CallID(10), to: [k])),
            (.perform(.hangUp), .done),
            (.perform(.setMicrophoneMuted(true)), .mute(MuteState(microphone: true))),
            (.perform(.setDoNotDisturb(true)), .doNotDisturb(true)),
            (.status, .status(status)),
            (.status, .status(ControlStatus(room: k, name: "K", doNotDisturb: false, mute: MuteState()))),
            (.rooms, .rooms(RoomDirectory(rooms: [.init(id: b, name: "Büro", presence: Presence(online: true, inCall: true))],
                                          buttons: [.init(name: "Alle", rooms: [k, b])]))),
            (.history(limit: nil), .history([], notifications: [])),
            (.history(limit: nil), .history([missed], notifications: [])),
            (.perform(.answer), .done), (.perform(.decline), .done), (.perform(.acknowledge(all: true)), .done), (.eraseHistory, .done),
            (.perform(.callBack), .callPlaced(CallID(12), to: [b])), (.perform(.callMissed), .callPlaced(CallID(13), to: [b])),
            (.loopback(insertMs: 7.5), .loopback(LoopbackStatus(state: .running))),
            (.loopbackResult, .loopback(LoopbackStatus(state: .aborted))),
            (.networkLoopback(room: k, count: 4), .networkLoopback(NetworkLoopbackStatus(state: .running, room: k))),
            (.networkLoopbackResult, .networkLoopback(NetworkLoopbackStatus(
                state: .done, room: k,
                result: RoundTripSummary.summarise(sent: 5, rttMs: [0: 1, 1: 3, 2: 1.5, 4: 2.5], duplicates: 1, jitterBounds: (10, 20)),
                terminal: TerminalTiming(periodMs: 2.5, bufferPeriods: 4, processingDelayMs: 2.5, codecLookaheadMs: 6.5,
                                         jitterMinMs: 5, jitterMaxMs: 120, xruns: 3, processMaxMs: 0.125)))),
            (.networkLoopbackResult, .networkLoopback(NetworkLoopbackStatus(
                state: .done, room: b, result: RoundTripSummary.summarise(sent: 3, rttMs: [:], duplicates: 0, jitterBounds: (10, 20))))),
            (.statistics, .statistics(Self.statistics)),
            (.statistics, .statistics(DaemonStatistics(audio: Self.statistics.audio, network: nil, calls: nil, reload: .none))),
        ]
        for (command, reply) in pairs {
            let line = try Wire.encode(reply)
            XCTAssertEqual(try ControlReply.read(line, to: .command(command)), reply, "\(command): \(String(decoding: line, as: UTF8.self))")
        }
        // A status without "media" (an older daemon) reads as no streams; a fractional count is refused.
        let old: JSONValue = ["room": "kueche", "name": "K", "dnd": false, "mute": ["microphone": false, "speaker": false], "call": .null]
        XCTAssertEqual(try reply(old, for: .status), .status(ControlStatus(room: k, name: "K", doNotDisturb: false, mute: MuteState())))
        let bad: JSONValue = ["room": "kueche", "name": "K", "dnd": false, "mute": ["microphone": false, "speaker": false], "call": .null,
                              "media": [["source": "1.2.3.4:5", "received": .number(1.5), "played": 1, "delay_ms": 2]]]
        XCTAssertThrowsError(try reply(bad, for: .status))
    }

    static let statistics = DaemonStatistics(
        audio: .init(running: true, captureDevice: "roomA", playbackDevice: "roomA", frames: 12_345, xruns: 2, captureXruns: 1, playbackXruns: 1, sessions: 3, captureGapFrames: 7, staleCaptureFrames: 3, captureDelayMs: 1.5,
                     micDrops: 0, microphoneClippedSamples: 12, speakerClippedSamples: 3, echoReturnLossEnhancementDB: 21.5, echoDelayMs: nil, echoCancellerResets: 2,
                     echoCancellerRealignments: 1, echoReferenceMoves: 2, processMaxMs: 0.75, howls: 0),
        network: .init(ssrc: 0x1234_5678, opus: .init(application: "voip", bitrate: 64000, fec: true, dtx: false, lookaheadMs: 6.5),
                       sent: 900, sentPeakDBFS: -7.5, sendErrors: 0, fecCarried: 450, datagrams: 1810, accepted: 1800, malformed: 10, notRouted: 0,
                       srtp: .init(authenticated: 1790, unauthenticated: 3, replayed: 1, failed: 0, protectErrors: 0), streams: [
            .init(ssrc: 0xDEAD_BEEF, source: "10.77.0.11:5004", delayMs: 30.5, targetMs: 30, received: 1800, played: 1790,
                  concealed: 4, fecRecovered: 2, fecMissed: 1, late: 3, underruns: 0, cutBacks: 1,
                  inserted: 2, dropped: 5, newTimelines: 1, driftPPM: -12.5, trimPPM: 40, slewedMs: 3.25, pauseJumpedMs: 1.5, pathShiftMs: 5, playoutDelayMs: 8.5),
        ]),
        calls: .init(decodeErrors: 1, duplicates: 0, retransmissions: 4, unreachable: 0,
                     refused: .init(notSealed: 0, malformed: 0, unknownSender: 0, authentication: 2, replay: 1, stale: 0, senderMismatch: 0, notForEveryone: 0,
                                    unknownSession: 4, badSignature: 1, older: 2),
                     storeWrites: 5, storeFailures: 0, mediaTo: ["239.255.0.1:5004"], brokenByEmergency: 1,
                     speech: .init(announcements: 3, spoken: 2, cached: 1, failures: 0, lastSynthesisMs: 41.5, lastGapMs: 0),
                     protection: .terminalKeys, awaitingSession: 3, moved: ["labor": "10.77.0.99:5070"]),
        reload: .init(count: 2, failed: 1, applied: ["buttons"], waitingForCallEnd: [], restartNeeded: ["audio.period_ms"],
                      audioWaiting: ["audio.capture_device"], audioReopens: 1, notApplied: ["speech: no voice xx"], lastError: "mixer.mic_gain_db: 99 is above 24"),
        site: {
            var transfers = DaemonStatistics.Site.Transfers()
            transfers.fetched = 2
            transfers.fetchBusy = 1
            transfers.served = 4
            return .init(id: "praxis", version: 3, digest: "4c1f0a9e2b7d3c11", appliedAt: 1_764_400_000.5, refused: ["older": 1],
                         lastRefusal: "site document from empfang refused: older", transfers: transfers,
                         arrival: .init(version: 3, from: "empfang", heard: 1_764_400_000.125, fetchStarted: 1_764_400_000.25,
                                        received: 1_764_400_000.3125, kept: 1_764_400_000.375))
        }(),
        selfTest: {
            var t = DaemonStatistics.SelfTest()
            t.runs = 3
            t.failures = 1
            t.postponed = 2
            t.last = .init(at: 1_764_400_100.5, passed: false, roundTripMs: nil, echoLevelDb: -200,
                           problems: ["the microphone is silent (-200 dBFS): check that it is connected and not muted"])
            return t
        }())

    /// The control fuzzer's seed for `stats` replies is this value's encoding, so that it starts
    /// from a reply the decoder takes whole (`INTERCOM_WRITE_SEEDS=1` writes it again).
    func testTheFuzzersStatisticsSeedIsTodaysReply() throws {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("fuzz/control/seed-stats.json").path
        let line = try Wire.encode(ControlReply.statistics(Self.statistics))
        if ProcessInfo.processInfo.environment["INTERCOM_WRITE_SEEDS"] == "1" { try Data(line).write(to: URL(fileURLWithPath: path)) }
        let seed = try XCTUnwrap(FileManager.default.contents(atPath: path), path)
        XCTAssertEqual(try ControlReply.read(seed, to: .command(.statistics)), .statistics(Self.statistics),
                       "\(path) is not today's stats reply: INTERCOM_WRITE_SEEDS=1 writes it again")
    }

    /// `stats` is typed on the wire: every counter is required, so a daemon that leaves one out
    /// is a protocol error, never a silent 0; an unmeasured echo delay is null, not absent.
    func testStatisticsNameEveryCounterAndAMissingOneIsAViolation() throws {
        let json = try tree(ControlReply.statistics(Self.statistics))
        XCTAssertEqual(json["audio"]?["capture_gap_frames"], 7)
        XCTAssertEqual(json["audio"]?["echo_delay_ms"], .null)
        XCTAssertEqual(json["audio"]?["microphone_clipped_samples"], 12)
        XCTAssertEqual(json["network"]?["sent_peak_dbfs"], .number(-7.5))
        XCTAssertEqual(json["network"]?["streams"]?.arrayValue?.first?["fec_recovered"], 2)
        XCTAssertEqual(json["calls"]?["store_writes"], 5)
        XCTAssertEqual(json["calls"]?["refused"]?["authentication"], 2)
        XCTAssertEqual(json["calls"]?["media_to"]?.arrayValue?.first, "239.255.0.1:5004")
        XCTAssertEqual(json["calls"]?["speech"]?["last_synthesis_ms"], .number(41.5))
        XCTAssertEqual(json["calls"]?["broken_by_emergency"], 1)
        XCTAssertEqual(json["network"]?["opus"]?["lookahead_ms"], .number(6.5))
        XCTAssertEqual(json["network"]?["srtp"]?["replayed"], 1)
        XCTAssertEqual(json["reload"]?["restart_needed"]?.arrayValue?.first, "audio.period_ms")
        XCTAssertEqual(json["site"]?["transfers"]?["fetch_busy"], 1)
        XCTAssertEqual(json["site"]?["arrival"]?["fetch_started"], .number(1_764_400_000.25))
        XCTAssertEqual(try reply(json, for: .statistics), .statistics(Self.statistics), "round trip")
        var noError = Self.statistics
        noError.reload = .none
        XCTAssertEqual(try tree(ControlReply.statistics(noError))["reload"]?["last_error"], .null, "null, not absent")
        guard case .object(var top) = json, case .object(var audio)? = top["audio"] else { return XCTFail("an object") }
        audio["xruns"] = nil
        top["audio"] = .object(audio)
        XCTAssertThrowsError(try reply(.object(top), for: .statistics)) { error in
            XCTAssertTrue("\(error)".contains("audio.xruns"), "the violation names the field: \(error)")
        }
        top = [:]
        if case .object(let t) = json { top = t }
        top["calls"] = nil
        XCTAssertThrowsError(try reply(.object(top), for: .statistics), "a section is null or present, never absent")
    }

    func testEveryRequestRoundTripsAndAliasesParse() throws {
        let commands: [ControlRequest] = [
            .ping, .subscribe, .command(.perform(.call(button: "Empfang"))), .command(.perform(.callRooms([k, b]))), .command(.perform(.hangUp)),
            .command(.perform(.callRooms([k], kind: .emergency))), .command(.perform(.callRooms([k, b], kind: .announcement))),
            .command(.perform(.answer)), .command(.perform(.decline)), .command(.perform(.callBack)), .command(.perform(.callMissed)),
            .command(.perform(.acknowledge(all: false))), .command(.perform(.acknowledge(all: true))), .command(.eraseHistory),
            .command(.perform(.setSpeakerMuted(false))), .command(.perform(.setMicrophoneMuted(true))), .command(.perform(.setDoNotDisturb(false))),
            .command(.status), .command(.rooms), .command(.history(limit: 3)), .command(.history(limit: nil)),
            .command(.loopback(insertMs: 0)), .command(.loopback(insertMs: 7.5)), .command(.loopbackResult),
            .command(.networkLoopback(room: b, count: 200)), .command(.networkLoopbackResult), .command(.statistics),
        ]
        for (i, r) in commands.enumerated() {
            let line = try r.line(id: Int64(i))
            let json = try JSONValue.parse(line)
            XCTAssertEqual(json["id"], .integer(Int64(i)))
            XCTAssertEqual(ControlRequest.read(line).request, .success(r))
        }
        XCTAssertEqual(parse(["cmd": "leave"]), .success(.command(.perform(.hangUp))))
        XCTAssertEqual(parse(["cmd": "unmute", "target": "microphone"]), .success(.command(.perform(.setMicrophoneMuted(false)))))
        XCTAssertEqual(parse(["cmd": "call", "rooms": ["kueche", "kueche"]]), .success(.command(.perform(.callRooms([k])))))
        XCTAssertEqual(parse(["cmd": "status", "future_option": 1]), .success(.command(.status)))
        XCTAssertEqual(parse(["cmd": "call", "rooms": ["kueche"], "kind": "paging"]),
                       .failure(ControlFailure(.invalidArgument, "\"kind\" is call, emergency or announcement")))
        guard case .failure(let f) = parse(["cmd": "call", "button": "a", "kind": "emergency"]) else {
            return XCTFail("a button's call takes no kind")
        }
        XCTAssertEqual(f.code, .invalidArgument)
    }

    /// A refused request names the member and what it must be, whichever type reads it.
    func testRefusalsNameTheMember() {
        func refusal(_ line: String) -> ControlFailure? {
            if case .failure(let f) = ControlRequest.read(Array(line.utf8)).request { return f }
            return nil
        }
        XCTAssertEqual(refusal(#"{"cmd": 5}"#), ControlFailure(.invalidArgument, "\"cmd\" must be a string"))
        XCTAssertEqual(refusal(#"{"id": 1}"#), ControlFailure(.invalidArgument, "missing \"cmd\""))
        XCTAssertEqual(refusal(#"{"cmd": "call", "rooms": "kueche"}"#), ControlFailure(.invalidArgument, "\"rooms\" must be an array of room ids"))
        XCTAssertEqual(refusal(#"{"cmd": "history", "limit": "all"}"#), ControlFailure(.invalidArgument, "\"limit\" must be a positive integer"))
        XCTAssertEqual(refusal(#"{"cmd": "dnd", "state": true}"#), ControlFailure(.invalidArgument, "\"state\" must be \"on\" or \"off\""))
        XCTAssertEqual(refusal(#"{"cmd": "teleport"}"#), ControlFailure(.unknownCommand, "unknown command \"teleport\""))
        XCTAssertEqual(refusal(#"{"cmd": "call", "button": 7}"#)?.code, .invalidArgument)
        XCTAssertEqual(refusal(#"[1, 2]"#), ControlFailure(.parseError, "a request is a JSON object"))
        XCTAssertEqual(refusal(#"{"cmd": "status""#)?.code, .parseError)
        let badID = ControlRequest.read(Array(#"{"id": [1], "cmd": "status"}"#.utf8))
        XCTAssertNil(badID.id)
        XCTAssertEqual(badID.request, .failure(ControlFailure(.invalidArgument, "\"id\" must be an integer or a string")))
        XCTAssertEqual(ControlRequest.read(Array(#"{"id": "a", "cmd": "status"}"#.utf8)).id, .string("a"))
    }

    /// One vocabulary: every command a key can be set to do is also a control command by the same
    /// name, and each is written under its first name and read back as itself.
    func testEveryKeyCommandIsAControlCommandByTheSameName() throws {
        for (name, command) in CallCommand.named {
            XCTAssertEqual(parse(["cmd": .string(name)]), .success(.command(.perform(command))), name)
            let line = try ControlRequest.command(.perform(command)).line(id: 1)
            XCTAssertEqual(ControlRequest.read(line).request, .success(.command(.perform(command))), name)
        }
        XCTAssertEqual(parse(["cmd": "toggle_dnd"]), .success(.command(.perform(.toggleDoNotDisturb))))
        XCTAssertEqual(parse(["cmd": "acknowledge_all"]), .success(.command(.perform(.acknowledge(all: true)))))
        XCTAssertEqual(try reply(["dnd": true], for: .perform(.toggleDoNotDisturb)), .doNotDisturb(true))
        // What older daemons know is written as they know it.
        XCTAssertEqual(try tree(ControlRequest.command(.perform(.hangUp)))["cmd"], "hangup")
        XCTAssertEqual(try tree(ControlRequest.command(.perform(.acknowledge(all: true)))), ["cmd": "acknowledge", "all": true])
    }

    /// The envelope: a response whose id could not be read says null, not nothing.
    func testAResponseAlwaysCarriesItsID() throws {
        XCTAssertEqual(try Wire.string(ControlResponse(id: nil, outcome: .failure(.init(.parseError, "x")))),
                       #"{"error":{"code":"parse_error","message":"x"},"id":null,"ok":false}"#)
        XCTAssertEqual(try Wire.string(ControlResponse(id: .integer(3), outcome: .success(.pong(protocolVersion: 2)))),
                       #"{"id":3,"ok":true,"result":{"pong":true,"protocol":2}}"#)
        XCTAssertEqual(try ControlReply.read(Array(#"{"pong":true}"#.utf8), to: .ping), .pong(protocolVersion: 1), "a daemon before 2")
        let read = try ControlResponse.read(Array(#"{"id":3,"ok":false,"error":{"code":"from_the_future","message":"m"}}"#.utf8), to: .ping)
        XCTAssertEqual(read.outcome, .failure(.init(.internal, "m")), "an unknown code reads as internal")
    }

    func testMalformedRepliesAreProtocolViolations() {
        XCTAssertThrowsError(try reply(["dnd": "yes"], for: .perform(.setDoNotDisturb(true))))
        XCTAssertThrowsError(try reply(["call_id": "not hex", "to": []], for: .perform(.call(button: "x"))))
        XCTAssertThrowsError(try event(["event": "participant_status", "call_id": "1", "room": "k", "status": "declined"]))
        XCTAssertThrowsError(try event(["event": "teleported"]))
    }

    // Helpers: a reply or event read from a hand-made JSON tree, a request line parsed as the daemon does.
    private func tree(_ value: some Encodable) throws -> JSONValue { try JSONValue.parse(Wire.encode(value)) }
    private func reply(_ json: JSONValue, for command: ControlCommand) throws -> ControlReply {
        try ControlReply.read(json.encodedLine(), to: .command(command))
    }
    private func event(_ json: JSONValue) throws -> ControlEvent { try Wire.decode(ControlEvent.self, from: json.encodedLine()) }
    private func parse(_ json: JSONValue) -> Result<ControlRequest, ControlFailure> { ControlRequest.read(try! json.encodedLine()).request }
}
