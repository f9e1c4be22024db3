import Calls
import TOMLKit

// Practice notifications: `[groups]` (named lists of rooms), `[notifications.<id>]` (the types
// staff send with a key or a command) and `[speech]` (how they are read aloud).

/// `[notifications.<id>]`: one notification type.
public struct NotificationEntry: Sendable, Equatable {
    /// What people see in the history; "" = the id.
    public var label: String = ""
    /// Room ids and group names from `[groups]`.
    public var recipients: [String] = []
    /// What is read aloud; "" = the label.
    public var text: String = ""
    /// gong, bell, alert or alarm; "" = the priority's own (gong, alert, alarm).
    public var tone: String = ""
    /// normal, urgent or emergency.
    public var priority: String = "normal"
    public var readAloud: Bool = true

    public init() {}

    public init(label: String = "", recipients: [String], text: String = "", tone: String = "", priority: String = "normal",
                readAloud: Bool = true) {
        self.label = label
        self.recipients = recipients
        self.text = text
        self.tone = tone
        self.priority = priority
        self.readAloud = readAloud
    }

    static let keyNames = ["label", "recipients", "text", "tone", "priority", "read_aloud"]

    static func read(_ key: String, _ value: TOMLValueConvertible, _ entry: inout NotificationEntry) throws(ValueProblem) {
        switch key {
        case "label": entry.label = try TOMLRead.string(value)
        case "recipients": entry.recipients = try TOMLRead.strings(value)
        case "text": entry.text = try TOMLRead.string(value)
        case "tone": entry.tone = try TOMLRead.string(value)
        case "priority": entry.priority = try TOMLRead.string(value)
        case "read_aloud": entry.readAloud = try TOMLRead.bool(value)
        default: preconditionFailure("not in keyNames: \(key)")
        }
    }

    func rendered(id: String) -> String {
        var out = "\n[notifications.\(TOMLWrite.key(id))]\n"
        out += "label = \(TOMLWrite.string(label))\nrecipients = [\(recipients.map(TOMLWrite.string).joined(separator: ", "))]\n"
        out += "text = \(TOMLWrite.string(text))\ntone = \(TOMLWrite.string(tone))\npriority = \(TOMLWrite.string(priority))\n"
        out += "read_aloud = \(readAloud)\n"
        return out
    }
}

/// `[speech]`: reading notifications aloud (espeak-ng, on the terminal itself).
public struct SpeechSection: Sendable, Equatable {
    /// espeak-ng voice: a language (de, fr, it, en, ...) with an optional variant ("de+f3").
    public var voice: String = "de"
    public var wordsPerMinute: Int = 160
    /// 0...100, 50 = the voice's own.
    public var pitch: Int = 50
    /// Peak level of the speech, dBFS.
    public var levelDB: Double = -9
    /// The call's voices are this much softer while an urgent notification is read over them, dB.
    public var duckDB: Double = -18
    /// Speak every configured text once at start, so the first notification is read from the cache.
    public var prepareAtStart: Bool = true

    public init() {}

    public static let wordsPerMinuteRange = 80...450
    public static let pitchRange = 0...100
    public static let levelRange = -40.0...0.0
    public static let duckRange = -60.0...0.0
}

extension DaemonConfig {
    static let speechSection = SchemaSection(name: "speech", comment: "Reading notifications aloud, on the terminal (espeak-ng; docs/calls.md).", keys: [
        .string("voice", \.speech.voice, "espeak-ng voice: de, fr, it, en (any of `espeak-ng --voices`), optionally with a variant, e.g. \"de+f3\"",
                Rule(allowed: "a voice name: letters, digits, - _ + /") { v in
                    !v.isEmpty && v.utf8.count <= 40 && v.unicodeScalars.allSatisfy({ $0.properties.isAlphabetic || ("0"..."9").contains($0) || "-_+/".unicodeScalars.contains($0) })
                        ? nil : "\(TOMLWrite.string(v)) is not a voice name (e.g. \"de\", \"fr\", \"en+f3\")"
                }).reloaded(.live),
        .int("words_per_minute", \.speech.wordsPerMinute, "Speaking rate", .range(SpeechSection.wordsPerMinuteRange)).reloaded(.live),
        .int("pitch", \.speech.pitch, "Base pitch, 50 = the voice's own", .range(SpeechSection.pitchRange)).reloaded(.live),
        .double("level_db", \.speech.levelDB, "Peak level of the speech, dBFS", .range(SpeechSection.levelRange)).reloaded(.live),
        .double("duck_db", \.speech.duckDB, "An urgent notification is read over a call with the call's voices this much softer, dB (an emergency mutes them)", .range(SpeechSection.duckRange)).reloaded(.live),
        .bool("prepare_at_start", \.speech.prepareAtStart, "Speak the texts of the notifications this room receives into the cache at start, so the first one is read without waiting for the synthesis").reloaded(.live),
    ])

