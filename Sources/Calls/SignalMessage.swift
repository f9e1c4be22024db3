import Posix
// The messages daemons exchange to set up and tear down calls (docs/calls.md has the byte layout).

/// How the caller's voice reaches the callees.
public enum VoiceDelivery: Hashable, Sendable, Codable {
    /// One RTP stream to each connected callee.
    case unicast
    /// One RTP stream to this group; every callee joins it.
    case multicast(group: IPv4Endpoint)
}

/// What an invite tells a callee about media.
public struct InviteMedia: Hashable, Sendable {
    /// Where the callee sends its microphone (the caller's media socket).
    public var callerMedia: IPv4Endpoint
    /// How the caller's voice arrives.
    public var voice: VoiceDelivery
    /// The key of the caller's stream in this call, when keys are agreed in signalling (`MediaKey`).
    public var key: MediaKey?

    public init(callerMedia: IPv4Endpoint, voice: VoiceDelivery, key: MediaKey? = nil) {
        self.callerMedia = callerMedia
        self.voice = voice
        self.key = key
    }
}

/// A missed call that the caller keeps and delivers once the callee is online again.
public struct MissedCallNotice: Hashable, Sendable {
    public var callID: CallID
    public var caller: RoomID
    public var participants: [RoomID]
    /// When the call was placed, seconds since 1970 (carried with millisecond resolution).
    public var started: Double

    public init(callID: CallID, caller: RoomID, participants: [RoomID], started: Double) {
        self.callID = callID
        self.caller = caller
        self.participants = participants
        self.started = started
    }
}

/// One signalling message. The sender is in the envelope: for `invite` it is the caller.
public enum SignalMessage: Equatable, Sendable {
    case invite(CallID, participants: [RoomID], media: InviteMedia, kind: CallKind)
    /// The callee's audio opens; the caller sends to the callee's host at this port. `key`: the
    /// callee's stream's, when keys are agreed in signalling (`MediaKey`).
    case accept(CallID, mediaPort: UInt16, key: MediaKey? = nil)
    case decline(CallID, DeclineReason)
    /// From the caller: the whole call is over.
    case end(CallID)
    /// From a callee: only this callee leaves.
    case leave(CallID)
    case mute(CallID, MuteState)
    /// Presence, every `helloInterval`; `call` is the call the sender takes part in, if any. The
    /// directory-wide hello carries the sender's `announcement`; a call's keepalive does not.
    case hello(doNotDisturb: Bool, call: CallID?, announcement: SiteAnnouncement? = nil)
    case missedCall(MissedCallNotice)
    /// Acknowledges the sender's message with this id.
    case ack(UInt32)
    /// The network round-trip test: the receiver reflects it at once as `probeReply` with the same
    /// fields (the sender's sequence number and its clock, microseconds), unacknowledged.
    case probe(sequence: UInt32, sentMicros: UInt64)
    case probeReply(sequence: UInt32, sentMicros: UInt64)
    /// A practice notification for the receiver (its sender is the envelope's).
    case notify(StaffNotification)
    /// Someone at the sending room acknowledged this notification of the receiver's.
    case notificationAcknowledged(NotificationID)
    /// How the sender is doing, to every room online every `healthInterval` (never acknowledged).
    case health(TerminalHealth)

    /// The type byte on the wire.
    public var typeCode: UInt8 {
        switch self {
        case .invite: 1
        case .accept: 2
        case .decline: 3
        case .end: 4
        case .leave: 5
        case .mute: 6
        case .hello: 7
        case .missedCall: 8
        case .ack: 9
        case .probe: 10
        case .probeReply: 11
        case .notify: 12
        case .notificationAcknowledged: 13
        case .health: 14
        }
    }

    /// Hello and ack are never acknowledged (hello repeats anyway; acking an ack would never end),
    /// nor are probes (a lost one is what the test measures).
    public var needsAck: Bool {
        switch self {
        case .hello, .ack, .probe, .probeReply, .health: false
        default: true
        }
    }

    /// What the receiver keeps on disk when it arrives (a notification, a missed-call notice): its
    /// ack waits for the write, so a power cut before it makes the sender try again and nothing is
    /// lost (docs/calls.md).
    public var keptOnReceipt: Bool {
        switch self {
        case .notify, .missedCall: true
        default: false
        }
    }

    /// The call a message is about, when it is about one.
    public var callID: CallID? {
        switch self {
        case .invite(let id, _, _, _), .accept(let id, _, _), .decline(let id, _), .end(let id), .leave(let id),
             .mute(let id, _): id
        case .missedCall(let notice): notice.callID
        case .hello(_, let call, _): call
        case .ack, .probe, .probeReply, .notify, .notificationAcknowledged, .health: nil
        }
    }
}

/// Envelope flag bits.
public struct EnvelopeFlags: OptionSet, Hashable, Sendable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    /// An authentication tag of `SignalCodec.tagLength` bytes ends the datagram: decoded and
    /// carried, verified by nobody and set by no sender. Authentication is the seal around the
    /// whole envelope (SiteSecurity's `SignalSeal`); the bit is kept only so the format stays one.
    public static let authenticated = EnvelopeFlags(rawValue: 1)
    /// An invite or accept that ends with its sender's stream's media key (`MediaKey`): set
    /// exactly when it carries one; a datagram without it reads as before keys were agreed.
    public static let mediaKey = EnvelopeFlags(rawValue: 2)
    public static let known: EnvelopeFlags = [.authenticated, .mediaKey]
}

/// One datagram: who sent it, its per-sender id, and the message.
public struct Envelope: Equatable, Sendable {
    public var sender: RoomID
    /// Counts up per sender from a random start (so a restarted sender does not collide with
    /// its old ids in a receiver's dedupe window).
    public var messageID: UInt32
    public var message: SignalMessage
    /// Present exactly when the `authenticated` flag is set.
    public var authenticationTag: [UInt8]?

    public init(sender: RoomID, messageID: UInt32, message: SignalMessage, authenticationTag: [UInt8]? = nil) {
        self.sender = sender
        self.messageID = messageID
        self.message = message
        self.authenticationTag = authenticationTag
    }

    public var flags: EnvelopeFlags {
        var flags: EnvelopeFlags = authenticationTag == nil ? [] : .authenticated
        switch message {
        case .invite(_, _, let media, _) where media.key != nil: flags.insert(.mediaKey)
        case .accept(_, _, let key?): flags.insert(.mediaKey)
        default: break
        }
        return flags
    }
}
