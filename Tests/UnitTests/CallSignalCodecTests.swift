import Calls
import Posix
import SignalTools
import XCTest

private func room(_ s: String) -> RoomID { RoomID(s)! }

/// One envelope of every message type, with fields away from their defaults.
let sampleEnvelopes: [Envelope] = {
    let caller = room("empfang")
    let group = IPv4Endpoint("239.255.0.7:5006")!
    let media = IPv4Endpoint("10.0.0.1:5004")!
    let messages: [SignalMessage] = [
        .invite(CallID(0xDEAD_BEEF_0000_0001), participants: [room("labor"), room("zimmer-2")],
                media: InviteMedia(callerMedia: media, voice: .unicast), kind: .normal),
        .invite(CallID(7), participants: [room("labor")], media: InviteMedia(callerMedia: media, voice: .multicast(group: group)),
                kind: .announcement),
        .invite(CallID(8), participants: [room("labor")], media: InviteMedia(callerMedia: media, voice: .unicast), kind: .emergency),
        .accept(CallID(.max), mediaPort: 5004),
        .accept(CallID(6), mediaPort: 5006, key: MediaKey(bytes: (0..<30).map { UInt8($0 * 7 + 1) })),
        .invite(CallID(9), participants: [room("labor")], media: InviteMedia(callerMedia: media, voice: .multicast(group: group),
                key: MediaKey(bytes: [UInt8](repeating: 0xA5, count: 30))), kind: .normal),
        .decline(CallID(3), .doNotDisturb), .decline(CallID(3), .busy), .decline(CallID(3), .notPermitted),
        .end(CallID(9)), .leave(CallID(10)),
        .mute(CallID(11), MuteState(microphone: true, speaker: false)),
        .mute(CallID(11), MuteState(microphone: false, speaker: true)),
        .hello(doNotDisturb: true, call: nil), .hello(doNotDisturb: false, call: CallID(12)),
        .hello(doNotDisturb: false, call: nil, announcement: SiteAnnouncement(software: "0.9.0", site: nil, appliedAt: nil)),
        .hello(doNotDisturb: true, call: CallID(14), announcement: SiteAnnouncement(
            software: "0.9.0+ä", site: SiteStamp(version: 3, digest: 0xDEAD_BEEF_0BAD_F00D, length: 2048), appliedAt: 1_700_000_000.25)),
        .missedCall(MissedCallNotice(callID: CallID(13), caller: room("labor"), participants: [room("empfang"), room("x")],
                                     started: 1_700_000_000.123)),
        .ack(0xFFFF_FFFF),
        .probe(sequence: 0x0100_0002, sentMicros: 0x0123_4567_89AB_CDEF),
        .probeReply(sequence: .max, sentMicros: .max),
        .health(TerminalHealth(audio: .unavailable, xruns: 0xDEAD_BEEF, selfTest: .failed, uptimeSeconds: .max)),
        .health(TerminalHealth(audio: .running, xruns: 0, selfTest: .none, uptimeSeconds: 3600)),
        .health(TerminalHealth(audio: .off, xruns: 1, selfTest: .passed, uptimeSeconds: 0)),
    ]
    return messages.enumerated().map { i, m in Envelope(sender: caller, messageID: UInt32(i) &* 0x0101_0101, message: m) }
}()

final class CallSignalCodecTests: XCTestCase {
    func testEveryMessageTypeRoundTrips() {
        XCTAssertEqual(Set(sampleEnvelopes.map(\.message.typeCode)).count, 12, "a message type is missing from the samples")
        for envelope in sampleEnvelopes {
            XCTAssertEqual(try SignalCodec.decode(SignalCodec.encode(envelope)).get(), envelope)
        }
    }

    /// A health message's two state bytes take only the values defined: a terminal of a newer
    /// version with a state this one does not know is refused, not shown as something else.
    func testAHealthMessageIsStrictlyRead() throws {
        let health = SignalCodec.encode(Envelope(sender: room("a"), messageID: 1, message: .health(
            TerminalHealth(audio: .running, xruns: 5, selfTest: .passed, uptimeSeconds: 60))))
        // Header 10 + sender "a" 1: audio at 11, self-test at 12, xruns 13-16, uptime 17-20.
        XCTAssertEqual(health.count, 21)
        XCTAssertFalse(SignalMessage.health(TerminalHealth(audio: .off, xruns: 0, selfTest: .none, uptimeSeconds: 0)).needsAck,
                       "a snapshot: the next one replaces a lost one")
        for (offset, value) in [(11, UInt8(3)), (12, UInt8(3)), (11, UInt8(0xFF))] {
            var b = health
            b[offset] = value
            XCTAssertEqual(SignalCodec.decode(b).failureValue, .reservedStateBits, "byte \(offset) = \(value)")
        }
        var b = health
        b[12] = 2
        guard case .health(let h) = try SignalCodec.decode(b).get().message else { return XCTFail("a health message") }
        XCTAssertEqual(h, TerminalHealth(audio: .running, xruns: 5, selfTest: .failed, uptimeSeconds: 60))
        XCTAssertTrue(h.isFaulty)
    }

