// The vocabulary of calls, shared by the call engine, the signalling protocol, the history and
// the control socket. Plain values: no I/O, no clocks, no threads.

/// A room's identifier from the configuration's directory, e.g. "empfang" (lower-case ASCII
/// letters, digits, '-' and '_', 1-32 characters; checked by `init?`).
public struct RoomID: Hashable, Comparable, Sendable, Codable, CustomStringConvertible {
    public let value: String

    public init?(_ value: String) {
        guard (1...32).contains(value.utf8.count),
              value.utf8.allSatisfy({ ($0 >= 97 && $0 <= 122) || ($0 >= 48 && $0 <= 57) || $0 == 45 || $0 == 95 })
        else { return nil }
        self.value = value
    }

    public var description: String { value }
    public static func < (a: RoomID, b: RoomID) -> Bool { a.value < b.value }

    public init(from decoder: Decoder) throws {
        let s = try decoder.singleValueContainer().decode(String.self)
        guard let id = RoomID(s) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "invalid room id \(s)"))
        }
        self = id
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(value)
    }
}

/// Identifies one call across all rooms: chosen at random by the caller.
public struct CallID: Hashable, Sendable, HexIdentifier {
    public let value: UInt64
    public init(_ value: UInt64) { self.value = value }
    public static func random() -> CallID { CallID(UInt64.random(in: 1 ... .max)) }
}

/// Why a callee did not take a call.
public enum DeclineReason: String, Sendable, Codable, CaseIterable {
    case doNotDisturb = "do_not_disturb"
    case busy
    case notPermitted = "not_permitted"
    /// Someone at the called terminal refused it (`decline`).
    case refused
}

/// A callee's state as the caller sees it.
public enum ParticipantStatus: Sendable, Equatable {
    /// Invited, the chime plays there; audio opens after the ring time.
    case ringing
    case connected
    case declined(DeclineReason)
    /// Offline or no answer in time.
    case unavailable
    /// Hung up (a callee leaving a group call).
    case left
}

/// One room's presence as seen by this one.
public struct Presence: Sendable, Equatable, Codable {
    public var online: Bool
    public var doNotDisturb: Bool
    public var inCall: Bool
    private enum CodingKeys: String, CodingKey { case online, doNotDisturb = "dnd", inCall }
    public init(online: Bool, doNotDisturb: Bool = false, inCall: Bool = false) {
        self.online = online
        self.doNotDisturb = doNotDisturb
        self.inCall = inCall
    }
}

/// Microphone and speaker mute of one room.
public struct MuteState: Sendable, Equatable, Codable {
    public var microphone: Bool
    public var speaker: Bool
    public init(microphone: Bool = false, speaker: Bool = false) {
        self.microphone = microphone
        self.speaker = speaker
    }
}

/// What a call is. A normal call rings (or is refused) as the callee's state says. An emergency
/// call is answered at once everywhere, through do-not-disturb and an ongoing normal call, with
/// its own tone. An announcement (paging) is one-way: the callees hear the caller after the chime
/// and their microphones stay closed.
public enum CallKind: String, Sendable, Codable, CaseIterable {
    case normal = "call"
    case emergency
    case announcement
}

/// A configured call button: the rooms it calls and what kind of call it places.
public struct CallButton: Sendable, Equatable {
    public var rooms: [RoomID]
    public var kind: CallKind
    public init(rooms: [RoomID], kind: CallKind = .normal) {
        self.rooms = rooms
        self.kind = kind
    }
}

/// What the people at this terminal (keys, control socket) ask for.
public enum CallCommand: Sendable, Hashable {
    /// Call the targets of a configured button (one room or several).
    case call(button: String)
    /// Call rooms directly (control socket; still subject to permissions).
    case callRooms([RoomID], kind: CallKind = .normal)
    /// Caller: end the whole call. Callee: leave it (a 1:1 call then ends for both).
    case hangUp
    case setMicrophoneMuted(Bool)
    case setSpeakerMuted(Bool)
    case toggleMicrophoneMute
    case toggleSpeakerMute
    case setDoNotDisturb(Bool)
    case toggleDoNotDisturb
    /// Open a ringing incoming call now (needed when auto-answer is off; with it on, it skips
    /// the rest of the ring time).
    case answer
    /// Refuse a ringing incoming call: the caller is told `declined (refused)`.
    case decline
    /// Call the other side of the newest call in the history again: its caller if it came in
    /// (taken, missed or refused), the rooms it went to if it went out.
    case callBack
    /// Call the room of the oldest unacknowledged missed call (and acknowledge it once connected).
    case callMissed
    /// Acknowledge the oldest notification heard and not yet acknowledged, or all of them; with
    /// none waiting, the oldest missed call (or all). One key for "I have seen to it".
    case acknowledge(all: Bool)
    /// Send the configured notification type with this id.
    case notify(type: String)
    /// Reading notifications aloud here (their tones sound either way).
    case setReadAloud(Bool)
    case toggleReadAloud
}

/// How a call ended or did not happen, for the history.
public enum CallOutcome: String, Sendable, Codable, CaseIterable {
    /// Talked; ended normally.
    case finished
    /// Incoming call this room could not take or did not hear (offline, no answer).
    case missed
    /// Incoming call refused (do-not-disturb, busy, not permitted).
    case declined
    /// Outgoing call nobody took (every callee declined or unavailable).
    case notReached = "not_reached"
}

/// A room invited to a call and its status.
public struct Participant: Sendable, Equatable, Codable {
    public var room: RoomID
    public var status: ParticipantStatus
    public init(room: RoomID, status: ParticipantStatus) {
        self.room = room
        self.status = status
    }

