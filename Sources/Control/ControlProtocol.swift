import Calls

/// Error codes of the control protocol (docs/control.md).
public enum ControlErrorCode: String, Sendable, CaseIterable {
    case parseError = "parse_error"
    case unknownCommand = "unknown_command"
    case invalidArgument = "invalid_argument"
    case notPermitted = "not_permitted"
    case busy
    case notInCall = "not_in_call"
    case unavailable
    case `internal`
}

/// A refused request: a code for programs, a message for people.
public struct ControlFailure: Error, Sendable, Equatable, CustomStringConvertible {
    public let code: ControlErrorCode
    public let message: String
    public init(_ code: ControlErrorCode, _ message: String) {
        self.code = code
        self.message = message
    }
    public var description: String { "\(code.rawValue): \(message)" }
}

public enum MuteTarget: String, Sendable, CaseIterable {
    case microphone = "mic"
    case speaker
}

/// What a control client asks the daemon to do: everything the handler sees.
public enum ControlCommand: Sendable, Equatable {
    /// A button's call (of the button's kind).
    case call(button: String)
    case callRooms([RoomID], kind: CallKind = .normal)
    /// `hangup` and `leave` (an alias): the caller ends the call, a callee leaves it.
    case hangUp
    /// Take the ringing incoming call now.
    case answer
    /// Refuse the ringing incoming call.
    case decline
    /// Call the other side of the newest call in the history.
    case callBack
    /// Call the room of the oldest unacknowledged missed call.
    case callMissed
    /// Acknowledge the oldest notification heard here (else the oldest missed call), or all.
    case acknowledge(all: Bool)
    /// Send a configured notification type.
    case notify(type: String)
    /// The room's read-aloud switch.
    case setReadAloud(Bool)
    /// Erase the call history (technician's command).
    case eraseHistory
    case setMuted(MuteTarget, Bool)
    case setDoNotDisturb(Bool)
    case status
    case rooms
    /// Newest entries last; `limit` keeps the newest `limit`.
    case history(limit: Int?)
    /// Starts the device round-trip test; `insertMs` of silence precede the test signal unannounced
    /// (a known delay, to check the measurement itself).
    case loopback(insertMs: Double)
    /// The test's state, and its result once done.
    case loopbackResult
    /// Starts the network round-trip test to `room`: `count` probes (default 200, one every 10 ms).
    case networkLoopback(room: RoomID, count: Int)
    case networkLoopbackResult
    /// The daemon's counters: audio, network, calls.
    case statistics
    /// Every terminal's software and site document, as this one knows them (`SiteOverview`).
    case site

    /// The technician's commands, which `control.technician_group` may reserve (reading a
    /// result included: it describes the room's devices and network).
    public var isTechnicians: Bool {
        switch self {
        case .loopback, .loopbackResult, .networkLoopback, .networkLoopbackResult, .eraseHistory: true
        default: false
        }
    }

    /// The call engine's command for this request, or nil for the queries.
    public var callCommand: CallCommand? {
        switch self {
        case .call(let button): .call(button: button)
        case .callRooms(let rooms, let kind): .callRooms(rooms, kind: kind)
        case .hangUp: .hangUp
        case .answer: .answer
        case .decline: .decline
        case .callBack: .callBack
        case .callMissed: .callMissed
        case .acknowledge(let all): .acknowledge(all: all)
        case .setMuted(.microphone, let on): .setMicrophoneMuted(on)
        case .setMuted(.speaker, let on): .setSpeakerMuted(on)
        case .setDoNotDisturb(let on): .setDoNotDisturb(on)
        case .notify(let type): .notify(type: type)
        case .setReadAloud(let on): .setReadAloud(on)
        case .status, .rooms, .history, .loopback, .loopbackResult, .networkLoopback, .networkLoopbackResult, .statistics, .site,
             .eraseHistory: nil
        }
    }
}

/// One request line, parsed. `ping` and `subscribe` are answered by the server itself.
public enum ControlRequest: Sendable, Equatable {
    case command(ControlCommand)
    case subscribe
    case ping

