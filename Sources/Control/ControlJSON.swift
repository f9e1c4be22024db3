import Calls

/// A line from the daemon that does not have the documented shape.
public struct ControlProtocolViolation: Error, Sendable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// One line of the event stream as a client reads it.
public enum ControlEvent: Sendable, Equatable {
    case call(CallEvent)
    /// The daemon's event queue overflowed and this many events were not delivered.
    case eventsLost(Int)
}

/// The wire shapes of the call vocabulary: snake_case keys, statuses and outcomes as strings,
/// call ids as hexadecimal strings (as the log prints them), times in seconds since 1970 (UTC).
public enum ControlJSON {
    // MARK: Encoding (daemon side)

    public static func encode(_ event: CallEvent) -> JSONValue {
        switch event {
        case .incomingCall(let id, let from, let participants, let kind):
            ["event": "incoming_call", "call_id": callID(id), "from": room(from), "participants": rooms(participants),
             "kind": .string(kind.rawValue)]
        case .outgoingCall(let id, let to, let kind):
            ["event": "outgoing_call", "call_id": callID(id), "to": rooms(to), "kind": .string(kind.rawValue)]
        case .participantStatus(let id, let r, let status):
            merge(["event": "participant_status", "call_id": callID(id), "room": room(r)], encode(status))
        case .connected(let id):
            ["event": "connected", "call_id": callID(id)]
        case .callEnded(let id, let outcome):
            ["event": "call_ended", "call_id": callID(id), "outcome": .string(outcome.rawValue)]
        case .muteChanged(let r, let mute):
            merge(["event": "mute_changed", "room": room(r)], encode(mute))
        case .presenceChanged(let r, let presence):
            merge(["event": "presence_changed", "room": room(r)], encode(presence))
        case .doNotDisturbChanged(let on):
            ["event": "dnd_changed", "dnd": .bool(on)]
        case .historyAdded(let entry):
            ["event": "history_added", "entry": encode(entry)]
        case .missedAcknowledged(let ids):
            ["event": "missed_acknowledged", "call_ids": .array(ids.map(callID))]
        case .historyErased:
            ["event": "history_erased"]
        case .notificationReceived(let record):
            ["event": "notification_received", "notification": encode(record)]
        case .notificationReleased(let id):
            ["event": "notification_released", "notification_id": notificationID(id)]
        case .notificationDelivered(let id, let r):
            ["event": "notification_delivered", "notification_id": notificationID(id), "room": room(r)]
        case .notificationSent(let id, let delivered, let waiting):
            ["event": "notification_sent", "notification_id": notificationID(id), "delivered": rooms(delivered), "waiting": rooms(waiting)]
        case .notificationAcknowledged(let id, let by):
            ["event": "notification_acknowledged", "notification_id": notificationID(id), "by": room(by)]
        case .notificationReminded(let id):
            ["event": "notification_reminded", "notification_id": notificationID(id)]
        case .readAloudChanged(let on):
            ["event": "read_aloud_changed", "read_aloud": .bool(on)]
        }
    }

    public static func eventsLost(_ count: Int) -> JSONValue {
        ["event": "events_lost", "count": .integer(Int64(count))]
    }

    public static func encode(_ reply: ControlReply) -> JSONValue {
        switch reply {
        case .done:
            return .object([:])
        case .callPlaced(let id, let to):
            return ["call_id": callID(id), "to": rooms(to)]
        case .mute(let mute):
            return encode(mute)
        case .doNotDisturb(let on):
            return ["dnd": .bool(on)]
        case .readAloud(let on):
            return ["read_aloud": .bool(on)]
        case .notificationSent(let id, let to):
            return ["notification_id": notificationID(id), "to": rooms(to)]
        case .status(let s):
            var call = JSONValue.null
            if let c = s.call {
                call = ["call_id": callID(c.callID), "direction": .string(c.direction.rawValue), "caller": room(c.caller),
                        "participants": .array(c.participants.map(encode)), "connected": .bool(c.connected),
                        "kind": .string(c.kind.rawValue)]
            }
            let media = s.media.map { m -> JSONValue in
                ["source": .string(m.source), "received": .number(Double(m.received)), "played": .number(Double(m.played)),
                 "delay_ms": .number((m.delayMs * 10).rounded() / 10)]
            }
            let lights = s.lights.map { l -> JSONValue in
                ["led": .string(l.led), "pattern": .string(l.pattern), "state": l.state.map(JSONValue.string) ?? .null,
                 "problem": l.problem.map(JSONValue.string) ?? .null]
            }
            return ["room": room(s.room), "name": .string(s.name), "dnd": .bool(s.doNotDisturb), "mute": encode(s.mute), "call": call,
                    "media": .array(media), "missed": .integer(Int64(s.missedCalls)), "lights": .array(lights),
                    "notifications": .integer(Int64(s.notifications)), "read_aloud": .bool(s.readAloud),
                    "security": s.security.map { .string($0.rawValue) } ?? .null]
        case .rooms(let d):
            return ["rooms": .array(d.rooms.map { merge(["id": room($0.id), "name": .string($0.name)], encode($0.presence)) }),
                    "buttons": .array(d.buttons.map { ["name": .string($0.name), "rooms": rooms($0.rooms), "kind": .string($0.kind.rawValue)] })]
        case .history(let entries, let notifications):
            return ["entries": .array(entries.map(encode)), "notifications": .array(notifications.map(encode))]
        case .loopback(let status):
            return encode(status)
        case .networkLoopback(let status):
            return encode(status)
        case .statistics(let s):
            return s.json
        case .site(let s):
            return s.json
        }
    }