    /// Reads `[groups]`: group name → room ids.
    static func readGroups(_ value: TOMLValueConvertible, present: inout Set<String>,
                           report: ([String], String) -> Void) -> [String: [String]] {
        guard let table = value.table else {
            report(["groups"], "expected a table of room lists ([groups] with name = [\"room\", ...]), got \(TOMLRead.describe(value))")
            return [:]
        }
        var out: [String: [String]] = [:]
        for (name, item) in table {
            do throws(ValueProblem) {
                out[name] = try TOMLRead.strings(item)
                present.insert("groups.\(name)")
            } catch {
                report(["groups", name], error.text)
            }
        }
        return out
    }

    func renderedGroups() -> String {
        guard !groups.isEmpty else { return "" }
        var out = "\n# Named groups of rooms, for notification recipients.\n[groups]\n"
        for (name, rooms) in groups.sorted(by: { $0.key < $1.key }) {
            out += "\(TOMLWrite.key(name)) = [\(rooms.map(TOMLWrite.string).joined(separator: ", "))]\n"
        }
        return out
    }

    func renderedNotifications() -> String {
        guard !notifications.isEmpty else { return "" }
        var out = "\n# Notification types: label, recipients (rooms or groups), text read aloud (default: the label),\n"
        out += "# tone (gong, bell, alert, alarm; default by priority), priority (normal, urgent, emergency), read_aloud.\n"
        for (id, entry) in notifications.sorted(by: { $0.key < $1.key }) { out += entry.rendered(id: id) }
        return out
    }

    /// The rooms of a recipient list: room ids as they are, group names expanded; in order, once each.
    func resolveRecipients(_ names: [String]) -> [String] {
        var out: [String] = []
        for name in names {
            for room in groups[name] ?? [name] where !out.contains(room) { out.append(room) }
        }
        return out
    }

    /// The texts this room reads aloud: those of the types it receives (what it only sends, it
    /// never reads). Prepared into the speech cache at start.
    public func textsReadHere() -> [String] {
        let types = notificationTypes()
        let received = notifications.filter { resolveRecipients($0.value.recipients).contains(room.id) }.keys
        return Array(Set(received.compactMap { types[$0] }.filter(\.readAloud).map(\.spokenText))).sorted()
    }

    /// The call engine's notification types. Precondition: the configuration is valid.
    func notificationTypes() -> [String: NotificationType] {
        var out: [String: NotificationType] = [:]
        for (id, e) in notifications {
            // A site's type that reaches only this room cannot be sent from here (ofSite).
            out[id] = notificationType(id, e)
        }
        return out
    }

    /// The entry `id` as the call engine takes it; nil when it reaches no room but this one.
    func notificationType(_ id: String, _ e: NotificationEntry) -> NotificationType? {
        let recipients = resolveRecipients(e.recipients).compactMap(RoomID.init).filter { $0.value != room.id }
        if recipients.isEmpty { return nil }
        let priority = NotificationPriority(rawValue: e.priority) ?? .normal
        return NotificationType(id: id, label: e.label.isEmpty ? id : e.label, recipients: recipients,
                                text: e.text, tone: NotificationTone(rawValue: e.tone), priority: priority, readAloud: e.readAloud)
    }