    /// A hello's announcement: bit 2 says one follows, bit 4 that it names a site document (never
    /// without bit 2); the software name is bounded.
    /// A media key travels whole and is never printed: logs show envelopes.
    func testAMediaKeyRoundTripsAndIsNeverPrinted() throws {
        let key = try XCTUnwrap(MediaKey(bytes: [UInt8](repeating: 0xA5, count: MediaKey.length)))
        XCTAssertNil(MediaKey(bytes: [1, 2, 3]))
        let envelope = Envelope(sender: room("a"), messageID: 1, message: .accept(CallID(5), mediaPort: 5004, key: key))
        XCTAssertEqual(try SignalCodec.decode(SignalCodec.encode(envelope)).get(), envelope)
        for shown in [String(describing: envelope), String(reflecting: envelope), "\(key)"] {
            XCTAssertFalse(shown.contains("165") || shown.lowercased().contains("a5"), shown)
        }
        XCTAssertNotEqual(MediaKey.random(), MediaKey.random())
    }

    func testAHellosAnnouncementIsStrictlyRead() {
        let long = SiteAnnouncement(software: String(repeating: "x", count: 40), site: nil, appliedAt: nil)
        let sent = SignalCodec.encode(Envelope(sender: room("a"), messageID: 1, message: .hello(doNotDisturb: false, call: nil, announcement: long)))
        guard case .hello(_, _, let got)? = try? SignalCodec.decode(sent).get().message else { return XCTFail("a hello") }
        XCTAssertEqual(got?.software.utf8.count, SiteAnnouncement.maxSoftwareBytes, "cut to the bound when sent")
        let plain = SignalCodec.encode(Envelope(sender: room("a"), messageID: 1, message: .hello(doNotDisturb: false, call: nil)))
        var siteOnly = plain
        siteOnly[11] = 4
        XCTAssertEqual(SignalCodec.decode(siteOnly).failureValue, .reservedStateBits)
        var tooLong = plain
        tooLong[11] = 2
        tooLong += [0, UInt8(SiteAnnouncement.maxSoftwareBytes + 1)] + Array(repeating: UInt8(ascii: "x"), count: SiteAnnouncement.maxSoftwareBytes + 1)
        XCTAssertEqual(SignalCodec.decode(tooLong).failureValue, .invalidText)
        XCTAssertNil(SiteAnnouncement(software: "x", site: nil, appliedAt: 5).appliedAt, "no site, no time")
    }

    func testAuthenticationTagIsCarriedAndFlagged() throws {
        var envelope = sampleEnvelopes[0]
        envelope.authenticationTag = (0..<UInt8(SignalCodec.tagLength)).map { $0 &* 17 }
        let bytes = SignalCodec.encode(envelope)
        XCTAssertEqual(bytes[4] & EnvelopeFlags.authenticated.rawValue, EnvelopeFlags.authenticated.rawValue)
        XCTAssertEqual(try SignalCodec.decode(bytes).get(), envelope)
        // The same datagram without its tag has its last body bytes read as the tag: rejected.
        XCTAssertEqual(SignalCodec.decode(Array(bytes.dropLast(SignalCodec.tagLength))).failureValue, .truncatedBody)
    }

    func testEveryTruncationIsRejected() {
        for envelope in sampleEnvelopes {
            let bytes = SignalCodec.encode(envelope)
            for length in 0..<bytes.count {
                let result = SignalCodec.decode(Array(bytes.prefix(length)))
                XCTAssertNotNil(result.failureValue, "prefix \(length) of \(envelope.message) accepted")
            }
            XCTAssertEqual(SignalCodec.decode(bytes + [0]).failureValue, .trailingBytes)
        }
    }