    public static func encode(_ entry: HistoryEntry) -> JSONValue {
        var o: [String: JSONValue] = [
            "call_id": callID(entry.callID), "direction": .string(entry.direction.rawValue), "caller": room(entry.caller),
            "participants": .array(entry.participants.map(encode)), "outcome": .string(entry.outcome.rawValue),
            "started": .number(entry.started), "ended": .number(entry.ended),
        ]
        if let reason = entry.reason { o["reason"] = .string(reason.rawValue) }
        if let acknowledged = entry.acknowledged { o["acknowledged"] = .bool(acknowledged) }
        if let kind = entry.kind { o["kind"] = .string(kind.rawValue) }
        return .object(o)
    }

    public static func encode(_ r: NotificationRecord) -> JSONValue {
        let n = r.notification
        var o: [String: JSONValue] = [
            "notification_id": notificationID(n.id), "direction": .string(r.direction.rawValue), "sender": room(n.sender),
            "recipients": rooms(n.recipients), "type": .string(n.type), "label": .string(n.label), "text": .string(n.text),
            "priority": .string(n.priority.rawValue), "tone": .string(n.tone.rawValue), "read_aloud": .bool(n.readAloud),
            "sent": .number(n.sent), "delivered": rooms(r.delivered), "acknowledged_by": rooms(r.acknowledgedBy),
            "held": .bool(r.held), "acknowledged": .bool(r.acknowledged),
        ]
        if let t = r.received { o["received"] = .number(t) }
        if let t = r.heard { o["heard"] = .number(t) }
        return .object(o)
    }

    public static func encode(_ p: Participant) -> JSONValue { merge(["room": room(p.room)], encode(p.status)) }

    /// `{"status": "declined", "reason": "do_not_disturb"}`; the reason only for declined.
    public static func encode(_ status: ParticipantStatus) -> JSONValue {
        switch status {
        case .ringing: ["status": "ringing"]
        case .connected: ["status": "connected"]
        case .declined(let reason): ["status": "declined", "reason": .string(reason.rawValue)]
        case .unavailable: ["status": "unavailable"]
        case .left: ["status": "left"]
        }
    }

    public static func encode(_ m: MuteState) -> JSONValue { ["microphone": .bool(m.microphone), "speaker": .bool(m.speaker)] }
    public static func encode(_ p: Presence) -> JSONValue { ["online": .bool(p.online), "dnd": .bool(p.doNotDisturb), "in_call": .bool(p.inCall)] }

    private static func callID(_ id: CallID) -> JSONValue { .string(id.description) }
    private static func notificationID(_ id: NotificationID) -> JSONValue { .string(id.description) }
    private static func room(_ r: RoomID) -> JSONValue { .string(r.value) }
    private static func rooms(_ rs: [RoomID]) -> JSONValue { .array(rs.map(room)) }

    private static func merge(_ a: JSONValue, _ b: JSONValue) -> JSONValue {
        guard case .object(let x) = a, case .object(let y) = b else { return a }
        return .object(x.merging(y) { first, _ in first })
    }

    // MARK: Decoding (client side)

    public typealias Violation = ControlProtocolViolation

