import Calls

/// The history file as versions before 0.10 wrote it (format 1: Swift's synthesized spelling),
/// read once and written again as format 2. Only decoding; nothing writes this any more.
struct HistoryFormat1: Decodable {
    var entries: [Entry]
    var notifications: [Record]?

    struct ID: Decodable { var value: UInt64 }

    struct Entry: Decodable {
        var callID: ID
        var direction: HistoryEntry.Direction
        var caller: RoomID
        var participants: [Participant1]
        var outcome: CallOutcome
        var reason: DeclineReason?
        var started: Double
        var ended: Double
        var acknowledged: Bool?
        var kind: CallKind?

        var entry: HistoryEntry {
            HistoryEntry(callID: CallID(callID.value), direction: direction, caller: caller,
                         participants: participants.map { Participant(room: $0.room, status: $0.status.status) }, outcome: outcome,
                         reason: reason, started: started, ended: ended, acknowledged: acknowledged, kind: kind ?? .normal)
        }
    }

    struct Participant1: Decodable {
        var room: RoomID
        var status: Status
    }

    /// `{"ringing": {}}`, `{"declined": {"_0": "busy"}}`.
    struct Status: Decodable {
        var status: ParticipantStatus
        private struct Reason: Decodable { var _0: DeclineReason }
        private enum Keys: String, CodingKey { case ringing, connected, declined, unavailable, left }

        init(from decoder: Decoder) throws {
            let c = try decoder.container(keyedBy: Keys.self)
            if let reason = try c.decodeIfPresent(Reason.self, forKey: .declined) { status = .declined(reason._0) }
            else if c.contains(.ringing) { status = .ringing }
            else if c.contains(.connected) { status = .connected }
            else if c.contains(.left) { status = .left }
            else if c.contains(.unavailable) { status = .unavailable }
            else { throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not a participant status")) }
        }
    }

    struct Notification: Decodable {
        var id: ID
        var sender: RoomID
        var recipients: [RoomID]
        var type: String
        var label: String
        var text: String
        var priority: NotificationPriority
        var tone: NotificationTone
        var readAloud: Bool
        var sent: Double
    }

    struct Record: Decodable {
        var notification: Notification
        var direction: HistoryEntry.Direction
        var delivered: [RoomID]
        var acknowledgedBy: [RoomID]
        var received: Double?
        var heard: Double?
        var held: Bool
        var acknowledged: Bool

        var record: NotificationRecord {
            let n = notification
            return NotificationRecord(
                notification: StaffNotification(id: NotificationID(n.id.value), sender: n.sender, recipients: n.recipients, type: n.type,
                                                label: n.label, text: n.text, priority: n.priority, tone: n.tone,
                                                readAloud: n.readAloud, sent: n.sent),
                direction: direction, delivered: delivered, acknowledgedBy: acknowledgedBy, received: received, heard: heard,
                held: held, acknowledged: acknowledged)
        }
    }
}
