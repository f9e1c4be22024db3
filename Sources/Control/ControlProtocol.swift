import Calls
import Foundation

/// Error codes of the control protocol (docs/control.md).
public enum ControlErrorCode: String, Sendable, CaseIterable, Codable {
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
public struct ControlFailure: Error, Sendable, Equatable, Codable, CustomStringConvertible {
    public let code: ControlErrorCode
    public let message: String
    public init(_ code: ControlErrorCode, _ message: String) {
        self.code = code
        self.message = message
    }
    public var description: String { "\(code.rawValue): \(message)" }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        // A newer daemon's code reads as internal rather than failing the whole line.
        code = (try? c.decode(ControlErrorCode.self, forKey: .code)) ?? .internal
        message = (try? c.decode(String.self, forKey: .message)) ?? "(no message)"
    }
}

/// Why a client could not talk to the daemon (a refusal is not an error here: see `ControlResponse`).
public enum ControlClientError: Error, Sendable, CustomStringConvertible {
    /// Connecting failed; `reason` is the system's message.
    case unreachable(path: String, reason: String)
    case timedOut(path: String, seconds: Double)
    /// The daemon closed the connection (or it broke: `reason`).
    case closed(path: String, reason: String?)
    /// The daemon sent something that is not the documented protocol.
    case protocolViolation(String)

    public var description: String {
        switch self {
        case .unreachable(let path, let reason): "cannot connect to the daemon at \(path): \(reason)"
        case .timedOut(let path, let seconds): "no answer from the daemon at \(path) within \(seconds) s"
        case .closed(let path, let reason): "the daemon at \(path) closed the connection" + (reason.map { ": \($0)" } ?? "")
        case .protocolViolation(let message): "protocol error: \(message)"
        }
    }
}

/// What a control client asks the daemon to do: the call engine's commands, and the daemon's own.
public enum ControlCommand: Sendable, Equatable, Codable {
    /// Anything the call engine does (`CallCommand`: calls, keys' actions, mute, notifications).
    case perform(CallCommand)
    /// Erase the call history (technician's command).
    case eraseHistory
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

    /// The daemon's own commands without arguments, by `cmd`.
    private static let named: [(name: String, command: ControlCommand)] = [
        ("erase", .eraseHistory), ("status", .status), ("rooms", .rooms), ("loopback_result", .loopbackResult),
        ("net_loopback_result", .networkLoopbackResult), ("stats", .statistics), ("site", .site),
    ]

    private enum Keys: String, CodingKey { case cmd, limit, insertMs, room, count }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: Keys.self)
        switch self {
        case .perform(let command):
            try command.encode(to: encoder)
        case .history(let limit):
            try c.encode("history", forKey: .cmd)
            try c.encodeIfPresent(limit, forKey: .limit)
        case .loopback(let insertMs):
            try c.encode("loopback", forKey: .cmd)
            if insertMs != 0 { try c.encode(insertMs, forKey: .insertMs) }
        case .networkLoopback(let room, let count):
            try c.encode("net_loopback", forKey: .cmd)
            try c.encode(room, forKey: .room)
            try c.encode(count, forKey: .count)
        case .eraseHistory, .status, .rooms, .loopbackResult, .networkLoopbackResult, .statistics, .site:
            try c.encode(Self.named.first { $0.command == self }!.name, forKey: .cmd)
        }
    }

    /// Throws `ControlFailure` (`unknown_command`, `invalid_argument` naming the member) or a
    /// `DecodingError` (a member of the wrong type: `ControlRequest.read` names it).
    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: Keys.self)
        let name = try c.decode(String.self, forKey: .cmd)
        if CallCommand.names.contains(name) {
            self = .perform(try CallCommand(from: decoder))
            return
        }
        if let found = Self.named.first(where: { $0.name == name }) {
            self = found.command
            return
        }
        switch name {
        case "history":
            guard (try? c.decodeNil(forKey: .limit)) != true, c.contains(.limit) else { self = .history(limit: nil); return }
            guard let limit = try? c.decode(Int.self, forKey: .limit), limit > 0, limit <= Int(Int32.max) else {
                throw ControlFailure(.invalidArgument, "\"limit\" must be a positive integer")
            }
            self = .history(limit: limit)
        case "loopback":
            guard c.contains(.insertMs) else { self = .loopback(insertMs: 0); return }
            guard let ms = try? c.decode(Double.self, forKey: .insertMs), ms >= 0, ms <= 500 else {
                throw ControlFailure(.invalidArgument, "\"insert_ms\" must be a number of milliseconds, 0...500")
            }
            self = .loopback(insertMs: ms)
        case "net_loopback":
            guard let room = try? c.decode(RoomID.self, forKey: .room) else {
                throw ControlFailure(.invalidArgument, "net_loopback needs \"room\": a room id")
            }
            guard c.contains(.count) else { self = .networkLoopback(room: room, count: 200); return }
            guard let count = try? c.decode(Int.self, forKey: .count), (1...2000).contains(count) else {
                throw ControlFailure(.invalidArgument, "\"count\" must be an integer, 1...2000")
            }
            self = .networkLoopback(room: room, count: count)
        default:
            throw ControlFailure(.unknownCommand, "unknown command \"\(name.prefix(64))\"")
        }
    }
}

