// One case per rejection reason, so that the caller keeps one counter per reason (`allCases`).

/// Why `SignalCodec.decode` rejected a datagram.
public enum SignalDecodeError: Error, CaseIterable, Hashable, Sendable, CustomStringConvertible {
    /// Shorter than the fixed envelope header.
    case truncatedHeader
    /// Not our magic: some other protocol on this port.
    case badMagic
    case unsupportedVersion
    case unknownMessageType
    /// A flag bit this version does not define is set.
    case reservedFlags
    /// A room id is empty, longer than 32 bytes or has a character RoomID forbids.
    case invalidRoomID
    /// A field or the authentication tag runs past the end of the datagram.
    case truncatedBody
    /// Bytes are left after the message (and tag).
    case trailingBytes
    /// Call id 0 is reserved for "no call".
    case zeroCallID
    /// A participant list is empty, too long, names a room twice, or names the sender.
    case invalidParticipants
    case unknownMediaMode
    /// An invite's call kind this version does not define.
    case unknownCallKind
    /// Port 0, or a multicast mode whose group is not a multicast address.
    case invalidMediaAddress
    case unknownDeclineReason
    /// A state byte (mute, hello, health) has bits or a value this version does not define.
    case reservedStateBits
    /// A time beyond `SignalCodec.maxMilliseconds`.
    case invalidTime
    /// A notification's priority this version does not define.
    case unknownPriority
    /// A notification's tone this version does not define (like the priority: one encoding per message).
    case unknownTone
    /// A notification's text is too long, not UTF-8, has control characters, or names an invalid type.
    case invalidText
    /// A hello's site stamp names version 0 (there is none: the bit says whether one follows).
    case invalidSiteStamp
    /// The media key flag on a message other than an invite or accept.
    case invalidMediaKey

    public var description: String {
        switch self {
        case .truncatedHeader: "shorter than the envelope header"
        case .badMagic: "bad magic"
        case .unsupportedVersion: "unsupported version"
        case .unknownMessageType: "unknown message type"
        case .reservedFlags: "reserved flag bits set"
        case .invalidRoomID: "invalid room id"
        case .truncatedBody: "message runs past the end"
        case .trailingBytes: "trailing bytes after the message"
        case .zeroCallID: "call id 0"
        case .invalidParticipants: "invalid participant list"
        case .unknownMediaMode: "unknown media mode"
        case .unknownCallKind: "unknown call kind"
        case .invalidMediaAddress: "invalid media address"
        case .unknownDeclineReason: "unknown decline reason"
        case .reservedStateBits: "reserved state bits set"
        case .invalidTime: "time out of range"
        case .unknownPriority: "unknown notification priority"
        case .unknownTone: "unknown notification tone"
        case .invalidText: "invalid notification text"
        case .invalidSiteStamp: "site stamp of version 0"
        case .invalidMediaKey: "a media key on a message that carries none"
        }
    }
}
