import Posix
// The signalling wire format: big-endian, length-prefixed room ids, every field checked against
// the datagram before use. Layout and rationale: docs/calls.md.

/// Encodes and strictly decodes signalling datagrams.
public enum SignalCodec {
    public static let magic: (UInt8, UInt8) = (0x49, 0x43)  // "IC"
    public static let version: UInt8 = 1
    /// magic 2, version 1, type 1, flags 1, message id 4, sender length 1.
    public static let fixedHeaderLength = 10
    public static let tagLength = 16
    /// Upper bound on a participant list (a 50-room practice calls everyone with room to spare).
    /// The binding limit is `maxDatagramBytes`: how many rooms fit depends on their ids.
    public static let maxParticipants = 64
    /// The largest signalling datagram before sealing: with the seal's overhead (`SignalSeal`,
    /// 29 bytes and the sender's id) it stays within one Ethernet frame (1472 bytes of UDP
    /// payload), so that no message to many rooms is fragmented (one lost fragment loses all).
    public static let maxDatagramBytes = 1400

    /// The size of `message` from `sender` on the wire, unsealed.
    public static func size(of message: SignalMessage, from sender: RoomID) -> Int {
        encode(Envelope(sender: sender, messageID: 0, message: message)).count
    }
    /// Times travel as milliseconds since 1970; beyond this (year 33658) a Double would no longer
    /// hold them exactly, so decoding rejects them and encoding clamps.
    public static let maxMilliseconds: UInt64 = 1_000_000_000_000_000

    // MARK: encoding