    /// The request as a JSON object with `id` (what intercomctl sends).
    public func json(id: Int64) -> JSONValue {
        var o: [String: JSONValue] = ["id": .integer(id)]
        switch self {
        case .ping: o["cmd"] = "ping"
        case .subscribe: o["cmd"] = "subscribe"
        case .command(let c):
            switch c {
            case .call(let button): o["cmd"] = "call"; o["button"] = .string(button)
            case .callRooms(let rooms, let kind):
                o["cmd"] = "call"
                o["rooms"] = .array(rooms.map { .string($0.value) })
                if kind != .normal { o["kind"] = .string(kind.rawValue) }
            case .hangUp: o["cmd"] = "hangup"
            case .answer: o["cmd"] = "answer"
            case .decline: o["cmd"] = "decline"
            case .callBack: o["cmd"] = "call_back"
            case .callMissed: o["cmd"] = "call_missed"
            case .acknowledge(let all): o["cmd"] = "acknowledge"; if all { o["all"] = true }
            case .eraseHistory: o["cmd"] = "erase"
            case .setMuted(let target, let on): o["cmd"] = .string(on ? "mute" : "unmute"); o["target"] = .string(target.rawValue)
            case .setDoNotDisturb(let on): o["cmd"] = "dnd"; o["state"] = on ? "on" : "off"
            case .notify(let type): o["cmd"] = "notify"; o["type"] = .string(type)
            case .setReadAloud(let on): o["cmd"] = "read_aloud"; o["state"] = on ? "on" : "off"
            case .status: o["cmd"] = "status"
            case .rooms: o["cmd"] = "rooms"
            case .history(let limit):
                o["cmd"] = "history"
                if let limit { o["limit"] = .integer(Int64(limit)) }
            case .loopback(let insertMs):
                o["cmd"] = "loopback"
                if insertMs != 0 { o["insert_ms"] = .number(insertMs) }
            case .loopbackResult: o["cmd"] = "loopback_result"
            case .networkLoopback(let room, let count):
                o["cmd"] = "net_loopback"; o["room"] = .string(room.value); o["count"] = .integer(Int64(count))
            case .networkLoopbackResult: o["cmd"] = "net_loopback_result"
            case .statistics: o["cmd"] = "stats"
            case .site: o["cmd"] = "site"
            }
        }
        return .object(o)
    }

    /// Reads a request object. The id is checked by the caller; unknown members are ignored so
    /// that newer clients can send optional extras to older daemons.
    public static func parse(_ json: JSONValue) -> Result<ControlRequest, ControlFailure> {
        guard case .object = json else { return .failure(.init(.parseError, "a request is a JSON object")) }
        guard let cmd = json["cmd"] else { return .failure(.init(.invalidArgument, "missing \"cmd\"")) }
        guard let name = cmd.stringValue else { return .failure(.init(.invalidArgument, "\"cmd\" must be a string")) }
        do {
            switch name {
            case "ping": return .success(.ping)
            case "subscribe": return .success(.subscribe)
            case "call": return .success(.command(try parseCall(json)))
            case "hangup", "leave": return .success(.command(.hangUp))
            case "answer": return .success(.command(.answer))
            case "decline": return .success(.command(.decline))
            case "call_back": return .success(.command(.callBack))
            case "call_missed": return .success(.command(.callMissed))
            case "acknowledge":
                guard let all = json["all"], all != .null else { return .success(.command(.acknowledge(all: false))) }
                guard let flag = all.boolValue else { return .failure(.init(.invalidArgument, "\"all\" must be true or false")) }
                return .success(.command(.acknowledge(all: flag)))
            case "erase": return .success(.command(.eraseHistory))
            case "mute", "unmute": return .success(.command(.setMuted(try parseTarget(json), name == "mute")))
            case "dnd": return .success(.command(.setDoNotDisturb(try parseOnOff(json))))
            case "read_aloud": return .success(.command(.setReadAloud(try parseOnOff(json))))
            case "notify":
                guard let type = json["type"]?.stringValue, NotificationType.isValidID(type) else {
                    return .failure(.init(.invalidArgument, "notify needs \"type\": a notification id (1-32 of a-z, 0-9, - and _)"))
                }
                return .success(.command(.notify(type: type)))
            case "status": return .success(.command(.status))
            case "rooms": return .success(.command(.rooms))
            case "history": return .success(.command(.history(limit: try parseLimit(json))))
            case "loopback": return .success(.command(.loopback(insertMs: try parseInsert(json))))
            case "loopback_result": return .success(.command(.loopbackResult))
            case "net_loopback": return .success(.command(try parseNetworkLoopback(json)))
            case "net_loopback_result": return .success(.command(.networkLoopbackResult))
            case "stats": return .success(.command(.statistics))
            case "site": return .success(.command(.site))
            default:
                return .failure(.init(.unknownCommand, "unknown command \"\(name.prefix(64))\""))
            }
        } catch {
            return .failure(error)
        }
    }