    public static func decodeEvent(_ json: JSONValue) throws(Violation) -> ControlEvent {
        let name = try field(json, "event", \.stringValue, "a string")
        switch name {
        case "incoming_call":
            return .call(.incomingCall(try callID(json), from: try room(json, "from"), participants: try rooms(json, "participants"),
                                       kind: try callKind(json)))
        case "outgoing_call":
            return .call(.outgoingCall(try callID(json), to: try rooms(json, "to"), kind: try callKind(json)))
        case "participant_status":
            return .call(.participantStatus(try callID(json), room: try room(json, "room"), status: try status(json)))
        case "connected":
            return .call(.connected(try callID(json)))
        case "call_ended":
            let outcome = try field(json, "outcome", { $0.stringValue.flatMap(CallOutcome.init(rawValue:)) }, "a call outcome")
            return .call(.callEnded(try callID(json), outcome: outcome))
        case "mute_changed":
            return .call(.muteChanged(room: try room(json, "room"), try mute(json)))
        case "presence_changed":
            return .call(.presenceChanged(room: try room(json, "room"), try presence(json)))
        case "dnd_changed":
            return .call(.doNotDisturbChanged(try field(json, "dnd", \.boolValue, "a boolean")))
        case "history_added":
            return .call(.historyAdded(try historyEntry(try field(json, "entry", { $0 }, "an object"))))
        case "missed_acknowledged":
            let ids = try field(json, "call_ids", { v -> [CallID]? in
                guard let items = v.arrayValue else { return nil }
                let ids = items.compactMap { $0.stringValue.flatMap { UInt64($0, radix: 16) }.map(CallID.init) }
                return ids.count == items.count ? ids : nil
            }, "an array of call ids")
            return .call(.missedAcknowledged(ids))
        case "history_erased":
            return .call(.historyErased)
        case "notification_received":
            return .call(.notificationReceived(try notificationRecord(try field(json, "notification", { $0 }, "an object"))))
        case "notification_released":
            return .call(.notificationReleased(try notificationID(json)))
        case "notification_delivered":
            return .call(.notificationDelivered(try notificationID(json), room: try room(json, "room")))
        case "notification_sent":
            return .call(.notificationSent(try notificationID(json), delivered: try rooms(json, "delivered"),
                                           waiting: try rooms(json, "waiting")))
        case "notification_acknowledged":
            return .call(.notificationAcknowledged(try notificationID(json), by: try room(json, "by")))
        case "notification_reminded":
            return .call(.notificationReminded(try notificationID(json)))
        case "read_aloud_changed":
            return .call(.readAloudChanged(try field(json, "read_aloud", \.boolValue, "a boolean")))
        case "events_lost":
            return .eventsLost(Int(try field(json, "count", \.integerValue, "an integer")))
        default:
            throw Violation("unknown event \"\(name)\"")
        }
    }