    /// The datagram for `envelope`. Room ids are valid by construction; a participant list that
    /// breaks the decoder's rules still encodes (the receiver then rejects it), so this never traps.
    public static func encode(_ envelope: Envelope) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64)
        out.append(magic.0)
        out.append(magic.1)
        out.append(version)
        out.append(envelope.message.typeCode)
        out.append(envelope.flags.rawValue)
        out.appendBE(envelope.messageID)
        out.appendRoom(envelope.sender)
        switch envelope.message {
        case .invite(let call, let participants, let media, let kind):
            out.appendBE(call.value)
            out.appendRooms(participants)
            out.appendEndpoint(media.callerMedia)
            switch media.voice {
            case .unicast: out.append(0)
            case .multicast(let group):
                out.append(1)
                out.appendEndpoint(group)
            }
            out.append(kindCode(kind))
            out.appendKey(media.key)
        case .accept(let call, let port, let key):
            out.appendBE(call.value)
            out.appendBE(port)
            out.appendKey(key)
        case .decline(let call, let reason):
            out.appendBE(call.value)
            out.append(reasonCode(reason))
        case .end(let call), .leave(let call):
            out.appendBE(call.value)
        case .mute(let call, let state):
            out.appendBE(call.value)
            out.append((state.microphone ? 1 : 0) | (state.speaker ? 2 : 0))
        case .hello(let dnd, let call, let announcement):
            out.append((dnd ? 1 : 0) | (announcement != nil ? 2 : 0) | (announcement?.site != nil ? 4 : 0))
            out.appendBE(call?.value ?? 0)
            if let announcement {
                out.appendText(announcement.software, max: SiteAnnouncement.maxSoftwareBytes)
                if let site = announcement.site {
                    out.append(contentsOf: site.bytes)
                    out.appendBE(milliseconds(announcement.appliedAt ?? 0))
                }
            }
        case .missedCall(let notice):
            out.appendBE(notice.callID.value)
            out.appendRoom(notice.caller)
            out.appendBE(milliseconds(notice.started))
            out.appendRooms(notice.participants)
        case .ack(let id):
            out.appendBE(id)
        case .probe(let sequence, let micros), .probeReply(let sequence, let micros):
            out.appendBE(sequence)
            out.appendBE(micros)
        case .notify(let n):
            out.appendBE(n.id.value)
            out.append(priorityCode(n.priority))
            out.append(n.readAloud ? 1 : 0)
            out.appendText(n.tone.rawValue, max: 32)
            out.appendText(n.type, max: 32)
            out.appendBE(milliseconds(n.sent))
            out.appendRooms(n.recipients)
            out.appendText(n.label, max: StaffNotification.maxLabelBytes)
            out.appendText(n.text, max: StaffNotification.maxTextBytes)
        case .notificationAcknowledged(let id):
            out.appendBE(id.value)
        case .health(let h):
            out.append(healthCode(h.audio))
            out.append(healthCode(h.selfTest))
            out.appendBE(h.xruns)
            out.appendBE(h.uptimeSeconds)
        }
        if let tag = envelope.authenticationTag {
            // Always exactly tagLength bytes on the wire, whatever the caller passed.
            out.append(contentsOf: (tag + [UInt8](repeating: 0, count: tagLength)).prefix(tagLength))
        }
        return out
    }

    static func kindCode(_ kind: CallKind) -> UInt8 {
        switch kind {
        case .normal: 0
        case .emergency: 1
        case .announcement: 2
        }
    }

    static func reasonCode(_ reason: DeclineReason) -> UInt8 {
        switch reason {
        case .doNotDisturb: 1
        case .busy: 2
        case .notPermitted: 3
        case .refused: 4
        }
    }

    static func healthCode(_ a: TerminalHealth.Audio) -> UInt8 {
        switch a {
        case .off: 0
        case .running: 1
        case .unavailable: 2
        }
    }

    static func healthCode(_ c: TerminalHealth.Check) -> UInt8 {
        switch c {
        case .none: 0
        case .passed: 1
        case .failed: 2
        }
    }

    static func priorityCode(_ p: NotificationPriority) -> UInt8 {
        switch p {
        case .normal: 0
        case .urgent: 1
        case .emergency: 2
        }
    }

    static func milliseconds(_ seconds: Double) -> UInt64 {
        // Clamped: a Double outside UInt64's range would trap on conversion.
        guard seconds.isFinite, seconds > 0 else { return 0 }
        return min(UInt64(min(seconds * 1000, Double(maxMilliseconds)).rounded()), maxMilliseconds)
    }

    // MARK: decoding

    public static func decode(_ bytes: [UInt8]) -> Result<Envelope, SignalDecodeError> {
        bytes.withUnsafeBytes { decode($0) }
    }

    /// Decodes one datagram. Never traps, never reads outside `buffer`.
    public static func decode(_ buffer: UnsafeRawBufferPointer) -> Result<Envelope, SignalDecodeError> {
        do {
            return .success(try decodeThrowing(buffer))
        } catch {
            return .failure(error)
        }
    }

    private static func decodeThrowing(_ buffer: UnsafeRawBufferPointer) throws(SignalDecodeError) -> Envelope {
        guard buffer.count >= fixedHeaderLength else { throw .truncatedHeader }
        guard buffer[0] == magic.0, buffer[1] == magic.1 else { throw .badMagic }
        guard buffer[2] == version else { throw .unsupportedVersion }
        let type = buffer[3]
        guard (1...14).contains(type) else { throw .unknownMessageType }
        let flags = EnvelopeFlags(rawValue: buffer[4])
        guard flags.subtracting(.known).isEmpty else { throw .reservedFlags }

        let tagged = flags.contains(.authenticated)
        guard !tagged || buffer.count >= fixedHeaderLength + tagLength else { throw .truncatedBody }
        let end = tagged ? buffer.count - tagLength : buffer.count
        var reader = SignalReader(buffer: buffer, offset: 5, end: end)
        let messageID = try reader.uint32()
        let sender = try reader.room()
        let keyed = flags.contains(.mediaKey)
        guard !keyed || type == 1 || type == 2 else { throw .invalidMediaKey }
        let message = try decodeBody(type: type, sender: sender, keyed: keyed, &reader)
        guard reader.offset == end else { throw .trailingBytes }
        let tag = tagged ? Array(buffer[end...]) : nil
        return Envelope(sender: sender, messageID: messageID, message: message, authenticationTag: tag)
    }

    private static func decodeBody(
        type: UInt8, sender: RoomID, keyed: Bool, _ r: inout SignalReader
    ) throws(SignalDecodeError) -> SignalMessage {
        switch type {
        case 1:
            let call = try r.callID()
            let participants = try r.rooms(excluding: sender)
            let callerMedia = try r.endpoint()
            guard callerMedia.port != 0 else { throw .invalidMediaAddress }
            let voice: VoiceDelivery
            switch try r.uint8() {
            case 0: voice = .unicast
            case 1:
                let group = try r.endpoint()
                guard group.isMulticast, group.port != 0 else { throw .invalidMediaAddress }
                voice = .multicast(group: group)
            default: throw .unknownMediaMode
            }
            let kind: CallKind
            switch try r.uint8() {
            case 0: kind = .normal
            case 1: kind = .emergency
            case 2: kind = .announcement
            default: throw .unknownCallKind
            }
            let key = try r.key(keyed)
            return .invite(call, participants: participants, media: InviteMedia(callerMedia: callerMedia, voice: voice, key: key), kind: kind)
        case 2:
            let call = try r.callID()
            let port = try r.uint16()
            guard port != 0 else { throw .invalidMediaAddress }
            return .accept(call, mediaPort: port, key: try r.key(keyed))
        case 3:
            let call = try r.callID()
            let reason: DeclineReason
            switch try r.uint8() {
            case 1: reason = .doNotDisturb
            case 2: reason = .busy
            case 3: reason = .notPermitted
            case 4: reason = .refused
            default: throw .unknownDeclineReason
            }
            return .decline(call, reason)
        case 4: return .end(try r.callID())
        case 5: return .leave(try r.callID())
        case 6:
            let call = try r.callID()
            let bits = try r.uint8()
            guard bits & ~3 == 0 else { throw .reservedStateBits }
            return .mute(call, MuteState(microphone: bits & 1 != 0, speaker: bits & 2 != 0))
        case 7:
            // Bits: 1 do-not-disturb, 2 an announcement follows, 4 it names a site document.
            let bits = try r.uint8()
            guard bits & ~7 == 0, bits & 6 != 4 else { throw .reservedStateBits }
            let raw = try r.uint64()
            var announcement: SiteAnnouncement?
            if bits & 2 != 0 {
                let software = try r.text(max: SiteAnnouncement.maxSoftwareBytes)
                var site: SiteStamp?, appliedAt: Double?
                if bits & 4 != 0 {
                    guard let stamp = SiteStamp(bytes: Array(try r.bytes(SiteStamp.byteCount))) else { throw .invalidSiteStamp }
                    site = stamp
                    let ms = try r.uint64()
                    guard ms <= maxMilliseconds else { throw .invalidTime }
                    appliedAt = ms == 0 ? nil : Double(ms) / 1000  // 0: held, not yet applied
                }
                announcement = SiteAnnouncement(software: software, site: site, appliedAt: appliedAt)
            }
            return .hello(doNotDisturb: bits & 1 != 0, call: raw == 0 ? nil : CallID(raw), announcement: announcement)
        case 8:
            let call = try r.callID()
            let caller = try r.room()
            let ms = try r.uint64()
            guard ms <= maxMilliseconds else { throw .invalidTime }
            let started = Double(ms) / 1000
            let participants = try r.rooms(excluding: caller)
            return .missedCall(MissedCallNotice(callID: call, caller: caller, participants: participants, started: started))
        case 9:
            return .ack(try r.uint32())
        case 12:
            let raw = try r.uint64()
            guard raw != 0 else { throw .zeroCallID }
            let priority: NotificationPriority
            switch try r.uint8() {
            case 0: priority = .normal
            case 1: priority = .urgent
            case 2: priority = .emergency
            default: throw .unknownPriority
            }
            let bits = try r.uint8()
            guard bits & ~1 == 0 else { throw .reservedStateBits }
            guard let tone = NotificationTone(rawValue: try r.text(max: 32)) else { throw .unknownTone }
            let type = try r.text(max: 32)
            guard NotificationType.isValidID(type) else { throw .invalidText }
            let ms = try r.uint64()
            guard ms <= maxMilliseconds else { throw .invalidTime }
            let recipients = try r.rooms(excluding: sender)
            let label = try r.text(max: StaffNotification.maxLabelBytes)
            let text = try r.text(max: StaffNotification.maxTextBytes)
            return .notify(StaffNotification(id: NotificationID(raw), sender: sender, recipients: recipients, type: type,
                                             label: label, text: text, priority: priority, tone: tone,
                                             readAloud: bits & 1 != 0, sent: Double(ms) / 1000))
        case 13:
            let raw = try r.uint64()
            guard raw != 0 else { throw .zeroCallID }
            return .notificationAcknowledged(NotificationID(raw))
        case 14:
            let audio = try r.uint8(), check = try r.uint8()
            guard let a = TerminalHealth.Audio.allCases.first(where: { healthCode($0) == audio }),
                  let c = TerminalHealth.Check.allCases.first(where: { healthCode($0) == check }) else { throw .reservedStateBits }
            return .health(TerminalHealth(audio: a, xruns: try r.uint32(), selfTest: c, uptimeSeconds: try r.uint32()))
        default:  // 10 and 11: the round-trip probe and its reflection
            let sequence = try r.uint32()
            let micros = try r.uint64()
            return type == 10 ? .probe(sequence: sequence, sentMicros: micros) : .probeReply(sequence: sequence, sentMicros: micros)
        }
    }
}

