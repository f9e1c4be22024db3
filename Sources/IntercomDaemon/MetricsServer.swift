import Control
import Foundation
import Logging
import MetricsText
import Posix
import Synchronization

/// Answers `GET /metrics` in Prometheus's text format (`TerminalMetrics`, docs/metrics.md) from an
/// ordinary thread with one poller; the audio thread is never touched (a scrape reads the same
/// atomics `intercomctl stats` reads). A few lines of HTTP/1.1 of our own rather than an HTTP
/// library: the daemon stays free of an event loop and its threads for one read-only page a
/// minute. Every connection is non-blocking and bounded in time, size and number, so a scraper
/// that stalls or floods holds up nobody else; each refusal is counted and shown in the metrics.
final class MetricsServer: @unchecked Sendable {
    // @unchecked: `connections` belong to the server thread once started; counts are atomics.
    struct Settings: Sendable {
        var connections = 8
        /// A request not read and answered by then is dropped.
        var timeout = 5.0
        /// The largest request head read.
        var maxRequest = 8192
    }

    /// How requests ended, as `intercom_metrics_requests_total{outcome}` shows them.
    enum Outcome: String, CaseIterable {
        case served, unauthorized = "unauthorized", notFound = "not_found", badRequest = "bad_request", timedOut = "timed_out", busy
    }

    private final class Connection {
        let socket: TCPSocket
        let deadline: Double
        var input: [UInt8] = []
        var output: [UInt8] = []
        var written = 0
        init(socket: TCPSocket, deadline: Double) {
            self.socket = socket
            self.deadline = deadline
        }
        var done: Bool { !output.isEmpty && written == output.count }
    }

    let listener: TCPSocket
    private let settings: Settings
    private let token: [UInt8]?
    private let snapshot: @Sendable () -> DaemonStatistics
    private let identity: TerminalMetrics.Identity
    private let log: Logger
    private let stop: StopSignal
    private var thread: WorkerThread?
    private var connections: [Connection] = []
    private let counts = Mutex([Outcome: Int]())

    /// - Parameter token: the bearer token a scraper must send; nil: none asked.
    init(listen: IPv4Endpoint, token: [UInt8]?, identity: TerminalMetrics.Identity, settings: Settings = Settings(), logger: Logger,
         snapshot: @escaping @Sendable () -> DaemonStatistics) throws(SystemError) {
        listener = try TCPSocket.listen(listen, backlog: 16)
        self.token = token
        self.identity = identity
        self.settings = settings
        self.snapshot = snapshot
        log = logger
        stop = try StopSignal()
    }

    /// The token in `path`: its first line, which must be readable by the daemon's user alone.
    static func readToken(_ path: String) throws(ConfigError) -> [UInt8] {
        func problem(_ text: String) -> ConfigError {
            ConfigError(source: "configuration", issues: [ConfigIssue(key: "metrics.token_file", problem: "\(path): \(text)")])
        }
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
              let mode = (attributes[.posixPermissions] as? NSNumber)?.intValue,
              let text = try? String(contentsOfFile: path, encoding: .utf8) else { throw problem("cannot be read") }
        guard mode & 0o077 == 0 else { throw problem("others may read it (mode \(String(mode, radix: 8))); chmod 600 it") }
        let token = text.split(whereSeparator: \.isNewline).first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
        guard token.count >= 16 else { throw problem("holds no token of at least 16 characters") }
        return Array(token.utf8)
    }

    func requests() -> [Outcome: Int] { counts.withLock { $0 } }

    func start() throws(SystemError) {
        let t = WorkerThread(name: "metrics") { [self] in run() }
        try t.start()
        thread = t
    }

    func stopAndJoin() {
        stop.set()
        thread?.join()
        thread = nil
    }

    private func count(_ outcome: Outcome) { counts.withLock { $0[outcome, default: 0] += 1 } }

    private func run() {
        var poller = Poller()
        var chunk = [UInt8](repeating: 0, count: 4096)
        while !stop.isSet {
            poller.reset()
            poller.add(stop.bell.descriptor, read: true, write: false)
            let listening = poller.add(listener.descriptor, read: true, write: false)
            for c in connections { poller.add(c.socket.descriptor, read: c.output.isEmpty, write: !c.output.isEmpty) }
            do {
                try poller.wait(timeoutMs: connections.isEmpty ? -1 : 100)
            } catch {
                log.error("metrics: \(error); no more metrics are served")
                break
            }
            let now = MonotonicClock.seconds()
            for (i, c) in connections.enumerated() {
                let ready = poller.events(at: listening + 1 + i)
                if c.output.isEmpty, ready.readable || ready.broken { read(c, into: &chunk) }
                if !c.output.isEmpty { write(c) }
            }
            if poller.events(at: listening).readable { acceptAll(now: now) }
            for c in connections where now >= c.deadline && !c.done { count(.timedOut) }
            connections.removeAll { $0.done || now >= $0.deadline }
        }
        connections.removeAll()
    }

