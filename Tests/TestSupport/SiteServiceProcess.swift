import Calls
import Foundation
import Glibc

/// The built `intercom-site serve` as a child process on loopback, with its site folder, and curl
/// (a second TLS stack, checking the certificate against the site's authority) as its client.
public final class SiteServiceProcess {
    public let dir: String
    public private(set) var port = 0
    private var process: Process?

    public static var binary: String { Repo.builtProgram("intercom-site") }

    /// One HTTP reply: its status and body.
    public struct Reply {
        public var status: Int
        public var body: Data
        public func decode<T: Decodable>(_ type: T.Type) throws -> T { try Wire.decode(T.self, from: body) }
        public var text: String { String(decoding: body, as: UTF8.self) }
    }

    public init(dir: String) { self.dir = dir }

    deinit { stop() }

    /// Runs a program (a path, or a name looked up in PATH) in the site folder, with `input` on
    /// its standard input.
    public static func run(_ arguments: [String], input: String? = nil, in directory: String? = nil) throws -> (status: Int32, out: String, err: String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: arguments[0].hasPrefix("/") ? arguments[0] : "/usr/bin/env")
        p.arguments = arguments[0].hasPrefix("/") ? Array(arguments.dropFirst()) : arguments
        if let directory { p.currentDirectoryURL = URL(fileURLWithPath: directory) }
        let out = Pipe(), err = Pipe(), inp = Pipe()
        p.standardOutput = out
        p.standardError = err
        p.standardInput = inp
        try p.run()
        if let input { inp.fileHandleForWriting.write(Data(input.utf8)) }
        try inp.fileHandleForWriting.close()
        let o = out.fileHandleForReading.readDataToEndOfFile(), e = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return (p.terminationStatus, String(decoding: o, as: UTF8.self), String(decoding: e, as: UTF8.self))
    }

    /// `intercom-site account add NAME --role ROLE` with its password on standard input.
    @discardableResult
    public func addAccount(_ name: String, role: String, password: String) throws -> (status: Int32, out: String, err: String) {
        try Self.run([Self.binary, "account", "add", name, "--role", role, "--dir", dir], input: password + "\n")
    }

    /// Starts the service and waits until it listens (the port it writes to listening.json).
    /// `member`: the control socket of the terminal it takes part in signalling through.
    public func start(member: String? = nil) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Self.binary)
        p.arguments = ["serve", "--dir", dir, "--host", "127.0.0.1", "--port", "0", "--name", "127.0.0.1", "--name", "localhost"]
            + (member.map { ["--member", $0] } ?? [])
        FileManager.default.createFile(atPath: logPath, contents: nil)
        p.standardError = FileHandle(forWritingAtPath: logPath)
        try p.run()
        process = p
        let listening = "\(dir)/service/listening.json"
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline, p.isRunning {
            if let data = FileManager.default.contents(atPath: listening),
               let object = try? JSONSerialization.jsonObject(with: data) as? [String: Int], let port = object["port"] {
                self.port = port
                return
            }
            usleep(50_000)
        }
        throw NSError(domain: "serve", code: 1, userInfo: [NSLocalizedDescriptionKey: "intercom-site serve did not start"])
    }

    /// SIGTERM, and waits for it to end; the seconds that took.
    @discardableResult
    public func stop() -> Double {
        guard let p = process, p.isRunning else { return 0 }
        let t0 = Date()
        p.terminate()
        p.waitUntilExit()
        ended = "\(p.terminationReason == .uncaughtSignal ? "signal" : "exit") \(p.terminationStatus)"
        return Date().timeIntervalSince(t0)
    }

    public var isRunning: Bool { process?.isRunning ?? false }
    /// How it ended, once `stop` saw it end.
    public private(set) var ended: String?
    public var pid: Int32 { process?.processIdentifier ?? 0 }
    /// What the service wrote to its standard error.
    public var logPath: String { "\(dir)/service.log" }
    public var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// One request with curl; `cookies` is a cookie jar file read and written.
    public func request(_ method: String, _ path: String, json: String? = nil, cookies: String? = nil, headers: [String] = [],
                        extra: [String] = []) throws -> Reply {
        var args = ["curl", "-sS", "--max-time", "20", "--cacert", "\(dir)/service/tls/ca.pem", "-X", method,
                    "-o", "\(dir)/body", "-w", "%{http_code}"] + extra
        if let cookies { args += ["-b", cookies, "-c", cookies] }
        if let json { args += ["-H", "Content-Type: application/json", "--data-binary", json] }
        for h in headers { args += ["-H", h] }
        args.append("https://127.0.0.1:\(port)\(path)")
        let r = try Self.run(args)
        guard r.status == 0, let code = Int(r.out) else { throw NSError(domain: "curl", code: Int(r.status), userInfo: [NSLocalizedDescriptionKey: r.err]) }
        return Reply(status: code, body: (try? Data(contentsOf: URL(fileURLWithPath: "\(dir)/body"))) ?? Data())
    }

    /// An event stream (`GET /api/v1/events`) read by curl into a file until `stop`.
    public final class EventStream {
        public let file: String
        private let process: Process
        init(file: String, process: Process) {
            self.file = file
            self.process = process
        }
        public struct Event: Equatable {
            public var id: UInt64?
            public var name: String
            public var data: String
        }
        /// Whether the service has answered (its first line, `retry:`, arrived).
        public var opened: Bool { ((try? String(contentsOfFile: file, encoding: .utf8)) ?? "").hasPrefix("retry:") }
        /// The events written so far (comments left out).
        public var events: [Event] {
            let text = (try? String(contentsOfFile: file, encoding: .utf8)) ?? ""
            return text.components(separatedBy: "\n\n").compactMap { block in
                var e = Event(id: nil, name: "message", data: "")
                var any = false
                for line in block.split(separator: "\n") where !line.hasPrefix(":") {
                    if line.hasPrefix("id: ") { e.id = UInt64(line.dropFirst(4)); any = true }
                    if line.hasPrefix("event: ") { e.name = String(line.dropFirst(7)); any = true }
                    if line.hasPrefix("data: ") { e.data = String(line.dropFirst(6)); any = true }
                }
                return any && !e.data.isEmpty ? e : nil
            }
        }
        public func stop() {
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
        }
    }

    /// Opens the event stream with `token` (a bearer secret), resuming after `lastEventID`.
    public func events(token: String, lastEventID: UInt64? = nil, name: String = "events") throws -> EventStream {
        let file = "\(dir)/\(name).sse"
        FileManager.default.createFile(atPath: file, contents: nil)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        p.arguments = ["-sS", "-N", "--cacert", "\(dir)/service/tls/ca.pem", "-H", "Authorization: Bearer \(token)", "-o", file]
            + (lastEventID.map { ["-H", "Last-Event-ID: \($0)"] } ?? []) + ["https://127.0.0.1:\(port)/api/v1/events"]
        p.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try p.run()
        return EventStream(file: file, process: p)
    }

    /// A logged-in person: the cookie jar and the session's cross-site token, for `request`.
    public struct Session {
        public let jar: String
        public let csrf: String
        public var headers: [String] { ["X-CSRF-Token: \(csrf)"] }
    }

    private struct LoginReply: Decodable { var csrfToken: String }

    /// Logs in as `name`; nil when refused.
    public func login(_ name: String, password: String) throws -> Session? {
        let jar = "\(dir)/\(name).cookies"
        let body = String(decoding: try JSONSerialization.data(withJSONObject: ["name": name, "password": password]), as: UTF8.self)
        let reply = try request("POST", "/api/v1/session", json: body, cookies: jar)
        guard reply.status == 200, let csrf = try? reply.decode(LoginReply.self).csrfToken else { return nil }
        return Session(jar: jar, csrf: csrf)
    }

    /// Makes an API token named `name` with `scopes` as `session` (a manager); its secret.
    public func token(_ name: String, scopes: [String], as session: Session) throws -> String {
        struct Made: Decodable { var secret: String }
        let body = String(decoding: try JSONSerialization.data(withJSONObject: ["name": name, "scopes": scopes]), as: UTF8.self)
        return try request("POST", "/api/v1/tokens", as: session, json: body).decode(Made.self).secret
    }

    /// `request` under a session: its cookie and, for a change, its cross-site token.
    public func request(_ method: String, _ path: String, as session: Session, json: String? = nil) throws -> Reply {
        try request(method, path, json: json, cookies: session.jar, headers: session.headers)
    }
}
