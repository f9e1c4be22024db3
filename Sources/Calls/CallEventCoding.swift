// A call event on the wire: one object whose `event` names the case, its values beside it
// (docs/control.md, "Events"). The control socket's subscribers and the site service's event
// streams read this one form.

extension CallEvent: Codable {
    /// The `event` member of each case, in the order of the enum.
    public var name: String {
        switch self {
        case .incomingCall: "incoming_call"
        case .outgoingCall: "outgoing_call"
        case .participantStatus: "participant_status"
        case .connected: "connected"
        case .callEnded: "call_ended"
        case .muteChanged: "mute_changed"
        case .presenceChanged: "presence_changed"
        case .doNotDisturbChanged: "dnd_changed"
        case .historyAdded: "history_added"
        case .missedAcknowledged: "missed_acknowledged"
        case .historyErased: "history_erased"
        case .notificationReceived: "notification_received"
        case .notificationReleased: "notification_released"
        case .notificationDelivered: "notification_delivered"
        case .notificationSent: "notification_sent"
        case .notificationAcknowledged: "notification_acknowledged"
        case .notificationReminded: "notification_reminded"
        case .readAloudChanged: "read_aloud_changed"
        }
    }

    enum Keys: String, CodingKey {
        case event, callId, from, to, participants, kind, room, outcome, dnd, entry, callIds, notification, notificationId
        case delivered, waiting, by, readAloud
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: Keys.self)
        try c.encode(name, forKey: .event)
        switch self {
        case .incomingCall(let id, let from, let participants, let kind):
            try c.encode(id, forKey: .callId)
            try c.encode(from, forKey: .from)
            try c.encode(participants, forKey: .participants)
            try c.encode(kind, forKey: .kind)
        case .outgoingCall(let id, let to, let kind):
            try c.encode(id, forKey: .callId)
            try c.encode(to, forKey: .to)
            try c.encode(kind, forKey: .kind)
        case .participantStatus(let id, let room, let status):
            try c.encode(id, forKey: .callId)
            var p = encoder.container(keyedBy: ParticipantStatus.Keys.self)
            try p.encode(room, forKey: .room)
            try status.encode(to: &p)
        case .connected(let id):
            try c.encode(id, forKey: .callId)
        case .callEnded(let id, let outcome):
            try c.encode(id, forKey: .callId)
            try c.encode(outcome, forKey: .outcome)
        case .muteChanged(let room, let mute):
            try c.encode(room, forKey: .room)
            try mute.encode(to: encoder)
        case .presenceChanged(let room, let presence):
            try c.encode(room, forKey: .room)
            try presence.encode(to: encoder)
        case .doNotDisturbChanged(let on):
            try c.encode(on, forKey: .dnd)
        case .historyAdded(let entry):
            try c.encode(entry, forKey: .entry)
        case .missedAcknowledged(let ids):
            try c.encode(ids, forKey: .callIds)
        case .historyErased:
            break
        case .notificationReceived(let record):
            try c.encode(record, forKey: .notification)
        case .notificationReleased(let id), .notificationReminded(let id):
            try c.encode(id, forKey: .notificationId)
        case .notificationDelivered(let id, let room):
            try c.encode(id, forKey: .notificationId)
            try c.encode(room, forKey: .room)
        case .notificationSent(let id, let delivered, let waiting):
            try c.encode(id, forKey: .notificationId)
            try c.encode(delivered, forKey: .delivered)
            try c.encode(waiting, forKey: .waiting)
        case .notificationAcknowledged(let id, let by):
            try c.encode(id, forKey: .notificationId)
            try c.encode(by, forKey: .by)
        case .readAloudChanged(let on):
            try c.encode(on, forKey: .readAloud)
        }
    }

    /// Throws `CallEvent.Unknown` for an event this version does not know (a newer daemon's).
    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: Keys.self)
        let name = try c.decode(String.self, forKey: .event)
        // Absent: a normal call (daemons older than call kinds).
        func kind() throws -> CallKind { try c.decodeIfPresent(CallKind.self, forKey: .kind) ?? .normal }
        switch name {
        case "incoming_call":
            self = .incomingCall(try c.decode(CallID.self, forKey: .callId), from: try c.decode(RoomID.self, forKey: .from),
                                 participants: try c.decode([RoomID].self, forKey: .participants), kind: try kind())
        case "outgoing_call":
            self = .outgoingCall(try c.decode(CallID.self, forKey: .callId), to: try c.decode([RoomID].self, forKey: .to), kind: try kind())
        case "participant_status":
            let p = try decoder.container(keyedBy: ParticipantStatus.Keys.self)
            self = .participantStatus(try c.decode(CallID.self, forKey: .callId), room: try p.decode(RoomID.self, forKey: .room),
                                      status: try ParticipantStatus(from: p))
        case "connected":
            self = .connected(try c.decode(CallID.self, forKey: .callId))
        case "call_ended":
            self = .callEnded(try c.decode(CallID.self, forKey: .callId), outcome: try c.decode(CallOutcome.self, forKey: .outcome))
        case "mute_changed":
            self = .muteChanged(room: try c.decode(RoomID.self, forKey: .room), try MuteState(from: decoder))
        case "presence_changed":
            self = .presenceChanged(room: try c.decode(RoomID.self, forKey: .room), try Presence(from: decoder))
        case "dnd_changed":
            self = .doNotDisturbChanged(try c.decode(Bool.self, forKey: .dnd))
        case "history_added":
            self = .historyAdded(try c.decode(HistoryEntry.self, forKey: .entry))
        case "missed_acknowledged":
            self = .missedAcknowledged(try c.decode([CallID].self, forKey: .callIds))
        case "history_erased":
            self = .historyErased
        case "notification_received":
            self = .notificationReceived(try c.decode(NotificationRecord.self, forKey: .notification))
        case "notification_released":
            self = .notificationReleased(try c.decode(NotificationID.self, forKey: .notificationId))
        case "notification_delivered":
            self = .notificationDelivered(try c.decode(NotificationID.self, forKey: .notificationId), room: try c.decode(RoomID.self, forKey: .room))
        case "notification_sent":
            self = .notificationSent(try c.decode(NotificationID.self, forKey: .notificationId),
                                     delivered: try c.decode([RoomID].self, forKey: .delivered),
                                     waiting: try c.decode([RoomID].self, forKey: .waiting))
        case "notification_acknowledged":
            self = .notificationAcknowledged(try c.decode(NotificationID.self, forKey: .notificationId), by: try c.decode(RoomID.self, forKey: .by))
        case "notification_reminded":
            self = .notificationReminded(try c.decode(NotificationID.self, forKey: .notificationId))
        case "read_aloud_changed":
            self = .readAloudChanged(try c.decode(Bool.self, forKey: .readAloud))
        default:
            throw Unknown(name: String(name.prefix(64)))
        }
    }

    /// An event name this version does not know.
    public struct Unknown: Error, Sendable, CustomStringConvertible {
        public let name: String
        public var description: String { "unknown event \"\(name)\"" }
    }
}