    private func acceptAll(now: Double) {
        while true {
            guard let accepted = try? listener.accept() else { return }
            let c = Connection(socket: accepted.socket, deadline: now + settings.timeout)
            connections.append(c)
            if connections.count > settings.connections { answer(c, .busy) }
        }
    }

    private func read(_ c: Connection, into chunk: inout [UInt8]) {
        while c.output.isEmpty {
            switch chunk.withUnsafeMutableBytes({ c.socket.receive(into: $0) }) {
            case .done(let n):
                c.input += chunk[..<n]
                if let end = Self.headEnd(c.input) {
                    answer(c, judge(Array(c.input[..<end])))
                } else if c.input.count > settings.maxRequest {
                    answer(c, .badRequest)
                }
            case .wouldBlock: return
            case .endOfStream, .failed:
                count(.badRequest)
                c.output = [0]
                c.written = 1  // the client left: nothing to write
                return
            }
        }
    }

    private static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for i in 0...(bytes.count - 4) where bytes[i] == 13 && bytes[i + 1] == 10 && bytes[i + 2] == 13 && bytes[i + 3] == 10 { return i }
        return nil
    }

    /// What a request head deserves: the metrics, or why not.
    private func judge(_ head: [UInt8]) -> Outcome {
        let lines = String(decoding: head, as: UTF8.self).split(separator: "\r\n", omittingEmptySubsequences: false)
        let request = lines.first?.split(separator: " ") ?? []
        guard request.count == 3, request[2].hasPrefix("HTTP/1.") else { return .badRequest }
        guard request[0] == "GET" || request[0] == "HEAD" else { return .badRequest }
        let path = request[1].split(separator: "?", maxSplits: 1).first ?? ""
        guard path == "/metrics" else { return .notFound }
        if let token {
            let sent = lines.dropFirst().first { $0.lowercased().hasPrefix("authorization:") }
                .map { $0.dropFirst("authorization:".count).trimmingCharacters(in: .whitespaces) }
            guard let sent, sent.lowercased().hasPrefix("bearer "), Self.equal(Array(sent.dropFirst(7).utf8), token) else { return .unauthorized }
        }
        return .served
    }

    /// Compares without stopping at the first difference (the time taken tells nothing of the token).
    private static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        var diff = UInt8(a.count == b.count ? 0 : 1)
        for i in 0..<min(a.count, b.count) { diff |= a[i] ^ b[i] }
        return diff == 0
    }

    private func answer(_ c: Connection, _ outcome: Outcome) {
        count(outcome)
        let status: String, type: String, body: [UInt8]
        var extra = ""
        switch outcome {
        case .served:
            let requests = requests()
            body = TerminalMetrics.exposition(snapshot(), identity: identity,
                                              requests: Outcome.allCases.map { ($0.rawValue, requests[$0] ?? 0) })
            (status, type) = ("200 OK", "text/plain; version=0.0.4; charset=utf-8")
        case .unauthorized:
            (status, type, body) = ("401 Unauthorized", "text/plain; charset=utf-8", Array("a bearer token is required\n".utf8))
            extra = "WWW-Authenticate: Bearer\r\n"
        case .notFound: (status, type, body) = ("404 Not Found", "text/plain; charset=utf-8", Array("only /metrics is here\n".utf8))
        case .badRequest: (status, type, body) = ("400 Bad Request", "text/plain; charset=utf-8", Array("expected GET /metrics HTTP/1.1\n".utf8))
        case .busy: (status, type, body) = ("503 Service Unavailable", "text/plain; charset=utf-8", Array("too many scrapers at once\n".utf8))
        case .timedOut: (status, type, body) = ("408 Request Timeout", "text/plain; charset=utf-8", [])
        }
        c.output = Array("HTTP/1.1 \(status)\r\nContent-Type: \(type)\r\nContent-Length: \(body.count)\r\n\(extra)Connection: close\r\n\r\n".utf8) + body
        write(c)
    }

    private func write(_ c: Connection) {
        while c.written < c.output.count {
            let r = c.output.withUnsafeBytes { c.socket.send(UnsafeRawBufferPointer(rebasing: $0[c.written...])) }
            switch r {
            case .done(let n): c.written += n
            case .wouldBlock: return
            case .endOfStream, .failed:
                c.written = c.output.count
                return
            }
        }
    }
}