    func groupIssues(_ out: inout [PathIssue]) {
        for (name, members) in groups.sorted(by: { $0.key < $1.key }) {
            if RoomID(name) == nil { out.append((["groups", name], "\(TOMLWrite.string(name)) is not a group name (1-32 of a-z, 0-9, - and _)")) }
            if rooms[name] != nil { out.append((["groups", name], "\(TOMLWrite.string(name)) is also a room id: a recipient list could not tell them apart")) }
            if members.isEmpty { out.append((["groups", name], "names no room")) }
            var seen: Set<String> = []
            for m in members {
                if !seen.insert(m).inserted { out.append((["groups", name], "\(TOMLWrite.string(m)) is listed twice")) }
                else if rooms[m] == nil { out.append((["groups", name], "\(TOMLWrite.string(m)) is not a room in [rooms]")) }
            }
        }
    }

    func notificationIssues(_ out: inout [PathIssue]) {
        for (id, e) in notifications.sorted(by: { $0.key < $1.key }) {
            if !NotificationType.isValidID(id) {
                out.append((["notifications", id], "\(TOMLWrite.string(id)) is not a notification id (1-32 of a-z, 0-9, - and _)"))
            }
            let path = ["notifications", id, "recipients"]
            if e.recipients.isEmpty { out.append((path, "is required: room ids from [rooms] or group names from [groups]")) }
            for r in e.recipients where rooms[r] == nil && groups[r] == nil {
                let hint = Spelling.closest(to: r, among: Array(rooms.keys) + Array(groups.keys)).map { " (did you mean \(TOMLWrite.string($0))?)" } ?? ""
                out.append((path, "\(TOMLWrite.string(r)) is neither a room in [rooms] nor a group in [groups]" + hint))
            }
            let resolved = resolveRecipients(e.recipients).filter { $0 != room.id }
            if !e.recipients.isEmpty, resolved.isEmpty, callsEnabled, !ofSite {
                out.append((path, "reaches no room but this one"))
            }
            if resolved.count > SignalCodec.maxParticipants {
                out.append((path, "\(resolved.count) rooms; a notification goes to at most \(SignalCodec.maxParticipants)"))
            } else if let me = RoomID(room.id), e.label.utf8.count <= StaffNotification.maxLabelBytes,
                      e.text.utf8.count <= StaffNotification.maxTextBytes, let type = notificationType(id, e) {
                let size = CallSettings.notificationMessage(from: me, type: type, to: type.recipients)
                if size > SignalCodec.maxDatagramBytes {
                    out.append((path, "\(resolved.count) rooms with this label and text need a \(size)-byte message; one datagram holds \(SignalCodec.maxDatagramBytes): fewer rooms, shorter room ids or a shorter text"))
                }
            }
            if e.label.utf8.count > StaffNotification.maxLabelBytes {
                out.append((["notifications", id, "label"], "\(e.label.utf8.count) bytes; at most \(StaffNotification.maxLabelBytes)"))
            }
            if e.text.utf8.count > StaffNotification.maxTextBytes {
                out.append((["notifications", id, "text"], "\(e.text.utf8.count) bytes; at most \(StaffNotification.maxTextBytes)"))
            }
            for (key, value) in [("label", e.label), ("text", e.text)]
            where value.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
                out.append((["notifications", id, key], "has control characters (a line break?): one line of plain text"))
            }
            let tones = NotificationTone.selectable.map(\.rawValue)
            if !e.tone.isEmpty, !tones.contains(e.tone) {
                let hint = Spelling.closest(to: e.tone, among: tones).map { " (did you mean \($0)?)" } ?? ""
                out.append((["notifications", id, "tone"], "\(TOMLWrite.string(e.tone)) is not a tone: one of \(tones.joined(separator: ", ")), or \"\" for the priority's own" + hint))
            }
            let priorities = NotificationPriority.allCases.map(\.rawValue)
            if NotificationPriority(rawValue: e.priority) == nil {
                let hint = Spelling.closest(to: e.priority, among: priorities).map { " (did you mean \($0)?)" } ?? ""
                out.append((["notifications", id, "priority"], "\(TOMLWrite.string(e.priority)) is not a priority: one of \(priorities.joined(separator: ", "))" + hint))
            }
        }
    }
}