    /// Reads a success response's `result` for the command that was sent.
    public static func decodeReply(_ result: JSONValue, for command: ControlCommand) throws(Violation) -> ControlReply {
        switch command {
        case .call, .callRooms, .callBack, .callMissed:
            return .callPlaced(try callID(result), to: try rooms(result, "to"))
        case .hangUp, .answer, .decline, .acknowledge, .eraseHistory:
            return .done
        case .setMuted:
            return .mute(try mute(result))
        case .setDoNotDisturb:
            return .doNotDisturb(try field(result, "dnd", \.boolValue, "a boolean"))
        case .setReadAloud:
            return .readAloud(try field(result, "read_aloud", \.boolValue, "a boolean"))
        case .notify:
            return .notificationSent(try notificationID(result), to: try rooms(result, "to"))
        case .status:
            var call: ActiveCall?
            if let c = result["call"], c != .null {
                let direction = try field(c, "direction", { $0.stringValue.flatMap(HistoryEntry.Direction.init(rawValue:)) }, "incoming or outgoing")
                call = ActiveCall(callID: try callID(c), direction: direction, caller: try room(c, "caller"),
                                  participants: try participants(c), connected: try field(c, "connected", \.boolValue, "a boolean"),
                                  kind: try callKind(c))
            }
            var media: [MediaStream] = []
            // Absent from daemons older than the field: no streams known.
            if result["media"].map({ $0 != .null }) == true {
                for m in try field(result, "media", \.arrayValue, "an array") {
                    media.append(MediaStream(source: try field(m, "source", \.stringValue, "a string"),
                                             received: try field(m, "received", { $0.numberValue.flatMap { Int(exactly: $0) } }, "an integer"),
                                             played: try field(m, "played", { $0.numberValue.flatMap { Int(exactly: $0) } }, "an integer"),
                                             delayMs: try field(m, "delay_ms", \.numberValue, "a number")))
                }
            }
            // Absent from daemons older than the field: none known.
            let missed = result["missed"].map { $0 != .null } == true
                ? Int(try field(result, "missed", \.integerValue, "an integer")) : 0
            var lights: [StatusLight] = []
            // Absent from daemons older than the field: none known.
            if result["lights"].map({ $0 != .null }) == true {
                for l in try field(result, "lights", \.arrayValue, "an array") {
                    let optional = { (name: String) throws(Violation) -> String? in
                        l[name].map { $0 != .null } == true ? try field(l, name, \.stringValue, "a string") : nil
                    }
                    lights.append(StatusLight(led: try field(l, "led", \.stringValue, "a string"),
                                              pattern: try field(l, "pattern", \.stringValue, "a string"),
                                              state: try optional("state"), problem: try optional("problem")))
                }
            }
            var status = ControlStatus(room: try room(result, "room"), name: try field(result, "name", \.stringValue, "a string"),
                                       doNotDisturb: try field(result, "dnd", \.boolValue, "a boolean"),
                                       mute: try mute(try field(result, "mute", { $0 }, "an object")), call: call, media: media,
                                       missedCalls: missed, lights: lights)
            // Absent from daemons older than notifications: none waiting, read aloud.
            if result["notifications"].map({ $0 != .null }) == true {
                status.notifications = Int(try field(result, "notifications", \.integerValue, "an integer"))
            }
            if result["read_aloud"].map({ $0 != .null }) == true {
                status.readAloud = try field(result, "read_aloud", \.boolValue, "a boolean")
            }
            if let security = result["security"], security != .null {
                let text = try field(result, "security", \.stringValue, "a string")
                guard let mode = SignalProtectionMode(rawValue: text) else {
                    throw Violation("\"security\" is \"\(text)\", not one of clear_lab_mode, unkeyed, site_key, terminal_keys")
                }
                status.security = mode
            }
            return .status(status)
        case .rooms:
            var list: [RoomDirectory.Room] = []
            for r in try field(result, "rooms", \.arrayValue, "an array") {
                list.append(.init(id: try room(r, "id"), name: try field(r, "name", \.stringValue, "a string"), presence: try presence(r)))
            }
            var buttons: [RoomDirectory.Button] = []
            for b in try field(result, "buttons", \.arrayValue, "an array") {
                buttons.append(.init(name: try field(b, "name", \.stringValue, "a string"), rooms: try rooms(b, "rooms"), kind: try callKind(b)))
            }
            return .rooms(RoomDirectory(rooms: list, buttons: buttons))
        case .loopback, .loopbackResult:
            return .loopback(try decodeLoopback(result))
        case .networkLoopback, .networkLoopbackResult:
            return .networkLoopback(try decodeNetworkLoopback(result))
        case .statistics:
            return .statistics(try DaemonStatistics(json: result))
        case .site:
            return .site(try SiteOverview(json: result))
        case .history:
            var entries: [HistoryEntry] = []
            for e in try field(result, "entries", \.arrayValue, "an array") { entries.append(try historyEntry(e)) }
            var notifications: [NotificationRecord] = []
            if result["notifications"].map({ $0 != .null }) == true {
                for n in try field(result, "notifications", \.arrayValue, "an array") { notifications.append(try notificationRecord(n)) }
            }
            return .history(entries, notifications: notifications)
        }
    }

    public static func historyEntry(_ json: JSONValue) throws(Violation) -> HistoryEntry {
        let direction = try field(json, "direction", { $0.stringValue.flatMap(HistoryEntry.Direction.init(rawValue:)) }, "incoming or outgoing")
        let outcome = try field(json, "outcome", { $0.stringValue.flatMap(CallOutcome.init(rawValue:)) }, "a call outcome")
        var reason: DeclineReason?
        if let r = json["reason"], r != .null {
            reason = try field(json, "reason", { $0.stringValue.flatMap(DeclineReason.init(rawValue:)) }, "a decline reason")
        }
        var acknowledged: Bool?
        if let a = json["acknowledged"], a != .null { acknowledged = try field(json, "acknowledged", \.boolValue, "a boolean") }
        return HistoryEntry(callID: try callID(json), direction: direction, caller: try room(json, "caller"),
                            participants: try participants(json), outcome: outcome, reason: reason,
                            started: try field(json, "started", \.numberValue, "a number"),
                            ended: try field(json, "ended", \.numberValue, "a number"), acknowledged: acknowledged,
                            kind: try callKind(json))
    }