    /// One crafted datagram per error case; the test fails when a case has no way to happen.
    func testEachErrorCaseHasItsOwnInput() {
        let valid = SignalCodec.encode(Envelope(sender: room("a"), messageID: 1, message: .end(CallID(5))))
        let hello = SignalCodec.encode(Envelope(sender: room("a"), messageID: 1, message: .hello(doNotDisturb: false, call: nil)))
        let decline = SignalCodec.encode(Envelope(sender: room("a"), messageID: 1, message: .decline(CallID(5), .busy)))
        let invite = SignalCodec.encode(Envelope(sender: room("a"), messageID: 1, message: .invite(
            CallID(5), participants: [room("b")], media: InviteMedia(callerMedia: IPv4Endpoint("10.0.0.1:5004")!, voice: .unicast), kind: .normal)))
        let missed = SignalCodec.encode(Envelope(sender: room("a"), messageID: 1, message: .missedCall(
            MissedCallNotice(callID: CallID(5), caller: room("a"), participants: [room("b")], started: 1))))
        let notify = SignalCodec.encode(Envelope(sender: room("a"), messageID: 1, message: .notify(StaffNotification(
            id: NotificationID(7), sender: room("a"), recipients: [room("b")], type: "material", label: "Material", text: "",
            priority: .urgent, tone: .bell, readAloud: true, sent: 1))))
        let stamped = SignalCodec.encode(Envelope(sender: room("a"), messageID: 1, message: .hello(doNotDisturb: false, call: nil, announcement:
            SiteAnnouncement(software: "v", site: SiteStamp(version: 1, digest: 2, length: 3), appliedAt: 4))))
        // stamped: bits 11, call 12-19, software length 20-21 and "v" 22, site version 23-30.
        // notify: id 11-18, priority 19, flags 20, tone length 21-22.
        // missed: call id 11-18, caller 19-20, time 21-28.
        // Offsets: header 10 + sender "a" 1 = 11; invite: call id 8, count at 19, "b" at 20-21, media 22-27, mode 28.
        func patched(_ bytes: [UInt8], _ offset: Int, _ value: UInt8) -> [UInt8] {
            var b = bytes
            b[offset] = value
            return b
        }
        let cases: [(SignalDecodeError, [UInt8])] = [
            (.truncatedHeader, Array(valid.prefix(5))),
            (.badMagic, patched(valid, 0, 0x80)),
            (.unsupportedVersion, patched(valid, 2, 2)),
            (.unknownMessageType, patched(valid, 3, 0)),
            (.reservedFlags, patched(valid, 4, 0x80)),
            (.invalidRoomID, patched(valid, 10, UInt8(ascii: "A"))),
            (.truncatedBody, Array(valid.dropLast())),
            (.trailingBytes, valid + [1]),
            (.zeroCallID, valid.prefix(11) + [UInt8](repeating: 0, count: 8)),
            (.invalidParticipants, patched(invite, 21, UInt8(ascii: "a"))),
            (.unknownMediaMode, patched(invite, 28, 2)),
            (.unknownCallKind, patched(invite, invite.count - 1, 3)),
            (.invalidMediaAddress, patched(patched(invite, 26, 0), 27, 0)),
            (.unknownDeclineReason, patched(decline, decline.count - 1, 0)),
            (.reservedStateBits, patched(hello, 11, 4)),
            (.invalidTime, patched(missed, 21, 0xFF)),
            (.unknownPriority, patched(notify, 19, 9)),
            (.invalidText, patched(notify, 21, 0xFF)),
            (.unknownTone, patched(notify, 23, UInt8(ascii: "z"))),
            (.invalidSiteStamp, patched(stamped, 30, 0)),
            (.invalidMediaKey, patched(valid, 4, EnvelopeFlags.mediaKey.rawValue)),
        ]
        XCTAssertEqual(Set(cases.map(\.0)), Set(SignalDecodeError.allCases))
        for (expected, bytes) in cases {
            XCTAssertEqual(SignalCodec.decode(bytes).failureValue, expected, "\(bytes)")
        }
    }

    /// Random bytes and random mutations of valid datagrams: never a trap; what decodes re-encodes
    /// to the same bytes (the format has one encoding per message).
    func testGarbageAndMutationsNeverTrapAndAcceptedInputIsCanonical() {
        var rng = SplitMix64(seed: 0xCA11)
        var counts: [SignalDecodeError: Int] = [:]
        var accepted = 0
        for i in 0..<50_000 {
            var bytes: [UInt8]
            if i % 2 == 0 {
                bytes = (0..<Int(rng.next() % 80)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            } else {
                bytes = SignalCodec.encode(sampleEnvelopes[Int(rng.next() % UInt64(sampleEnvelopes.count))])
                for _ in 0...(rng.next() % 3) where !bytes.isEmpty {
                    bytes[Int(rng.next() % UInt64(bytes.count))] ^= UInt8(truncatingIfNeeded: rng.next() | 1)
                }
            }
            switch SignalCodec.decode(bytes) {
            case .success(let envelope):
                accepted += 1
                XCTAssertEqual(SignalCodec.encode(envelope), bytes)
            case .failure(let error): counts[error, default: 0] += 1
            }
        }
        print("codec garbage: \(accepted) accepted, rejected by reason: \(counts.sorted { $0.value > $1.value })")
        XCTAssertGreaterThan(accepted, 0, "mutations of a valid datagram should sometimes stay valid")
        XCTAssertGreaterThan(counts[.badMagic, default: 0], 0)
        XCTAssertGreaterThan(counts.count, SignalDecodeError.allCases.count / 2)
    }

    func testEndpointParsing() {
        XCTAssertEqual(IPv4Endpoint("192.168.1.20:5060"), IPv4Endpoint(address: 0xC0A8_0114, port: 5060))
        XCTAssertEqual(IPv4Endpoint("192.168.1.20:5060")?.description, "192.168.1.20:5060")
        for bad in ["", "1.2.3:4", "1.2.3.4", "1.2.3.256:1", "1.2.3.4:65536", "1.2.3.4:5:6", "a.b.c.d:1"] {
            XCTAssertNil(IPv4Endpoint(bad), bad)
        }
        XCTAssertTrue(IPv4Endpoint("239.1.2.3:1")!.isMulticast)
        XCTAssertFalse(IPv4Endpoint("10.1.2.3:1")!.isMulticast)
    }
}

extension Result {
    var failureValue: Failure? {
        if case .failure(let e) = self { return e }
        return nil
    }
}