/// Bounds-checked big-endian reads; every read checks against `end` first.
struct SignalReader {
    let buffer: UnsafeRawBufferPointer
    var offset: Int
    let end: Int

    mutating func bytes(_ count: Int) throws(SignalDecodeError) -> UnsafeRawBufferPointer.SubSequence {
        guard count <= end - offset else { throw .truncatedBody }
        defer { offset += count }
        return buffer[offset..<offset + count]
    }

    mutating func uint8() throws(SignalDecodeError) -> UInt8 { try bytes(1).first! }

    mutating func uint16() throws(SignalDecodeError) -> UInt16 {
        try bytes(2).reduce(0) { $0 << 8 | UInt16($1) }
    }

    mutating func uint32() throws(SignalDecodeError) -> UInt32 {
        try bytes(4).reduce(0) { $0 << 8 | UInt32($1) }
    }

    mutating func uint64() throws(SignalDecodeError) -> UInt64 {
        try bytes(8).reduce(0) { $0 << 8 | UInt64($1) }
    }

    mutating func callID() throws(SignalDecodeError) -> CallID {
        let raw = try uint64()
        guard raw != 0 else { throw .zeroCallID }
        return CallID(raw)
    }

    mutating func endpoint() throws(SignalDecodeError) -> IPv4Endpoint {
        let address = try uint32()
        return IPv4Endpoint(address: address, port: try uint16())
    }