/// A request's `id` as the client sent it: echoed in the response.
public enum RequestID: Sendable, Equatable, Codable, CustomStringConvertible {
    case integer(Int64)
    case string(String)

    public init(from decoder: Decoder) throws {
        let c = try decoder.singleValueContainer()
        if let i = try? c.decode(Int64.self) { self = .integer(i) }
        else if let s = try? c.decode(String.self) { self = .string(s) }
        else { throw ControlFailure(.invalidArgument, "\"id\" must be an integer or a string") }
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .integer(let i): try c.encode(i)
        case .string(let s): try c.encode(s)
        }
    }

    public var description: String {
        switch self {
        case .integer(let i): "\(i)"
        case .string(let s): "\"\(s.prefix(40))\""
        }
    }
}

/// One request line, parsed. `ping` and `subscribe` are answered by the server itself.
public enum ControlRequest: Sendable, Equatable, Codable {
    case command(ControlCommand)
    case subscribe
    case ping

    private enum Keys: String, CodingKey { case cmd, id }

    public func encode(to encoder: Encoder) throws {
        switch self {
        case .command(let command): try command.encode(to: encoder)
        case .subscribe, .ping:
            var c = encoder.container(keyedBy: Keys.self)
            try c.encode(self == .ping ? "ping" : "subscribe", forKey: .cmd)
        }
    }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: Keys.self)
        switch try c.decode(String.self, forKey: .cmd) {
        case "ping": self = .ping
        case "subscribe": self = .subscribe
        default: self = .command(try ControlCommand(from: decoder))
        }
    }

    /// The request as one line with `id` (what intercomctl sends), without its newline.
    public func line(id: Int64) throws -> [UInt8] {
        try Wire.encode(Line(id: .integer(id), request: self))
    }

    /// Reads one request line as the daemon does: the id (nil when absent or unreadable, which
    /// the response then echoes as null) and the request or why it is refused, naming the member.
    public static func read(_ line: some Collection<UInt8>) -> (id: RequestID?, request: Result<ControlRequest, ControlFailure>) {
        let head: Head
        do {
            head = try Wire.decode(Head.self, from: line)
        } catch let failure as ControlFailure {
            return (nil, .failure(failure))
        } catch DecodingError.typeMismatch(_, let context) where context.codingPath.isEmpty {
            return (nil, .failure(.init(.parseError, "a request is a JSON object")))
        } catch {
            return (nil, .failure(.init(.parseError, "not a JSON object: \(Wire.describe(error).replacingOccurrences(of: "not JSON: ", with: ""))")))
        }
        do {
            return (head.id, .success(try Wire.decode(ControlRequest.self, from: line)))
        } catch let failure as ControlFailure {
            return (head.id, .failure(failure))
        } catch let unknown as CallCommand.Unknown {
            return (head.id, .failure(.init(.unknownCommand, unknown.description)))
        } catch DecodingError.keyNotFound(let key, let context) where context.codingPath.isEmpty && key.stringValue == "cmd" {
            return (head.id, .failure(.init(.invalidArgument, "missing \"cmd\"")))
        } catch DecodingError.dataCorrupted(let context) {
            return (head.id, .failure(.init(.invalidArgument, context.debugDescription)))
        } catch {
            return (head.id, .failure(.init(.invalidArgument, Wire.describe(error))))
        }
    }

    /// A request with its id, as a client writes it.
    struct Line: Encodable {
        var id: RequestID
        var request: ControlRequest
        func encode(to encoder: Encoder) throws {
            try request.encode(to: encoder)
            var c = encoder.container(keyedBy: Keys.self)
            try c.encode(id, forKey: .id)
        }
    }

    /// What is read of a line before its request: that it is an object, and its id.
    struct Head: Decodable {
        var id: RequestID?
        init(from decoder: Decoder) throws {
            let c = try decoder.container(keyedBy: Keys.self)
            id = try c.decodeIfPresent(RequestID.self, forKey: .id)
        }
    }
}

