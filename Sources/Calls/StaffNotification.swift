// Practice-call notifications ("Nächster Patient", "Material bringen", "Alarm"): what an
// administrator configures, what travels between rooms, and what the history keeps.

/// Identifies one sent notification across all rooms: chosen at random by the sender.
public struct NotificationID: Hashable, Sendable, HexIdentifier {
    public let value: UInt64
    public init(_ value: UInt64) { self.value = value }
}

/// How far a notification breaks into what the room is doing.
public enum NotificationPriority: String, Sendable, Codable, CaseIterable, Comparable {
    /// Waits for the end of a call (a soft tone says it came) and for do-not-disturb to end.
    case normal
    /// Spoken over a call (the call ducked); passes do-not-disturb.
    case urgent
    /// Mutes the call until it has been heard; passes do-not-disturb.
    case emergency

    public static func < (a: Self, b: Self) -> Bool { allCases.firstIndex(of: a)! < allCases.firstIndex(of: b)! }

    /// The tone a type of this priority gets when its configuration names none.
    public var defaultTone: NotificationTone {
        switch self {
        case .normal: .gong
        case .urgent: .alert
        case .emergency: .alarm
        }
    }
}

/// The tone before a notification is read (the raw value is the configuration's name; `[tones]`
/// may replace each with a WAV file like a cue).
public enum NotificationTone: String, Sendable, Codable, CaseIterable {
    case gong
    case bell
    case alert
    case alarm
    /// The reminder of a notification nobody acknowledged yet.
    case reminder
    /// The sender's: a recipient acknowledged (followed by the room's name).
    case acknowledged = "acknowledged_by"

    /// The tones a configured type may choose.
    public static let selectable: [NotificationTone] = [.gong, .bell, .alert, .alarm]

    /// The generated tone: its notes are at least 60 Hz from every cue's and every other
    /// notification tone's, so a recording tells them apart.
    public var notes: [Note] {
        switch self {
        case .gong: [Note(1920, 220), Note(0, 40), Note(1620, 380)]
        case .bell: [Note(2780, 150), Note(0, 50), Note(2780, 150), Note(0, 50), Note(2780, 150)]
        case .alert: [Note(2180, 120), Note(2540, 120), Note(2180, 120), Note(2540, 120)]
        case .alarm: [Note(2900, 180), Note(2240, 180), Note(2900, 180), Note(2240, 180)]
        case .reminder: [Note(1780, 110), Note(0, 60), Note(1780, 110)]
        case .acknowledged: [Note(2360, 90), Note(2720, 160)]
        }
    }
}

/// One configured notification type (`[notifications.<id>]`).
public struct NotificationType: Sendable, Equatable {
    /// The configuration's key, e.g. "naechster_patient".
    public var id: String
    /// For people (history, intercomctl): "Nächster Patient".
    public var label: String
    /// The rooms it goes to (named groups already resolved).
    public var recipients: [RoomID]
    /// What is read aloud ("" = the label).
    public var text: String
    public var tone: NotificationTone
    public var priority: NotificationPriority
    public var readAloud: Bool

    public init(id: String, label: String, recipients: [RoomID], text: String = "", tone: NotificationTone? = nil,
                priority: NotificationPriority = .normal, readAloud: Bool = true) {
        self.id = id
        self.label = label
        self.recipients = recipients
        self.text = text
        self.tone = tone ?? priority.defaultTone
        self.priority = priority
        self.readAloud = readAloud
    }

    /// What is spoken.
    public var spokenText: String { text.isEmpty ? label : text }

    /// This type as it travels from `sender` to `recipients` (nil: all of its own).
    public func notification(id: NotificationID, from sender: RoomID, to recipients: [RoomID]? = nil, sent: Double) -> StaffNotification {
        StaffNotification(id: id, sender: sender, recipients: recipients ?? self.recipients, type: self.id, label: label, text: text,
                          priority: priority, tone: tone, readAloud: readAloud, sent: sent)
    }

    /// Type ids follow room ids' rules (lower-case ASCII letters, digits, '-' and '_', 1-32).
    public static func isValidID(_ s: String) -> Bool { RoomID(s) != nil }
}

/// One notification as it travels: the sender's configured type, copied, so a recipient with an
/// older configuration still plays what was meant.
public struct StaffNotification: Sendable, Equatable, Codable {
    public var id: NotificationID
    public var sender: RoomID
    public var recipients: [RoomID]
    public var type: String
    public var label: String
    public var text: String
    public var priority: NotificationPriority
    public var tone: NotificationTone
    public var readAloud: Bool
    /// When it was sent, seconds since 1970 on the sender's clock.
    public var sent: Double