    mutating func room() throws(SignalDecodeError) -> RoomID {
        let length = Int(try uint8())
        let raw = try bytes(length)
        guard let id = RoomID(String(decoding: raw, as: UTF8.self)) else { throw .invalidRoomID }
        return id
    }

    /// UTF-8 text with a 16-bit length, at most `max` bytes, valid UTF-8 without control characters.
    mutating func text(max: Int) throws(SignalDecodeError) -> String {
        let length = Int(try uint16())
        guard length <= max else { throw .invalidText }
        let raw = try bytes(length)
        guard let s = String(validating: raw, as: UTF8.self),
              !s.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else { throw .invalidText }
        return s
    }

    /// An invite's or accept's last field when the envelope's `mediaKey` flag says it has one.
    mutating func key(_ present: Bool) throws(SignalDecodeError) -> MediaKey? {
        guard present else { return nil }
        return MediaKey(bytes: Array(try bytes(MediaKey.length)))
    }

    /// A non-empty list of distinct rooms, at most `maxParticipants`, without `excluded`.
    mutating func rooms(excluding excluded: RoomID) throws(SignalDecodeError) -> [RoomID] {
        let count = Int(try uint8())
        guard (1...SignalCodec.maxParticipants).contains(count) else { throw .invalidParticipants }
        var rooms: [RoomID] = []
        for _ in 0..<count {
            let id = try room()
            guard id != excluded, !rooms.contains(id) else { throw .invalidParticipants }
            rooms.append(id)
        }
        return rooms
    }
}

extension [UInt8] {
    mutating func appendBE<T: FixedWidthInteger>(_ value: T) {
        var big = value.bigEndian
        Swift.withUnsafeBytes(of: &big) { append(contentsOf: $0) }
    }

    mutating func appendRoom(_ room: RoomID) {
        append(UInt8(truncatingIfNeeded: room.value.utf8.count))
        append(contentsOf: room.value.utf8)
    }

    mutating func appendRooms(_ rooms: [RoomID]) {
        append(UInt8(truncatingIfNeeded: rooms.count))
        for room in rooms { appendRoom(room) }
    }

    /// At most `max` bytes, cut at a character boundary (the decoder refuses longer ones).
    mutating func appendText(_ text: String, max: Int) {
        var bytes = Array(text.utf8.prefix(max))
        while !bytes.isEmpty, String(validating: bytes, as: UTF8.self) == nil { bytes.removeLast() }
        appendBE(UInt16(bytes.count))
        append(contentsOf: bytes)
    }

    /// Its bytes when there is one (the envelope's `mediaKey` flag says so).
    mutating func appendKey(_ key: MediaKey?) {
        if let key { append(contentsOf: key.bytes) }
    }

    mutating func appendEndpoint(_ endpoint: IPv4Endpoint) {
        appendBE(endpoint.address)
        appendBE(endpoint.port)
    }
}