    /// `{"room": "kueche", "status": "declined", "reason": "do_not_disturb"}`.
    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: ParticipantStatus.Keys.self)
        self.init(room: try c.decode(RoomID.self, forKey: .room), status: try ParticipantStatus(from: c))
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: ParticipantStatus.Keys.self)
        try c.encode(room, forKey: .room)
        try status.encode(to: &c)
    }
}

extension ParticipantStatus {
    /// On the wire a status is two members of the object that names its room: `status`, and
    /// `reason` for declined.
    public enum Keys: String, CodingKey { case room, status, reason }

    public init(from c: KeyedDecodingContainer<Keys>) throws {
        switch try c.decode(String.self, forKey: .status) {
        case "ringing": self = .ringing
        case "connected": self = .connected
        case "unavailable": self = .unavailable
        case "left": self = .left
        case "declined": self = .declined(try c.decode(DeclineReason.self, forKey: .reason))
        case let other:
            throw DecodingError.dataCorruptedError(forKey: .status, in: c, debugDescription: "unknown participant status \"\(other.prefix(40))\"")
        }
    }

    public func encode(to c: inout KeyedEncodingContainer<Keys>) throws {
        switch self {
        case .ringing: try c.encode("ringing", forKey: .status)
        case .connected: try c.encode("connected", forKey: .status)
        case .unavailable: try c.encode("unavailable", forKey: .status)
        case .left: try c.encode("left", forKey: .status)
        case .declined(let reason):
            try c.encode("declined", forKey: .status)
            try c.encode(reason, forKey: .reason)
        }
    }
}

/// One line of the call history, kept across restarts.
public struct HistoryEntry: Sendable, Equatable, Codable {
    public enum Direction: String, Sendable, Codable, CaseIterable { case incoming, outgoing }
    public var callID: CallID
    public var direction: Direction
    /// The caller (for incoming calls) or this room (outgoing).
    public var caller: RoomID
    /// Everyone invited, with their final status as this room knows it.
    public var participants: [Participant]
    public var outcome: CallOutcome
    /// Decline reason, when `outcome` is `.declined`.
    public var reason: DeclineReason?
    /// Seconds since 1970 (UTC): when the call was placed, and when it ended here.
    public var started: Double
    public var ended: Double
    /// Missed calls only: false until someone here acknowledged it (nil: not a missed call, or
    /// written before missed calls could be acknowledged: counts as acknowledged).
    public var acknowledged: Bool?
    /// An emergency call or an announcement; nil for a normal call (and in older files).
    public var kind: CallKind?

    public var callKind: CallKind { kind ?? .normal }

    private enum CodingKeys: String, CodingKey {
        case callID = "callId", direction, caller, participants, outcome, reason, started, ended, acknowledged, kind
    }

    public init(callID: CallID, direction: Direction, caller: RoomID, participants: [Participant],
                outcome: CallOutcome, reason: DeclineReason? = nil, started: Double, ended: Double,
                acknowledged: Bool? = nil, kind: CallKind = .normal) {
        self.acknowledged = acknowledged
        self.kind = kind == .normal ? nil : kind
        self.callID = callID
        self.direction = direction
        self.caller = caller
        self.participants = participants
        self.outcome = outcome
        self.reason = reason
        self.started = started
        self.ended = ended
    }
}

/// What happened, for the control socket's subscribers (and the log).
public enum CallEvent: Sendable, Equatable {
    /// Another room calls this one; the chime plays; audio opens after the ring time.
    case incomingCall(CallID, from: RoomID, participants: [RoomID], kind: CallKind = .normal)
    /// Our outgoing call was placed.
    case outgoingCall(CallID, to: [RoomID], kind: CallKind = .normal)
    case participantStatus(CallID, room: RoomID, status: ParticipantStatus)
    /// Audio flows (this room's side of the call is open).
    case connected(CallID)
    case callEnded(CallID, outcome: CallOutcome)
    case muteChanged(room: RoomID, MuteState)
    case presenceChanged(room: RoomID, Presence)
    case doNotDisturbChanged(Bool)
    case historyAdded(HistoryEntry)
    /// Missed calls someone here acknowledged (by key, command or by calling back).
    case missedAcknowledged([CallID])
    /// The history was erased (technician's command).
    case historyErased
    /// A notification arrived here (heard now, or held back: `record.held`).
    case notificationReceived(NotificationRecord)
    /// A held-back notification is heard now (do-not-disturb or the call ended).
    case notificationReleased(NotificationID)
    /// Our notification: `room` has it.
    case notificationDelivered(NotificationID, room: RoomID)
    /// Our notification's first delivery round is over: who has it, who gets it when back online.
    case notificationSent(NotificationID, delivered: [RoomID], waiting: [RoomID])
    /// Someone at `room` acknowledged the notification (ours, or one here: `room` is this room).
    case notificationAcknowledged(NotificationID, by: RoomID)
    /// A notification nobody acknowledged yet was reminded (tone, and read again).
    case notificationReminded(NotificationID)
    case readAloudChanged(Bool)
}

extension HistoryEntry {
    /// A missed call nobody here has acknowledged yet.
    public var awaitsAcknowledgement: Bool { outcome == .missed && direction == .incoming && acknowledged == false }

    /// The rooms on the other side: the caller of an incoming call, the callees of an outgoing one.
    public func otherSide(me: RoomID) -> [RoomID] {
        direction == .incoming ? [caller] : participants.map(\.room).filter { $0 != me }
    }
}
