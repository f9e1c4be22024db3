import Calls
import Posix
import Foundation

/// A blocking connection to the control socket, for intercomctl and tests: one request at a time,
/// then (after subscribe) a stream of event lines.
public final class ControlClient {
    public let path: String
    /// Seconds to wait for connect and for each response.
    public let timeout: Double
    private let socket: UnixSocket
    private var input: [UInt8] = []
    /// Bytes of `input` already returned as lines.
    private var inputStart = 0
    private var chunk = [UInt8](repeating: 0, count: 64 * 1024)
    private var receiveTimeout: Double?
    /// Event lines that arrived while waiting for a response.
    private var pendingLines: [String] = []
    private var nextID: Int64 = 1
    /// A line this long from the daemon is not the protocol (a history answer is far shorter).
    private static let maxLineBytes = 16 << 20

    public init(path: String, timeout: Double) throws(ControlClientError) {
        self.path = path
        self.timeout = timeout
        do {
            socket = try UnixSocket.connect(path: path, timeout: timeout)
        } catch {
            throw .unreachable(path: path, reason: error.reason)
        }
    }

    /// Sends `request` and waits for its response; returns it with the raw line (for --json).
    public func send(_ request: ControlRequest) throws(ControlClientError) -> (response: ControlResponse, line: String) {
        let id = nextID
        nextID += 1
        guard let line = try? request.line(id: id) else { throw .protocolViolation("request could not be encoded") }
        try write(line + [UInt8(ascii: "\n")])
        while true {
            guard let text = try readRawLine(timeout: timeout) else { throw .closed(path: path, reason: nil) }
            if ControlEvent.isEvent(Array(text.utf8)) {
                pendingLines.append(text)
                continue
            }
            let response = try ControlResponse.read(Array(text.utf8), to: request)
            // The server answers a line it could not read with id null (e.g. too many clients).
            guard response.id == .integer(id) || response.id == nil else {
                throw .protocolViolation("response for id \(text.prefix(40)) while waiting for \(id)")
            }
            return (response, text)
        }
    }

    /// Runs a command and returns the daemon's reply or refusal.
    public func run(_ command: ControlCommand) throws(ControlClientError) -> Result<ControlReply, ControlFailure> {
        try send(.command(command)).response.outcome
    }

    /// The next event after subscribe (nil when the daemon closed the connection); a line that is
    /// not an event this version knows is a protocol violation.
    public func readEvent(timeout: Double?) throws(ControlClientError) -> ControlEvent? {
        guard let line = try readLine(timeout: timeout) else { return nil }
        do {
            return try Wire.decode(ControlEvent.self, from: Array(line.utf8))
        } catch {
            throw .protocolViolation("not an event: \(Wire.describe(error)): \(line.prefix(200))")
        }
    }

    /// The next line from the daemon (an event after subscribe), without its newline; nil when the
    /// daemon closed the connection. `timeout` nil waits for ever.
    public func readLine(timeout: Double?) throws(ControlClientError) -> String? {
        if !pendingLines.isEmpty { return pendingLines.removeFirst() }
        return try readRawLine(timeout: timeout)
    }

    /// Sends `text` and a newline as they are (tools and tests speaking the protocol by hand).
    public func sendLine(_ text: String) throws(ControlClientError) {
        try write(Array(text.utf8) + [UInt8(ascii: "\n")])
    }

    public func close() { socket.close() }

    private func write(_ bytes: [UInt8]) throws(ControlClientError) {
        var sent = 0
        while sent < bytes.count {
            let result = bytes.withUnsafeBytes { socket.send(UnsafeRawBufferPointer(rebasing: $0[sent...])) }
            switch result {
            case .done(let n): sent += n
            case .wouldBlock: throw .timedOut(path: path, seconds: timeout)
            case .endOfStream: throw .closed(path: path, reason: nil)
            case .failed(let code): throw .closed(path: path, reason: code.description)
            }
        }
    }

    private func readRawLine(timeout: Double?) throws(ControlClientError) -> String? {
        let deadline = timeout.map { ProcessInfo.processInfo.systemUptime + $0 }
        var searched = inputStart
        while true {
            if let newline = input[searched...].firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: input[inputStart..<newline], as: UTF8.self)
                inputStart = newline + 1
                if inputStart == input.count { input.removeAll(keepingCapacity: true); inputStart = 0 }
                return line
            }
            searched = input.count
            guard input.count - inputStart <= Self.maxLineBytes else { throw .protocolViolation("a line longer than \(Self.maxLineBytes) bytes") }
            if inputStart > 0 {
                input.removeSubrange(..<inputStart)
                searched -= inputStart
                inputStart = 0
            }
            var wait = 0.0  // 0: for ever
            if let deadline {
                wait = deadline - ProcessInfo.processInfo.systemUptime
                guard wait > 0 else { throw .timedOut(path: path, seconds: timeout ?? 0) }
            }
            if wait != receiveTimeout {
                socket.setReceiveTimeout(wait)
                receiveTimeout = wait
            }
            let result = chunk.withUnsafeMutableBytes { socket.receive(into: $0) }
            switch result {
            case .done(let n): input.append(contentsOf: chunk[..<n])
            case .wouldBlock: throw .timedOut(path: path, seconds: timeout ?? 0)
            case .endOfStream:
                guard input.isEmpty else { throw .closed(path: path, reason: "in the middle of a line") }
                return nil
            case .failed(let code):
                throw .closed(path: path, reason: code.description)
            }
        }
    }
}
