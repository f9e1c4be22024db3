import Calls
import Foundation
import FoundationXML
import Glibc
@testable import SiteService
import TestSupport
import XCTest

/// The site service through its real path: `intercom-site serve` (the built program) over TLS
/// on loopback, its certificate authority made on first start, and curl (another TLS stack) as
/// the client that checks it. Logins, the cross-site token, roles, API tokens, problem
/// documents, the login limit and the audit log, each read from the typed replies.
final class SiteServiceHTTPSTests: XCTestCase {
    static var binary: String {
        let dir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        let candidate = dir.appendingPathComponent("intercom-site").path
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        return dir.deletingLastPathComponent().appendingPathComponent("intercom-site").path
    }

    struct Reply {
        var status: Int
        var body: Data
        func decode<T: Decodable>(_ type: T.Type) throws -> T { try Wire.decode(T.self, from: body) }
        var problem: ProblemDocument? { try? decode(ProblemDocument.self) }
        var text: String { String(decoding: body, as: UTF8.self) }
    }

    private var dir = ""
    private var server: Process?
    private var port = 0

    override func setUpWithError() throws {
        dir = NSTemporaryDirectory() + "site-https-\(getpid())-\(UInt32.random(in: .min ... .max))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        if let server, server.isRunning { server.terminate(); server.waitUntilExit() }
        try? FileManager.default.removeItem(atPath: dir)
    }

    private func run(_ arguments: [String], input: String? = nil) throws -> (status: Int32, out: String, err: String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: arguments[0].hasPrefix("/") ? arguments[0] : "/usr/bin/env")
        p.arguments = arguments[0].hasPrefix("/") ? Array(arguments.dropFirst()) : arguments
        // In the test's folder: schemathesis keeps a cache in its working directory.
        p.currentDirectoryURL = URL(fileURLWithPath: dir)
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

    /// One request with curl, checking the server's certificate against the site's authority.
    private func request(_ method: String, _ path: String, json: String? = nil, cookies: String? = nil, headers: [String] = [],
                         extra: [String] = []) throws -> Reply {
        var args = ["curl", "-sS", "--max-time", "10", "--cacert", "\(dir)/service/tls/ca.pem", "-X", method,
                    "-o", "\(dir)/body", "-w", "%{http_code}"] + extra
        if let cookies { args += ["-b", cookies, "-c", cookies] }
        if let json { args += ["-H", "Content-Type: application/json", "--data-binary", json] }
        for h in headers { args += ["-H", h] }
        args.append("https://127.0.0.1:\(port)\(path)")
        let r = try run(args)
        guard r.status == 0, let code = Int(r.out) else { throw NSError(domain: "curl", code: Int(r.status), userInfo: [NSLocalizedDescriptionKey: r.err]) }
        return Reply(status: code, body: (try? Data(contentsOf: URL(fileURLWithPath: "\(dir)/body"))) ?? Data())
    }