    /// The `kind` of a call (absent: a normal call).
    static func callKind(_ json: JSONValue) throws(Violation) -> CallKind {
        guard let k = json["kind"], k != .null else { return .normal }
        return try field(json, "kind", { $0.stringValue.flatMap(CallKind.init(rawValue:)) }, "call, emergency or announcement")
    }

    public static func notificationRecord(_ json: JSONValue) throws(Violation) -> NotificationRecord {
        let direction = try field(json, "direction", { $0.stringValue.flatMap(HistoryEntry.Direction.init(rawValue:)) }, "incoming or outgoing")
        let sender = try room(json, "sender")
        let n = StaffNotification(
            id: try notificationID(json), sender: sender, recipients: try rooms(json, "recipients"),
            type: try field(json, "type", \.stringValue, "a string"), label: try field(json, "label", \.stringValue, "a string"),
            text: try field(json, "text", \.stringValue, "a string"),
            priority: try field(json, "priority", { $0.stringValue.flatMap(NotificationPriority.init(rawValue:)) }, "a priority"),
            tone: try field(json, "tone", { $0.stringValue.flatMap(NotificationTone.init(rawValue:)) }, "a tone"),
            readAloud: try field(json, "read_aloud", \.boolValue, "a boolean"), sent: try field(json, "sent", \.numberValue, "a number"))
        let optionalTime = { (key: String) throws(Violation) -> Double? in
            json[key].map { $0 != .null } == true ? try field(json, key, \.numberValue, "a number") : nil
        }
        return NotificationRecord(notification: n, direction: direction, delivered: try rooms(json, "delivered"),
                                  acknowledgedBy: try rooms(json, "acknowledged_by"),
                                  received: try optionalTime("received"), heard: try optionalTime("heard"),
                                  held: try field(json, "held", \.boolValue, "a boolean"),
                                  acknowledged: try field(json, "acknowledged", \.boolValue, "a boolean"))
    }

    private static func notificationID(_ json: JSONValue) throws(Violation) -> NotificationID {
        NotificationID(try field(json, "notification_id", { $0.stringValue.flatMap { UInt64($0, radix: 16) } }, "a hexadecimal notification id"))
    }

    static func field<T>(_ json: JSONValue, _ key: String, _ read: (JSONValue) -> T?, _ what: String) throws(Violation) -> T {
        guard let value = json[key], let t = read(value) else { throw Violation("\"\(key)\" must be \(what)") }
        return t
    }

    private static func callID(_ json: JSONValue) throws(Violation) -> CallID {
        CallID(try field(json, "call_id", { $0.stringValue.flatMap { UInt64($0, radix: 16) } }, "a hexadecimal call id"))
    }

    private static func room(_ json: JSONValue, _ key: String) throws(Violation) -> RoomID {
        try field(json, key, { $0.stringValue.flatMap(RoomID.init) }, "a room id")
    }

    private static func rooms(_ json: JSONValue, _ key: String) throws(Violation) -> [RoomID] {
        try field(json, key, { v in
            guard let items = v.arrayValue else { return nil }
            let ids = items.compactMap { $0.stringValue.flatMap(RoomID.init) }
            return ids.count == items.count ? ids : nil
        }, "an array of room ids")
    }

    private static func participants(_ json: JSONValue) throws(Violation) -> [Participant] {
        var list: [Participant] = []
        for p in try field(json, "participants", \.arrayValue, "an array") {
            list.append(Participant(room: try room(p, "room"), status: try status(p)))
        }
        return list
    }

    private static func status(_ json: JSONValue) throws(Violation) -> ParticipantStatus {
        switch try field(json, "status", \.stringValue, "a string") {
        case "ringing": return .ringing
        case "connected": return .connected
        case "unavailable": return .unavailable
        case "left": return .left
        case "declined":
            return .declined(try field(json, "reason", { $0.stringValue.flatMap(DeclineReason.init(rawValue:)) }, "a decline reason"))
        case let other: throw Violation("unknown participant status \"\(other)\"")
        }
    }

    private static func mute(_ json: JSONValue) throws(Violation) -> MuteState {
        MuteState(microphone: try field(json, "microphone", \.boolValue, "a boolean"), speaker: try field(json, "speaker", \.boolValue, "a boolean"))
    }

    private static func presence(_ json: JSONValue) throws(Violation) -> Presence {
        Presence(online: try field(json, "online", \.boolValue, "a boolean"), doNotDisturb: try field(json, "dnd", \.boolValue, "a boolean"),
                 inCall: try field(json, "in_call", \.boolValue, "a boolean"))
    }
}
