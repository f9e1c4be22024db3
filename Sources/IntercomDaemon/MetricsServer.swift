import Control
import Foundation
import Logging
import MetricsText
import Posix
import Synchronization

/// Answers `GET /metrics` in Prometheus's text format (`TerminalMetrics`, docs/metrics.md) from an
/// `ExchangeServer`: an ordinary thread with one poller; the audio thread is never touched (a
/// scrape reads the same atomics `intercomctl stats` reads). A few lines of HTTP/1.1 of our own
/// rather than an HTTP library: the daemon stays free of an event loop and its threads for one
/// read-only page a minute. Each refusal is counted and shown in the metrics.
final class MetricsServer: Service {
    var serviceName: String { "metrics" }
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

    /// Requests by outcome, shared by the server's thread and `requests()`.
    private final class Counts: Sendable {
        private let counts = Mutex([Outcome: Int]())
        func add(_ outcome: Outcome) { counts.withLock { $0[outcome, default: 0] += 1 } }
        func read() -> [Outcome: Int] { counts.withLock { $0 } }
    }

    private let server: ExchangeServer
    private let counts: Counts

    /// - Parameter token: the bearer token a scraper must send; nil: none asked.
    init(listen: IPv4Endpoint, token: [UInt8]?, identity: TerminalMetrics.Identity, settings: Settings = Settings(), logger: Logger,
         snapshot: @escaping @Sendable () -> DaemonStatistics) throws(SystemError) {
        let counts = Counts()
        self.counts = counts
        let page = MetricsPage(token: token, maxRequest: settings.maxRequest) { outcome in
            counts.add(outcome)
            guard outcome == .served else { return [] }
            let requests = counts.read()
            return TerminalMetrics.exposition(snapshot(), identity: identity,
                                              requests: Outcome.allCases.map { ($0.rawValue, requests[$0] ?? 0) })
        }
        server = try ExchangeServer(
            listener: try TCPSocket.listen(listen, backlog: 16), name: "metrics",
            settings: .init(connections: settings.connections, timeout: settings.timeout, maxRequest: settings.maxRequest),
            handler: .init(
                request: { input, _ in page.step(input) },
                busy: { page.reply(.busy) },
                refused: { _, why in
                    counts.add(why == .timedOut ? .timedOut : .badRequest)
                },
                fault: { logger.error("metrics: \($0)") }))
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

    func requests() -> [Outcome: Int] { counts.read() }

    func start() throws(SystemError) { try server.start() }
    func stop() { server.stop() }
}

/// What a request to the metrics server is answered; runs on the server's thread.
private struct MetricsPage: Sendable {
    let token: [UInt8]?
    let maxRequest: Int
    /// Counts the outcome; for `.served`, the metrics text.
    let body: @Sendable (MetricsServer.Outcome) -> [UInt8]

    func step(_ input: [UInt8]) -> ExchangeServer.Step {
        if let end = Self.headEnd(input) { return .reply(reply(judge(Array(input[..<end])))) }
        return input.count > maxRequest ? .reply(reply(.badRequest)) : .readMore
    }

    private static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for i in 0...(bytes.count - 4) where bytes[i] == 13 && bytes[i + 1] == 10 && bytes[i + 2] == 13 && bytes[i + 3] == 10 { return i }
        return nil
    }

    /// What a request head deserves: the metrics, or why not.
    private func judge(_ head: [UInt8]) -> MetricsServer.Outcome {
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

    func reply(_ outcome: MetricsServer.Outcome) -> [UInt8] {
        let counted = body(outcome)
        let status: String, type: String, payload: [UInt8]
        var extra = ""
        switch outcome {
        case .served: (status, type, payload) = ("200 OK", "text/plain; version=0.0.4; charset=utf-8", counted)
        case .unauthorized:
            (status, type, payload) = ("401 Unauthorized", "text/plain; charset=utf-8", Array("a bearer token is required\n".utf8))
            extra = "WWW-Authenticate: Bearer\r\n"
        case .notFound: (status, type, payload) = ("404 Not Found", "text/plain; charset=utf-8", Array("only /metrics is here\n".utf8))
        case .badRequest: (status, type, payload) = ("400 Bad Request", "text/plain; charset=utf-8", Array("expected GET /metrics HTTP/1.1\n".utf8))
        case .busy: (status, type, payload) = ("503 Service Unavailable", "text/plain; charset=utf-8", Array("too many scrapers at once\n".utf8))
        case .timedOut: (status, type, payload) = ("408 Request Timeout", "text/plain; charset=utf-8", [])
        }
        return Array("HTTP/1.1 \(status)\r\nContent-Type: \(type)\r\nContent-Length: \(payload.count)\r\n\(extra)Connection: close\r\n\r\n".utf8) + payload
    }
}