    private func startServer() throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Self.binary)
        p.arguments = ["serve", "--dir", dir, "--host", "127.0.0.1", "--port", "0", "--name", "127.0.0.1", "--name", "localhost"]
        p.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try p.run()
        server = p
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

    /// Schemathesis (PyPI, in .venv-api) generates requests from the OpenAPI document the service
    /// serves, good and bad, logged in as a manager: no reply is a server error, and every reply's
    /// status, content type and body are the document's. Read from its JUnit report.
    func testSchemathesisFindsNoServerErrorAndNoReplyOutsideTheDocument() throws {
        let st = Repo.root + "/.venv-api/bin/st"
        XCTAssertTrue(FileManager.default.isExecutableFile(atPath: st), "scripts/setup.sh installs schemathesis into .venv-api")
        XCTAssertEqual(try run([Self.binary, "account", "add", "anna", "--role", "manager", "--dir", dir], input: "Empfang-2026!\n").status, 0)
        try startServer()
        let served = try request("GET", "/api/v1/openapi.yaml")
        XCTAssertEqual(served.status, 200)
        let kept = try Data(contentsOf: URL(fileURLWithPath: Repo.root + "/Sources/SiteService/Resources/openapi.yaml"))
        XCTAssertEqual(served.body, kept, "the document served is the one in the repository")
        let unknown = try request("GET", "/api/v1/nothing-here")
        XCTAssertEqual(unknown.status, 404)
        XCTAssertEqual(unknown.problem?.status, 404, "the router's own refusals are problem documents too")

        let jar = "\(dir)/anna.cookies"
        let login = try request("POST", "/api/v1/session", json: #"{"name":"anna","password":"Empfang-2026!"}"#, cookies: jar)
        let csrf = try XCTUnwrap(try login.decode(SiteServer.SessionInfo.self).csrfToken)
        let cookie = try XCTUnwrap(try String(contentsOfFile: jar, encoding: .utf8).split(separator: "\n")
            .first { $0.contains(SiteServer.sessionCookie) }?.split(separator: "\t").last)
        let report = "\(dir)/schemathesis.xml"
        let base = "https://127.0.0.1:\(port)/api/v1"
        let result = try run([st, "run", "\(base)/openapi.yaml", "--url", base, "--tls-verify", "\(dir)/service/tls/ca.pem",
                              "-H", "Cookie: \(SiteServer.sessionCookie)=\(cookie)", "-H", "X-CSRF-Token: \(csrf)",
                              "--exclude-operation-id", "logout",
                              "--checks", "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance",
                              "--max-examples", "30", "--seed", "54", "--no-color",
                              "--report", "junit", "--report-junit-path", report])
        print(result.out.split(separator: "\n").suffix(25).joined(separator: "\n"))
        XCTAssertEqual(result.status, 0, "schemathesis found failures:\n\(result.out.suffix(4000))\(result.err.suffix(2000))")
        let xml = try XMLDocument(contentsOf: URL(fileURLWithPath: report))
        let cases = try xml.nodes(forXPath: "//testcase")
        let failed = try xml.nodes(forXPath: "//testcase[failure or error]")
        print("schemathesis: \(cases.count) operations tested, \(failed.count) with failures")
        XCTAssertGreaterThanOrEqual(cases.count, 9, "every operation but logout was tested")
        XCTAssertEqual(failed.count, 0)
    }

    func testLoginRolesTokensAndRefusalsOverTLS() throws {
        XCTAssertEqual(try run([Self.binary, "account", "add", "anna", "--role", "manager", "--dir", dir], input: "Empfang-2026!\n").status, 0)
        XCTAssertEqual(try run([Self.binary, "account", "add", "vera", "--role", "viewer", "--dir", dir], input: "Wartezimmer-7\n").status, 0)
        let short = try run([Self.binary, "account", "add", "otto", "--dir", dir], input: "kurz\n")
        XCTAssertEqual(short.status, 1)
        XCTAssertTrue(short.err.contains("password"), short.err)
        try startServer()
        var st = stat()
        XCTAssertEqual(stat("\(dir)/service/tls/server.key", &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o600, "the service's private key is owner-only")

        // The certificate is checked by curl against the site's own authority; old TLS is refused.
        let health = try request("GET", "/api/v1/health")
        XCTAssertEqual(health.status, 200)
        XCTAssertEqual(try health.decode(SiteServer.Health.self).software, Software.version)
        XCTAssertThrowsError(try request("GET", "/api/v1/health", extra: ["--tlsv1.0", "--tls-max", "1.1"]), "TLS 1.1 is refused")
        XCTAssertEqual(try request("GET", "/api/v1/health", extra: ["--tlsv1.2", "--tls-max", "1.2"]).status, 200, "TLS 1.2 is taken")
        let untrusted = try run(["curl", "-sS", "--max-time", "5", "https://127.0.0.1:\(port)/api/v1/health"])
        XCTAssertNotEqual(untrusted.status, 0, "without the site's authority the certificate is not trusted")

        // Nobody logged in: refused with a problem document.
        let anonymous = try request("GET", "/api/v1/accounts")
        XCTAssertEqual(anonymous.status, 401)
        XCTAssertEqual(anonymous.problem?.status, 401)

        // A wrong password, then the right one.
        let jar = "\(dir)/anna.cookies"
        let wrong = try request("POST", "/api/v1/session", json: #"{"name":"anna","password":"Empfang-2025!"}"#, cookies: jar)
        XCTAssertEqual(wrong.status, 401)
        XCTAssertEqual(wrong.problem?.title, "Wrong name or password")
        let login = try request("POST", "/api/v1/session", json: #"{"name":"anna","password":"Empfang-2026!"}"#, cookies: jar)
        XCTAssertEqual(login.status, 200, login.text)
        let session = try login.decode(SiteServer.SessionInfo.self)
        XCTAssertEqual(session.role, .manager)
        let csrf = try XCTUnwrap(session.csrfToken)
        XCTAssertTrue(try String(contentsOfFile: jar, encoding: .utf8).contains("#HttpOnly_127.0.0.1"), "the session cookie is HttpOnly")

        // A change without the session's cross-site token is refused; with it, done.
        let forged = try request("POST", "/api/v1/tokens", json: #"{"name":"Praxissoftware","scopes":["notify"]}"#, cookies: jar)
        XCTAssertEqual(forged.status, 403, forged.text)
        let bad = try request("POST", "/api/v1/tokens", json: #"{"name":"Praxissoftware","scopes":["fly"]}"#, cookies: jar,
                              headers: ["X-CSRF-Token: \(csrf)"])
        XCTAssertEqual(bad.status, 400)
        XCTAssertEqual(bad.problem?.field, "scopes.0", bad.text)
        let missing = try request("POST", "/api/v1/tokens", json: #"{"scopes":["notify"]}"#, cookies: jar, headers: ["X-CSRF-Token: \(csrf)"])
        XCTAssertEqual(missing.problem?.field, "name", missing.text)
        let made = try request("POST", "/api/v1/tokens", json: #"{"name":"Praxissoftware","scopes":["notify","read"]}"#, cookies: jar,
                               headers: ["X-CSRF-Token: \(csrf)"])
        XCTAssertEqual(made.status, 201, made.text)
        let created = try made.decode(SiteServer.CreatedToken.self)

        // The token speaks for the practice software; it cannot do what only people do.
        let asSoftware = try request("GET", "/api/v1/session", headers: ["Authorization: Bearer \(created.secret)"])
        XCTAssertEqual(try asSoftware.decode(SiteServer.SessionInfo.self), SiteServer.SessionInfo(name: "Praxissoftware", scopes: [.notify, .read]))
        XCTAssertEqual(try request("GET", "/api/v1/tokens", headers: ["Authorization: Bearer \(created.secret)"]).status, 403)
        XCTAssertEqual(try request("GET", "/api/v1/session", headers: ["Authorization: Bearer \(created.secret)x"]).status, 401)

        // A viewer may not change anything.
        let viewerJar = "\(dir)/vera.cookies"
        let viewer = try request("POST", "/api/v1/session", json: #"{"name":"vera","password":"Wartezimmer-7"}"#, cookies: viewerJar)
        let viewerCSRF = try XCTUnwrap(try viewer.decode(SiteServer.SessionInfo.self).csrfToken)
        let refused = try request("POST", "/api/v1/accounts", json: #"{"name":"mallory","role":"manager","password":"Mallory-2026!"}"#,
                                  cookies: viewerJar, headers: ["X-CSRF-Token: \(viewerCSRF)"])
        XCTAssertEqual(refused.status, 403)
        XCTAssertEqual(try request("GET", "/api/v1/accounts", cookies: jar).decode(SiteServer.List<Account>.self).items.map(\.name), ["anna", "vera"])

        // Revoked: the token no longer opens anything.
        XCTAssertEqual(try request("DELETE", "/api/v1/tokens/\(created.token.id)", cookies: jar, headers: ["X-CSRF-Token: \(csrf)"]).status, 204)
        XCTAssertEqual(try request("GET", "/api/v1/session", headers: ["Authorization: Bearer \(created.secret)"]).status, 401)

        // Failed logins from one address: five, then refused for a minute, the right password too.
        for _ in 0..<5 { XCTAssertEqual(try request("POST", "/api/v1/session", json: #"{"name":"anna","password":"guess"}"#).status, 401) }
        let limited = try request("POST", "/api/v1/session", json: #"{"name":"anna","password":"Empfang-2026!"}"#)
        XCTAssertEqual(limited.status, 429)

        // Everything above is in the audit log, refusals included.
        let audit = try request("GET", "/api/v1/audit?limit=100", cookies: jar).decode(SiteServer.List<AuditEntry>.self).items
        let actions = audit.map(\.action)
        for action in ["login", "login.refused", "login.limited", "token.create", "token.revoke", "refused", "csrf.refused", "token.refused", "account.add"] {
            XCTAssertTrue(actions.contains(action), "\(action) is in the audit log: \(actions)")
        }
        XCTAssertTrue(audit.contains { $0.action == "refused" && $0.actor == "vera" })

        // SIGTERM ends it at once.
        let stopping = Date()
        server?.terminate()
        server?.waitUntilExit()
        XCTAssertLessThan(Date().timeIntervalSince(stopping), 5)
    }
}