/// The response envelope: `{"id": …, "ok": true, "result": {…}}` or `{"id": …, "ok": false, "error": {…}}`.
public struct ControlResponse: Sendable, Equatable, Encodable {
    /// The request's id as sent, or nil (null on the wire) when it could not be read.
    public var id: RequestID?
    public var outcome: Result<ControlReply, ControlFailure>

    public init(id: RequestID?, outcome: Result<ControlReply, ControlFailure>) {
        self.id = id
        self.outcome = outcome
    }

    private enum Keys: String, CodingKey { case id, ok, result, error }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: Keys.self)
        try c.encode(id, forKey: .id)
        switch outcome {
        case .success(let reply):
            try c.encode(true, forKey: .ok)
            try c.encode(reply, forKey: .result)
        case .failure(let failure):
            try c.encode(false, forKey: .ok)
            try c.encode(failure, forKey: .error)
        }
    }

    /// Reads a response line to `request` (its result has that request's shape). Throws
    /// `ControlClientError.protocolViolation` naming what does not fit.
    public static func read(_ line: some Collection<UInt8>, to request: ControlRequest) throws(ControlClientError) -> ControlResponse {
        do {
            return try Wire.decode(Reading.self, from: line, userInfo: [ControlReply.requestKey: request]).response
        } catch {
            throw .protocolViolation("not a response to \(Self.name(request)): \(Wire.describe(error))")
        }
    }

    private static func name(_ request: ControlRequest) -> String {
        (try? Wire.decode(Peek.self, from: Wire.encode(request)).cmd) ?? "the request"
    }

    private struct Reading: Decodable {
        var response: ControlResponse
        init(from decoder: Decoder) throws {
            let c = try decoder.container(keyedBy: Keys.self)
            let id = try c.decodeIfPresent(RequestID.self, forKey: .id)
            if try c.decode(Bool.self, forKey: .ok) {
                response = ControlResponse(id: id, outcome: .success(try c.decode(ControlReply.self, forKey: .result)))
            } else {
                response = ControlResponse(id: id, outcome: .failure(try c.decode(ControlFailure.self, forKey: .error)))
            }
        }
    }

    /// Enough of any line from the daemon to tell an event from a response.
    struct Peek: Decodable {
        var cmd: String?
        var event: String?
        var ok: Bool?
    }
}

/// One line of the event stream as a client reads it.
public enum ControlEvent: Sendable, Equatable, Codable {
    case call(CallEvent)
    /// The daemon's event queue overflowed and this many events were not delivered.
    case eventsLost(Int)

    private enum Keys: String, CodingKey { case event, count }

    public func encode(to encoder: Encoder) throws {
        switch self {
        case .call(let event): try event.encode(to: encoder)
        case .eventsLost(let count):
            var c = encoder.container(keyedBy: Keys.self)
            try c.encode("events_lost", forKey: .event)
            try c.encode(count, forKey: .count)
        }
    }

    /// Throws `CallEvent.Unknown` for a newer daemon's event.
    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: Keys.self)
        if try c.decode(String.self, forKey: .event) == "events_lost" {
            self = .eventsLost(try c.decode(Int.self, forKey: .count))
        } else {
            self = .call(try CallEvent(from: decoder))
        }
    }

    /// Whether a line from the daemon is an event (not a response).
    public static func isEvent(_ line: some Collection<UInt8>) -> Bool {
        (try? Wire.decode(ControlResponse.Peek.self, from: line))?.event != nil
    }
}