    private static func parseCall(_ json: JSONValue) throws(ControlFailure) -> ControlCommand {
        switch (json["button"], json["rooms"]) {
        case (.string(let button)?, nil):
            guard !button.isEmpty else { throw ControlFailure(.invalidArgument, "\"button\" is empty") }
            guard json["kind"] == nil else { throw ControlFailure(.invalidArgument, "a button's call has the button's kind: \"kind\" goes with \"rooms\"") }
            return .call(button: button)
        case (nil, .array(let items)?):
            guard !items.isEmpty else { throw ControlFailure(.invalidArgument, "\"rooms\" is empty") }
            var rooms: [RoomID] = []
            for item in items {
                guard let text = item.stringValue, let room = RoomID(text) else {
                    throw ControlFailure(.invalidArgument, "\"rooms\" holds an invalid room id (lower-case letters, digits, - and _, 1-32 characters)")
                }
                if !rooms.contains(room) { rooms.append(room) }
            }
            var kind = CallKind.normal
            if let k = json["kind"] {
                guard let text = k.stringValue, let parsed = CallKind(rawValue: text) else {
                    throw ControlFailure(.invalidArgument, "\"kind\" is call, emergency or announcement")
                }
                kind = parsed
            }
            return .callRooms(rooms, kind: kind)
        case (nil, nil):
            throw ControlFailure(.invalidArgument, "call needs \"button\" (a string) or \"rooms\" (an array of room ids)")
        case (_?, _?):
            throw ControlFailure(.invalidArgument, "call takes \"button\" or \"rooms\", not both")
        default:
            throw ControlFailure(.invalidArgument, "\"button\" must be a string and \"rooms\" an array of room ids")
        }
    }

    private static func parseNetworkLoopback(_ json: JSONValue) throws(ControlFailure) -> ControlCommand {
        guard let text = json["room"]?.stringValue, let room = RoomID(text) else {
            throw ControlFailure(.invalidArgument, "net_loopback needs \"room\": a room id")
        }
        guard let v = json["count"] else { return .networkLoopback(room: room, count: 200) }
        guard let count = v.integerValue, (1...2000).contains(count) else {
            throw ControlFailure(.invalidArgument, "\"count\" must be an integer, 1...2000")
        }
        return .networkLoopback(room: room, count: Int(count))
    }

    private static func parseInsert(_ json: JSONValue) throws(ControlFailure) -> Double {
        guard let v = json["insert_ms"] else { return 0 }
        guard let ms = v.numberValue, ms >= 0, ms <= 500 else {
            throw ControlFailure(.invalidArgument, "\"insert_ms\" must be a number of milliseconds, 0...500")
        }
        return ms
    }

    private static func parseTarget(_ json: JSONValue) throws(ControlFailure) -> MuteTarget {
        switch json["target"]?.stringValue {
        case "mic", "microphone": return .microphone
        case "speaker": return .speaker
        default: throw ControlFailure(.invalidArgument, "\"target\" must be \"mic\" or \"speaker\"")
        }
    }

    private static func parseOnOff(_ json: JSONValue) throws(ControlFailure) -> Bool {
        switch json["state"]?.stringValue {
        case "on": return true
        case "off": return false
        default: throw ControlFailure(.invalidArgument, "\"state\" must be \"on\" or \"off\"")
        }
    }

    private static func parseLimit(_ json: JSONValue) throws(ControlFailure) -> Int? {
        guard let value = json["limit"], value != .null else { return nil }
        guard let limit = value.integerValue, limit > 0, limit <= Int64(Int32.max) else {
            throw ControlFailure(.invalidArgument, "\"limit\" must be a positive integer")
        }
        return Int(limit)
    }
}

/// The response envelope: `{"id": …, "ok": true, "result": {…}}` or `{"id": …, "ok": false, "error": {…}}`.
public struct ControlResponse: Sendable, Equatable {
    /// The request's id as sent (integer or string), or null when it could not be read.
    public var id: JSONValue
    public var outcome: Result<JSONValue, ControlFailure>

    public init(id: JSONValue, outcome: Result<JSONValue, ControlFailure>) {
        self.id = id
        self.outcome = outcome
    }

    public var json: JSONValue {
        switch outcome {
        case .success(let result): ["id": id, "ok": true, "result": result]
        case .failure(let f): ["id": id, "ok": false, "error": ["code": .string(f.code.rawValue), "message": .string(f.message)]]
        }
    }

    /// Reads a response line's object; nil when it is not a response (e.g. an event).
    public init?(json: JSONValue) {
        guard let ok = json["ok"]?.boolValue, let id = json["id"] else { return nil }
        self.id = id
        if ok {
            outcome = .success(json["result"] ?? .object([:]))
        } else {
            let code = json["error"]?["code"]?.stringValue.flatMap(ControlErrorCode.init(rawValue:)) ?? .internal
            outcome = .failure(.init(code, json["error"]?["message"]?.stringValue ?? "(no message)"))
        }
    }
}
