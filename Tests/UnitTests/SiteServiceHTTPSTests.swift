import Calls
import Control
import Foundation
import FoundationXML
import Glibc
import IntercomConfig
import SignalTools
@testable import SiteService
import TestSupport
import XCTest

/// The site service through its real path: `intercom-site serve` (the built program) over TLS
/// on loopback, its certificate authority made on first start, and curl (another TLS stack) as
/// the client that checks it. Logins, the cross-site token, roles, API tokens, problem
/// documents, the login limit and the audit log, each read from the typed replies.
final class SiteServiceHTTPSTests: XCTestCase {
    static var binary: String { SiteServiceProcess.binary }
    typealias Reply = SiteServiceProcess.Reply

    private var dir = ""
    private var service: SiteServiceProcess!
    private var port: Int { service.port }

    override func setUpWithError() throws {
        dir = NSTemporaryDirectory() + "site-https-\(getpid())-\(UInt32.random(in: .min ... .max))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        service = SiteServiceProcess(dir: dir)
    }

    override func tearDownWithError() throws {
        service.stop()
        try? FileManager.default.removeItem(atPath: dir)
    }

    /// In the test's folder: schemathesis keeps a cache in its working directory.
    private func run(_ arguments: [String], input: String? = nil) throws -> (status: Int32, out: String, err: String) {
        try SiteServiceProcess.run(arguments, input: input, in: dir)
    }

    private func request(_ method: String, _ path: String, json: String? = nil, cookies: String? = nil, headers: [String] = [],
                         extra: [String] = []) throws -> Reply {
        try service.request(method, path, json: json, cookies: cookies, headers: headers, extra: extra)
    }

    private func startServer() throws { try service.start() }