    /// Longest label and text on the wire, UTF-8 bytes.
    public static let maxLabelBytes = 120
    public static let maxTextBytes = 400

    public init(id: NotificationID, sender: RoomID, recipients: [RoomID], type: String, label: String, text: String,
                priority: NotificationPriority, tone: NotificationTone, readAloud: Bool, sent: Double) {
        self.id = id
        self.sender = sender
        self.recipients = recipients
        self.type = type
        self.label = label
        self.text = text
        self.priority = priority
        self.tone = tone
        self.readAloud = readAloud
        self.sent = sent
    }

    public var spokenText: String { text.isEmpty ? label : text }

    private enum CodingKeys: String, CodingKey {
        case id = "notificationId", sender, recipients, type, label, text, priority, tone, readAloud, sent
    }
}

/// A notification in this room's history: sent (with who has it and who acknowledged it) or
/// received (held back, or heard and waiting to be acknowledged).
public struct NotificationRecord: Sendable, Equatable, Codable {
    public var notification: StaffNotification
    public var direction: HistoryEntry.Direction
    /// Outgoing: the recipients that have it (acknowledged by their terminal), in arrival order.
    public var delivered: [RoomID]
    /// Outgoing: the recipients where someone acknowledged it.
    public var acknowledgedBy: [RoomID]
    /// Incoming: when it arrived here, seconds since 1970.
    public var received: Double?
    /// Incoming: when it was first heard here (arrival, or the end of what held it back).
    public var heard: Double?
    /// Incoming: kept back (do-not-disturb, or a normal one during a call), not heard yet.
    public var held: Bool
    /// Incoming: someone here acknowledged it.
    public var acknowledged: Bool

    public init(notification: StaffNotification, direction: HistoryEntry.Direction, delivered: [RoomID] = [],
                acknowledgedBy: [RoomID] = [], received: Double? = nil, heard: Double? = nil, held: Bool = false,
                acknowledged: Bool = false) {
        self.heard = heard
        self.notification = notification
        self.direction = direction
        self.delivered = delivered
        self.acknowledgedBy = acknowledgedBy
        self.received = received
        self.held = held
        self.acknowledged = acknowledged
    }

    public var id: NotificationID { notification.id }

    /// On the wire one object: the notification's members and the record's.
    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(notification: try StaffNotification(from: decoder), direction: try c.decode(HistoryEntry.Direction.self, forKey: .direction),
                  delivered: try c.decode([RoomID].self, forKey: .delivered),
                  acknowledgedBy: try c.decode([RoomID].self, forKey: .acknowledgedBy),
                  received: try c.decodeIfPresent(Double.self, forKey: .received), heard: try c.decodeIfPresent(Double.self, forKey: .heard),
                  held: try c.decode(Bool.self, forKey: .held), acknowledged: try c.decode(Bool.self, forKey: .acknowledged))
    }

    public func encode(to encoder: Encoder) throws {
        try notification.encode(to: encoder)
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(direction, forKey: .direction)
        try c.encode(delivered, forKey: .delivered)
        try c.encode(acknowledgedBy, forKey: .acknowledgedBy)
        try c.encodeIfPresent(received, forKey: .received)
        try c.encodeIfPresent(heard, forKey: .heard)
        try c.encode(held, forKey: .held)
        try c.encode(acknowledged, forKey: .acknowledged)
    }

    private enum CodingKeys: String, CodingKey { case direction, delivered, acknowledgedBy, received, heard, held, acknowledged }

    /// When it happened here: received (incoming) or sent (outgoing).
    public var time: Double { received ?? notification.sent }
}

/// How loud an announcement may be against what the room is doing.
public enum AnnouncementLevel: String, Sendable, Equatable {
    /// Nothing else plays: tone and speech at full level.
    case normal
    /// A normal notification during a call: only its tone, softly; it is read when the call ends.
    case toneOnlyQuiet = "tone_only_quiet"
    /// Urgent during a call: spoken over it, the call's voices ducked.
    case overCall = "over_call"
    /// Emergency during a call: the call's voices muted until it has been heard.
    case callMuted = "call_muted"
}

/// What the terminal plays for a notification: a tone, then (maybe) the text.
public struct Announcement: Sendable, Equatable {
    public var id: NotificationID
    public var tone: NotificationTone
    /// Read after the tone; nil = tone only.
    public var text: String?
    public var level: AnnouncementLevel
    public var priority: NotificationPriority

    public init(id: NotificationID, tone: NotificationTone, text: String?, level: AnnouncementLevel, priority: NotificationPriority) {
        self.id = id
        self.tone = tone
        self.text = text
        self.level = level
        self.priority = priority
    }
}