    /// Schemathesis (PyPI, in .venv-api) generates requests from the OpenAPI document the service
    /// serves, good and bad, logged in as a manager: no reply is a server error, and every reply's
    /// status, content type and body are the document's. Read from its JUnit report.
    func testSchemathesisFindsNoServerErrorAndNoReplyOutsideTheDocument() throws {
        let st = Repo.root + "/.venv-api/bin/st"
        XCTAssertTrue(FileManager.default.isExecutableFile(atPath: st), "scripts/setup.sh installs schemathesis into .venv-api")
        XCTAssertEqual(try run([Self.binary, "account", "add", "anna", "--role", "manager", "--dir", dir], input: "Empfang-2026!\n").status, 0)
        // A site whose terminal in Empfang does not listen (port 1): changes are handed to it in
        // vain. The service's member is a real intercomd of the site's room "dienst", with no
        // sound card (it runs, signals and answers its control socket; its audio waits for a device).
        XCTAssertEqual(try run([Self.binary, "create", "--dir", dir, "--id", "praxis", "--room", "empfang=127.0.0.1"]).status, 0)
        func freePort() -> Int {
            let udp = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
            defer { close(udp) }
            var address = sockaddr_in(sin_family: sa_family_t(AF_INET), sin_port: 0, sin_addr: in_addr(s_addr: inet_addr("127.0.0.1")), sin_zero: (0, 0, 0, 0, 0, 0, 0, 0))
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(udp, $0, length) } }
            _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(udp, $0, &length) } }
            return Int(UInt16(bigEndian: address.sin_port))
        }
        let signalling = freePort(), media = freePort()
        try """
            [rooms.empfang]
            address = "127.0.0.1"
            signalling_port = 1
            media_port = 2
            [rooms.dienst]
            address = "127.0.0.1"
            signalling_port = \(signalling)
            media_port = \(media)
            [notifications.test]
            recipients = ["empfang"]
            """.write(toFile: dir + "/site.toml", atomically: true, encoding: .utf8)
        XCTAssertEqual(try run([Self.binary, "sign", "--dir", dir]).status, 0)
        try FileManager.default.copyItem(atPath: dir + "/site.json", toPath: dir + "/member-site.json")
        // A member without sound devices, as on a server: signalling only.
        let config = try DaemonProcess.writeRoomConfig("no-sound-card", extra: """
            [network]
            listen_port = \(media)
            [room]
            id = "dienst"
            [calls]
            history_path = "\(dir)/member-history.json"
            state_path = "\(dir)/member-state.json"
            [control]
            socket = "\(dir)/member.sock"
            [site]
            id = "praxis"
            administrator_key = "\(dir)/administrator.pub"
            document = "\(dir)/member-site.json"
            identity_key = "\(dir)/member-terminal.key"
            """, audio: "enabled = false")
        let member = try DaemonProcess(arguments: ["--config", config])
        defer { _ = member.terminate() }
        XCTAssertNotNil(member.waitForStatistics(timeout: 10) { $0.site?.version == 2 }, "the member runs the site: \(member.log)")
        try service.start(member: dir + "/member.sock")
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
        // Without audio it places no call: a 409 that says why, and the member is not stuck.
        let call = try request("POST", "/api/v1/calls", json: #"{"rooms":["empfang"]}"#, cookies: jar, headers: ["X-CSRF-Token: \(csrf)"])
        XCTAssertEqual(call.status, 409, call.text)
        XCTAssertTrue(call.problem?.detail.contains("no audio") == true, call.text)
        let status = try request("GET", "/api/v1/status", cookies: jar)
        XCTAssertEqual(status.status, 200, status.text)
        XCTAssertEqual(try status.decode(ControlStatus.self).room.description, "dienst")
        let audio = try member.statistics().audio
        XCTAssertFalse(audio.running)
        XCTAssertEqual(audio.sessions, 0, "no device was opened")
        let report = "\(dir)/schemathesis.xml"
        let base = "https://127.0.0.1:\(port)/api/v1"
        let result = try run([st, "run", "\(base)/openapi.yaml", "--url", base, "--tls-verify", "\(dir)/service/tls/ca.pem",
                              "-H", "Cookie: \(SiteServer.sessionCookie)=\(cookie)", "-H", "X-CSRF-Token: \(csrf)",
                              // logout ends the session the run uses; the event stream never ends, which a
                              // request-and-answer tool cannot read (SiteServiceRigTests reads it).
                              "--exclude-operation-id", "logout", "--exclude-operation-id", "events",
                              "--checks", "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance",
                              "--max-examples", "30", "--seed", "54", "--no-color",
                              "--report", "junit", "--report-junit-path", report])
        print(result.out.split(separator: "\n").suffix(25).joined(separator: "\n"))
        XCTAssertEqual(result.status, 0, "schemathesis found failures:\n\(result.out.suffix(4000))\(result.err.suffix(2000))")
        let xml = try XMLDocument(contentsOf: URL(fileURLWithPath: report))
        let cases = try xml.nodes(forXPath: "//testcase")
        let failed = try xml.nodes(forXPath: "//testcase[failure or error]")
        print("schemathesis: \(cases.count) operations tested, \(failed.count) with failures")
        XCTAssertGreaterThanOrEqual(cases.count, 29, "every operation but logout and events was tested")
        XCTAssertEqual(failed.count, 0)
    }

    /// Nothing a client sends holds up the others: 100 connections that send a request's header
    /// one line a second and never end it, and 100 that never even begin the TLS handshake, while
    /// an ordinary client asks twice a second. Every ordinary request is answered; the slow and
    /// the silent connections are closed after `SiteServer.firstRequestTimeout`.
    func testSlowAndSilentClientsHoldUpNobody() throws {
        try startServer()
        let seconds = Double(SiteServer.firstRequestTimeout) + 4
        let arguments: [String: Any] = ["host": "127.0.0.1", "port": service.port, "ca": dir + "/service/tls/ca.pem",
                                        "slow": 100, "silent": 100, "seconds": seconds]
        let run = try run([Repo.root + "/.venv-api/bin/python", Repo.root + "/Tests/Page/slow_clients.py",
                           String(decoding: try JSONSerialization.data(withJSONObject: arguments), as: UTF8.self)])
        let facts = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(run.out.utf8)) as? [String: Any], "\(run.out)\(run.err)")
        let requests = try XCTUnwrap(facts["requests"] as? [[String: Any]])
        let times = requests.compactMap { $0["seconds"] as? Double }.sorted()
        print("slow clients: \(requests.count) ordinary requests, median \(String(format: "%.1f", times[times.count / 2] * 1000)) ms, "
              + "slowest \(String(format: "%.1f", (times.last ?? 0) * 1000)) ms; still open at the end: "
              + "\(facts["slow_open"] ?? "?") of 100 slow, \(facts["silent_open"] ?? "?") of 100 silent")
        XCTAssertGreaterThan(requests.count, Int(seconds), "the ordinary client kept going")
        XCTAssertEqual(requests.filter { $0["status"] as? Int != 200 }.count, 0, "every ordinary request answered: \(requests.filter { $0["status"] as? Int != 200 })")
        XCTAssertEqual(facts["silent_open"] as? Int, 0, "the silent connections were closed")
        XCTAssertEqual(facts["slow_open"] as? Int, 0, "the slow connections were closed")
        XCTAssertEqual(try request("GET", "/api/v1/health").status, 200)
    }

    /// The page's "Anhören": a type as a terminal sounds it, made by the terminal's own code with
    /// the site's tones and voice. Without reading aloud it is, sample for sample, the tone a
    /// terminal with the site's `[tones]` plays; with it, that tone and then speech, longer for a
    /// longer text. Bad fields are named; a viewer may not.
    func testANotificationPreviewIsTheTerminalsToneThenItsText() throws {
        XCTAssertEqual(try run([Self.binary, "create", "--dir", dir, "--id", "praxis", "--room", "empfang=127.0.0.1"]).status, 0)
        XCTAssertEqual(try run([Self.binary, "account", "add", "anna", "--role", "manager", "--dir", dir], input: "Empfang-2026!\n").status, 0)
        XCTAssertEqual(try run([Self.binary, "account", "add", "vera", "--role", "viewer", "--dir", dir], input: "Wartezimmer-7\n").status, 0)
        try startServer()
        let anna = try XCTUnwrap(try service.login("anna", password: "Empfang-2026!"))
        func preview(_ json: String, as session: SiteServiceProcess.Session? = nil) throws -> (reply: Reply, audio: WAVAudio?) {
            let reply = try service.request("POST", "/api/v1/notifications/preview", as: session ?? anna, json: json)
            guard reply.status == 200 else { return (reply, nil) }
            let path = dir + "/preview.wav"
            try reply.body.write(to: URL(fileURLWithPath: path))
            return (reply, try WAVAudio.read(path: path))
        }
        let tones = TonesSection()
        let bell = try tones.sound("bell", notes: NotificationTone.bell.notes, sampleRate: 48000)
        let toneOnly = try XCTUnwrap(preview(#"{"label":"Material bringen","tone":"bell","read_aloud":false}"#).audio)
        XCTAssertEqual(toneOnly.sampleRate, 48000)
        XCTAssertEqual(toneOnly.channels, 1)
        XCTAssertEqual(toneOnly.samples, bell, "the tone a terminal plays, sample for sample")

        let spoken = try XCTUnwrap(preview(#"{"label":"Material bringen","text":"Bitte Material ins Labor bringen","tone":"bell"}"#).audio)
        XCTAssertEqual(Array(spoken.samples.prefix(bell.count)), bell, "first the tone")
        let speech = Array(spoken.samples.dropFirst(bell.count))
        XCTAssertGreaterThan(Double(speech.count) / 48000, 1.0, "then the text, read")
        XCTAssertGreaterThan(Levels.rmsDB(Signals.toFloat(speech)), -35, "speech, not silence")
        let short = try XCTUnwrap(preview(#"{"label":"Eins","tone":"bell"}"#).audio)
        XCTAssertLessThan(short.samples.count, spoken.samples.count, "a shorter text is shorter: the label read when there is no text")
        let alarm = try XCTUnwrap(preview(#"{"label":"Alarm","priority":"emergency","read_aloud":false}"#).audio)
        XCTAssertEqual(alarm.samples, try tones.sound("alarm", notes: NotificationTone.alarm.notes, sampleRate: 48000), "an emergency's own tone")
        print("preview: tone \(bell.count * 1000 / 48000) ms, with the text \(spoken.samples.count * 1000 / 48000) ms")

        for (json, field) in [(#"{"label":"X","tone":"trompete"}"#, "tone"), (#"{"label":"","tone":"bell"}"#, "label"),
                              (#"{"label":"X","text":"\#(String(repeating: "a", count: 201))"}"#, "text"), (#"{"label":"X","priority":"sofort"}"#, "priority")] {
            let refused = try preview(json).reply
            XCTAssertEqual(refused.status, 400, "\(json): \(refused.text)")
            XCTAssertEqual(refused.problem?.field, field, "\(json): \(refused.text)")
        }
        let vera = try XCTUnwrap(try service.login("vera", password: "Wartezimmer-7"))
        XCTAssertEqual(try preview(#"{"label":"X"}"#, as: vera).reply.status, 403, "a viewer does not")
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
        XCTAssertLessThan(service.stop(), 5)
    }

    /// The site document through the API: read, a dry run that plans without signing, edits
    /// signed as the next version and handed to the terminals (here none answer), a stale version,
    /// a broken document and a viewer refused with what is wrong, undo, and each step in the log.
    func testTheSiteDocumentIsPlannedSignedAndUndoneOverTLS() throws {
        let tool = Self.binary
        XCTAssertEqual(try run([tool, "create", "--dir", dir, "--id", "praxis", "--room", "empfang=127.0.0.1"]).status, 0)
        let original = """
            # Praxis am Markt: written by hand, comments kept while it is in force.
            [site]
            name = "Praxis am Markt"
            [rooms.empfang]
            address = "127.0.0.1"
            signalling_port = 1
            [rooms.labor]
            address = "127.0.0.1"
            signalling_port = 2
            media_port = 5006
            [notifications.naechster]
            label = "Nächster Patient"
            recipients = ["empfang"]

            """
        try original.write(toFile: dir + "/site.toml", atomically: true, encoding: .utf8)
        XCTAssertEqual(try run([tool, "sign", "--dir", dir]).status, 0)
        try service.addAccount("anna", role: "manager", password: "Empfang-2026!")
        try service.addAccount("vera", role: "viewer", password: "Wartezimmer-7")
        try startServer()
        let anna = try XCTUnwrap(try service.login("anna", password: "Empfang-2026!"))
        let vera = try XCTUnwrap(try service.login("vera", password: "Wartezimmer-7"))

        let view = try service.request("GET", "/api/v1/site", as: anna).decode(SiteEditor.View.self)
        XCTAssertEqual(view.version, 2)
        XCTAssertEqual(view.rooms.map(\.id), ["empfang", "labor"])
        XCTAssertEqual(view.notifications.map(\.label), ["Nächster Patient"])
        XCTAssertEqual(view.text, original, "site.toml as signed, comments and all")

        // A notification type for the lab on every terminal's F3: planned, nothing signed.
        let edits = """
            {"version":2,"edits":[{"path":["notifications","material"],"value":{"label":"Material bringen","recipients":["labor"],"tone":"bell"}},
            {"path":["keys","map","KEY_F3"],"value":"notify:material"}]}
            """
        let dry = try service.request("PATCH", "/api/v1/site?dry_run=true", as: anna, json: edits)
        XCTAssertEqual(dry.status, 200, dry.text)
        let planned = try dry.decode(SiteEditor.Outcome.self)
        XCTAssertFalse(planned.applied)
        XCTAssertEqual(planned.plan.version, 3)
        XCTAssertEqual(planned.plan.terminals.map(\.room), ["empfang", "labor"])
        XCTAssertEqual(planned.plan.terminals[0].settings.first { $0.key == "keys.map" }?.after, #"{ KEY_F3 = "notify:material" }"#)
        XCTAssertTrue(try run([tool, "show", "--dir", dir]).out.contains("version 2,"), "a dry run signs nothing")

        // Applied: version 3, signed, handed to both rooms (nobody listens on ports 1 and 2).
        let applied = try service.request("PATCH", "/api/v1/site", as: anna, json: edits).decode(SiteEditor.Outcome.self)
        XCTAssertTrue(applied.applied)
        XCTAssertEqual(applied.plan, planned.plan, "what was shown is what was done")
        XCTAssertEqual(applied.published.map(\.room), ["empfang", "labor"])
        XCTAssertEqual(Set(applied.published.map(\.result)), [.unreached])
        let shown = try run([tool, "show", "--dir", dir])
        XCTAssertTrue(shown.out.contains("version 3,"), "the folder's own tool verifies version 3: \(shown.out)\(shown.err)")
        XCTAssertTrue(try String(contentsOfFile: dir + "/site.toml", encoding: .utf8).contains("Material bringen"))

        // Made on version 2 again: refused, nothing lost. A broken document: each problem by its key.
        let stale = try service.request("PATCH", "/api/v1/site", as: anna, json: edits)
        XCTAssertEqual(stale.status, 409)
        XCTAssertEqual(stale.problem?.field, "version")
        let broken = try service.request("PATCH", "/api/v1/site", as: anna,
                                         json: #"{"version":3,"edits":[{"path":["notifications","x"],"value":{"recipients":["labor"],"tone":"quack"}}]}"#)
        XCTAssertEqual(broken.status, 422, broken.text)
        XCTAssertEqual(broken.problem?.field, "edits")
        XCTAssertEqual(broken.problem?.errors?.first?.key, "notifications.x.tone")
        let badText = try service.request("PUT", "/api/v1/site", as: anna, json: #"{"version":3,"text":"[rooms.a]\naddress = 1"}"#)
        XCTAssertEqual(badText.status, 422, badText.text)
        XCTAssertEqual(badText.problem?.errors?.first?.key, "rooms.a.address")
        let enrolment = try service.request("PUT", "/api/v1/site", as: anna, json: try String(decoding: JSONEncoder().encode(
            SiteEditor.NewText(version: 3, text: original + "[enrolment.approved]\nempfang = \"abc\"\n")), as: UTF8.self))
        XCTAssertEqual(enrolment.problem?.field, "text", enrolment.text)
        let missing = try service.request("PATCH", "/api/v1/site", as: anna, json: #"{"edits":[]}"#)
        XCTAssertEqual(missing.problem?.field, "version", missing.text)

        // A viewer reads it and changes nothing; a token reads it with scope read only.
        XCTAssertEqual(try service.request("PATCH", "/api/v1/site", as: vera, json: edits).status, 403)
        XCTAssertEqual(try service.request("GET", "/api/v1/site", as: vera).status, 200)
        let made = try service.request("POST", "/api/v1/tokens", as: anna, json: #"{"name":"Praxissoftware","scopes":["read"]}"#)
        let secret = try made.decode(SiteServer.CreatedToken.self).secret
        XCTAssertEqual(try request("GET", "/api/v1/site", headers: ["Authorization: Bearer \(secret)"]).status, 200)
        XCTAssertEqual(try request("PATCH", "/api/v1/site", json: edits, headers: ["Authorization: Bearer \(secret)"]).status, 403)

        // Undo: version 2's text becomes version 4, planned first.
        let versions = try service.request("GET", "/api/v1/site/versions", as: anna).decode(SiteServer.List<SiteVersion>.self).items
        XCTAssertEqual(versions.map(\.version), [3, 2])
        XCTAssertEqual(versions.map(\.action), ["site.edit", "site.found"])
        XCTAssertEqual(versions[0].actor, "anna")
        let undoPlan = try service.request("POST", "/api/v1/site/versions/2/restore?dry_run=true", as: anna).decode(SiteEditor.Outcome.self)
        XCTAssertEqual(undoPlan.plan.terminals.map { $0.settings.map(\.key) }, applied.plan.terminals.map { $0.settings.map(\.key) },
                       "undo changes back exactly what the change changed")
        XCTAssertEqual(undoPlan.plan.terminals[0].settings.first { $0.key == "keys.map" }?.after, "{}")
        let undone = try service.request("POST", "/api/v1/site/versions/2/restore", as: anna).decode(SiteEditor.Outcome.self)
        XCTAssertEqual(undone.plan.version, 4)
        XCTAssertEqual(try service.request("GET", "/api/v1/site", as: anna).decode(SiteEditor.View.self).text, original)
        XCTAssertEqual(try service.request("POST", "/api/v1/site/versions/99/restore", as: anna).status, 404)

        let actions = try service.request("GET", "/api/v1/audit", as: anna).decode(SiteServer.List<AuditEntry>.self).items.map(\.action)
        for action in ["site.found", "site.edit", "site.restore", "refused"] {
            XCTAssertTrue(actions.contains(action), "\(action) is in the audit log: \(actions)")
        }
    }
}

extension SiteServiceProcess.Reply {
    var problem: ProblemDocument? { try? decode(ProblemDocument.self) }
}
