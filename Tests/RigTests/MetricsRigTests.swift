import Calls
import Control
import Foundation
import Posix
import RigKit
import TestSupport
import XCTest

/// The terminals' metrics as a monitoring system reads them: each terminal answers GET /metrics
/// (`[metrics] listen`), one behind a bearer token; a real Prometheus (Debian's) scrapes both
/// during a call whose media cross the impairment relay, and its queries return the call, the
/// losses and their FEC recoveries, and the refused scrapes.
final class MetricsRigTests: XCTestCase {
    /// What `curl` got: the HTTP status and the body.
    private func get(_ url: String, token: String? = nil) throws -> (status: Int, body: String) {
        let out = try SiteServiceProcess.run(["/usr/bin/curl", "-s", "-m", "5", "-w", "\n%{http_code}"]
                                             + (token.map { ["-H", "Authorization: Bearer \($0)"] } ?? []) + [url])
        let lines = out.out.split(separator: "\n", omittingEmptySubsequences: false)
        return (Int(lines.last ?? "") ?? 0, lines.dropLast().joined(separator: "\n"))
    }

    private struct Query: Decodable {
        struct Data: Decodable { var result: [Sample] }
        struct Sample: Decodable {
            var metric: [String: String]
            var value: [Value]
        }
        enum Value: Decodable {
            case time(Double), text(String)
            init(from decoder: Decoder) throws {
                let c = try decoder.singleValueContainer()
                if let d = try? c.decode(Double.self) { self = .time(d) } else { self = .text(try c.decode(String.self)) }
            }
        }
        var status: String
        var data: Data
    }

    /// Prometheus's answer to `query`: each series' labels and value.
    private func query(_ port: Int, _ expression: String) -> [(labels: [String: String], value: Double)] {
        guard let out = try? SiteServiceProcess.run(["/usr/bin/curl", "-s", "-m", "5", "-G", "--data-urlencode", "query=\(expression)",
                                                     "http://127.0.0.1:\(port)/api/v1/query"]),
              let q = try? JSONDecoder().decode(Query.self, from: Data(out.out.utf8)), q.status == "success" else { return [] }
        return q.data.result.map { s in
            let v: Double = s.value.compactMap { if case .text(let t) = $0 { Double(t) } else { nil } }.first ?? .nan
            return (s.metric, v)
        }
    }

    private func value(_ port: Int, _ expression: String, terminal: String) -> Double? {
        query(port, expression).first { $0.labels["terminal"] == terminal }?.value
    }

    func testPrometheusScrapesTwoTerminalsDuringACallWithLoss() throws {
        try Rig.require()
        let rooms = try CallRooms(["roomA", "roomB"])
        defer { rooms.stopAll() }
        // FreePort hands out UDP ports; one free for UDP a moment ago is taken for TCP here.
        let (portA, portB, portP) = (try FreePort.udp(), try FreePort.udp(), try FreePort.udp())
        let token = "t0k3n-" + UUID().uuidString
        let tokenFile = rooms.dir + "/metrics-token"
        XCTAssertTrue(FileManager.default.createFile(atPath: tokenFile, contents: Data((token + "\n").utf8), attributes: [.posixPermissions: 0o600]))
        // The call's media through the impairment relay, 5 % random loss both ways: A's and B's media
        // sockets bind 127.0.0.3 and 127.0.0.2; the relay takes their directory address,
        // 127.0.0.1, receiving for B and sending to B as A (and back).
        let (mediaA, mediaB) = (rooms.room("rooma").media, rooms.room("roomb").media)
        let relay = try ImpairmentRelayProcess(listen: "127.0.0.1:\(mediaB)", target: "127.0.0.2:\(mediaB)",
                                               options: ["--from", "127.0.0.1:\(mediaA)", "--loss", "5", "--seed", "7"])
        defer { relay.stop() }
        try rooms.start("rooma", extra: "[metrics]\nlisten = \"127.0.0.1:\(portA)\"\ntoken_file = \"\(tokenFile)\"\n"
                        + "[notifications.material]\nrecipients = [\"roomb\"]\ntext = \"Bitte Material bringen\"", mediaBind: "127.0.0.3")
        try rooms.start("roomb", extra: "[metrics]\nlisten = \"127.0.0.1:\(portB)\"", mediaBind: "127.0.0.2")
        XCTAssertTrue(rooms.waitOnline("rooma", ["roomb"]))

        // Straight to the terminals: the token is asked for, only /metrics is there, and a
        // client that connects and says nothing holds up nobody.
        let silent = try TCPSocket.connect(to: IPv4Endpoint.parse("127.0.0.1:\(portA)"), deadline: MonotonicClock.seconds() + 2)
        defer { _ = silent }
        let a = "http://127.0.0.1:\(portA)/metrics"
        XCTAssertEqual(try get(a).status, 401, "no token")
        XCTAssertEqual(try get(a, token: token + "x").status, 401, "a wrong token")
        XCTAssertEqual(try get("http://127.0.0.1:\(portA)/other", token: token).status, 404)
        let scraped = try get(a, token: token)
        XCTAssertEqual(scraped.status, 200)
        XCTAssertTrue(scraped.body.contains("intercom_terminal_info{room=\"rooma\""), scraped.body.prefix(600).description)
        XCTAssertTrue(scraped.body.contains("# TYPE intercom_audio_xruns_total counter"), "Prometheus's text format: \(scraped.body.prefix(600))")
        XCTAssertTrue(scraped.body.contains("intercom_metrics_requests_total{outcome=\"unauthorized\"} 2"), scraped.body)
        XCTAssertEqual(try get("http://127.0.0.1:\(portB)/metrics").status, 200, "B asks no token")

        // A real Prometheus scrapes both every second, A with its token.
        let prometheus = try PrometheusProcess(folder: rooms.dir + "/prometheus", port: portP, config: """
            global: {scrape_interval: 1s, scrape_timeout: 1s}
            scrape_configs:
              - job_name: terminals
                static_configs: [{targets: ["127.0.0.1:\(portB)"], labels: {terminal: roomb}}]
              - job_name: terminals_with_token
                authorization: {credentials_file: "\(tokenFile)"}
                static_configs: [{targets: ["127.0.0.1:\(portA)"], labels: {terminal: rooma}}]
            """)
        defer { prometheus.stop() }
        XCTAssertTrue(rooms.wait(30) { self.query(portP, "up").filter { $0.value == 1 }.count == 2 },
                      "both terminals up in Prometheus: \(query(portP, "up"))")

        _ = try rooms.control("rooma", .perform(.call(button: "roomb")))
        XCTAssertTrue(rooms.wait(8) { rooms.isConnected("roomb") }, "B answered")
        for (room, other) in [("rooma", "roomb"), ("roomb", "rooma")] {
            XCTAssertTrue(rooms.wait(15) { (self.value(portP, "intercom_call_active", terminal: room) ?? 0) == 1 }, "\(room) in a call, says Prometheus")
            XCTAssertTrue(rooms.wait(15) { (self.value(portP, "sum by (terminal) (intercom_stream_packets_received_total)", terminal: room) ?? 0) > 100 },
                          "\(room) receives \(other)'s stream: \(query(portP, "intercom_stream_packets_received_total"))")
        }
        let media = query(portP, "intercom_call_media_to")
        XCTAssertEqual(Set(media.map { $0.labels["terminal"] ?? "" }), ["rooma", "roomb"], "\(media)")
        // The relay's losses, as Prometheus has them: recovered by FEC, or concealed; each side's loss ratio near 5 %.
        // Someone talks in one room, then in the other (Opus sends FEC with speech, not with
        // silence; with both talking at once, the echo chain of one room kept its microphone quiet
        // enough in one CI run that no loss from it was recovered), the clip again while it takes.
        for (talker, clip, room) in [("roomA", try Speech.roomA(), "roomb"), ("roomB", try Speech.roomB(), "rooma")] {
            var talking = try Rig.startTalker(room: talker, wav: clip)
            XCTAssertTrue(rooms.wait(30) {
                if !talking.isRunning, let again = try? Rig.startTalker(room: talker, wav: clip) { talking = again }
                return (self.value(portP, "sum by (terminal) (intercom_stream_frames_fec_recovered_total)", terminal: room) ?? 0) > 0
            }, "\(room): losses recovered by FEC while \(talker) talks: \(query(portP, "intercom_stream_frames_fec_recovered_total"))")
            if talking.isRunning { talking.terminate() }
            talking.waitUntilExit()
        }
        let lost = query(portP, "(intercom_stream_frames_fec_recovered_total + intercom_stream_frames_concealed_total) / intercom_stream_packets_received_total")
        print("metrics: lost of received, per side: \(lost.map { "\($0.labels["terminal"] ?? "?") \($0.value)" }); relay: \(relay.log.split(separator: "\n").last ?? "")")
        XCTAssertEqual(lost.count, 2, "\(lost)")
        XCTAssertTrue(lost.allSatisfy { $0.value > 0.01 && $0.value < 0.12 }, "about the relay's 5 %: \(lost)")
        let mos = query(portP, "intercom_stream_mos_estimate")
        print("metrics: estimated MOS \(mos.map { "\($0.labels["terminal"] ?? "?") \($0.value)" })")
        XCTAssertEqual(mos.count, 2, "an estimate for each side's stream: \(mos)")
        XCTAssertTrue(mos.allSatisfy { $0.value > 1 && $0.value < 4.41 }, "a call with loss estimates below the scale's top: \(mos)")
        XCTAssertEqual(value(portP, "intercom_audio_running", terminal: "rooma"), 1)
        XCTAssertGreaterThanOrEqual(value(portP, "intercom_metrics_requests_total{outcome=\"unauthorized\"}", terminal: "rooma") ?? 0, 2,
                                    "the refused scrapes are counted")
        _ = try rooms.control("rooma", .perform(.hangUp))
        XCTAssertTrue(rooms.wait(15) { self.value(portP, "intercom_call_active", terminal: "rooma") == 0 }, "the call's end, in Prometheus")
        XCTAssertTrue(rooms.wait(15) { self.query(portP, "intercom_stream_packets_received_total").isEmpty },
                      "a stream that ended leaves no series: \(query(portP, "intercom_stream_packets_received_total"))")
        // The call as each side counts it: placed and answered at A, taken at B; who is online.
        XCTAssertTrue(rooms.wait(15) { self.value(portP, "intercom_calls_ended_total{direction=\"outgoing\",outcome=\"finished\"}", terminal: "rooma") == 1 },
                      "\(query(portP, "intercom_calls_ended_total"))")
        XCTAssertEqual(value(portP, "intercom_calls_ended_total{direction=\"incoming\",outcome=\"finished\"}", terminal: "roomb"), 1)
        XCTAssertEqual(value(portP, "intercom_room_online{room=\"roomb\"}", terminal: "rooma"), 1)
        XCTAssertEqual(value(portP, "intercom_room_online{room=\"rooma\"}", terminal: "roomb"), 1)
        // A notification: pending at B until acknowledged there, each counted once.
        _ = try rooms.control("rooma", .perform(.notify(type: "material")))
        XCTAssertTrue(rooms.wait(15) { self.value(portP, "intercom_notifications_pending", terminal: "roomb") == 1 },
                      "pending at B: \(query(portP, "intercom_notifications_pending"))")
        _ = try rooms.control("roomb", .perform(.acknowledge(all: false)))
        XCTAssertTrue(rooms.wait(15) { self.value(portP, "intercom_notifications_acknowledged_total", terminal: "roomb") == 1 })
        XCTAssertEqual(value(portP, "intercom_notifications_pending", terminal: "roomb"), 0)
        XCTAssertEqual(value(portP, "intercom_notifications_received_total", terminal: "roomb"), 1)
        XCTAssertEqual(value(portP, "intercom_notifications_sent_total", terminal: "rooma"), 1)
    }

    /// The site service as one scrape target for the whole site: a real Prometheus scrapes its
    /// `GET /api/v1/metrics` over TLS (the site's own authority) with a read token, and its queries
    /// return every room's terminal online, answering, approved-or-pending and holding the
    /// document; when C's daemon stops, Prometheus shows C offline and not answering while A and B
    /// stay online. Without a token the scrape is refused.
    func testPrometheusScrapesTheSiteServiceForEveryTerminal() throws {
        try Rig.require()
        let rooms = try CallRooms(["roomA", "roomB", "roomC"])
        defer { rooms.stopAll() }
        let folder = rooms.dir + "/site"
        try SiteKit.create(folder, document: SiteKit.document(rooms))
        let a = try SiteKit.start(rooms, "rooma", folder: folder)
        for id in ["roomb", "roomc"] { try SiteKit.start(rooms, id, folder: folder) }
        XCTAssertTrue(rooms.waitOnline("rooma", ["roomb", "roomc"]), a.log)
        let service = SiteServiceProcess(dir: folder)
        defer { service.stop() }
        XCTAssertEqual(try service.addAccount("anna", role: "manager", password: "Empfang-2026!").status, 0)
        try service.start(member: try XCTUnwrap(a.controlSocket))
        let anna = try XCTUnwrap(try service.login("anna", password: "Empfang-2026!"))
        let token = try service.token("Wartung", scopes: ["read"], as: anna)
        let tokenFile = rooms.dir + "/site-metrics.token"
        XCTAssertTrue(FileManager.default.createFile(atPath: tokenFile, contents: Data(token.utf8), attributes: [.posixPermissions: 0o600]))
        XCTAssertEqual(try service.request("GET", "/api/v1/metrics").status, 401, "no token, no metrics")
        let scraped = try service.request("GET", "/api/v1/metrics", headers: ["Authorization: Bearer \(token)"])
        XCTAssertEqual(scraped.status, 200, scraped.text)
        XCTAssertTrue(scraped.text.contains("# TYPE intercom_site_terminal_online gauge"), scraped.text)

        let portP = try FreePort.udp()
        let prometheus = try PrometheusProcess(folder: rooms.dir + "/prometheus", port: portP, config: """
            global: {scrape_interval: 2s, scrape_timeout: 2s}
            scrape_configs:
              - job_name: site
                scheme: https
                metrics_path: /api/v1/metrics
                tls_config: {ca_file: "\(folder)/service/tls/ca.pem"}
                authorization: {credentials_file: "\(tokenFile)"}
                static_configs: [{targets: ["127.0.0.1:\(service.port)"]}]
            """)
        defer { prometheus.stop() }
        func byRoom(_ expression: String) -> [String: Double] {
            Dictionary(query(portP, expression).compactMap { s in s.labels["room"].map { ($0, s.value) } }, uniquingKeysWith: { a, _ in a })
        }
        let all = ["rooma": 1.0, "roomb": 1, "roomc": 1]
        XCTAssertTrue(rooms.wait(30) { byRoom("intercom_site_terminal_online") == all },
                      "every terminal online, says Prometheus: \(byRoom("intercom_site_terminal_online")), up \(query(portP, "up")); "
                      + prometheus.failure)
        XCTAssertEqual(byRoom("intercom_site_terminal_reached"), all, "every terminal answers the service")
        XCTAssertEqual(byRoom("intercom_site_terminal_document_version"), ["rooma": 2, "roomb": 2, "roomc": 2], "each holds version 2")
        XCTAssertEqual(Set(query(portP, "intercom_site_terminal_info").compactMap { $0.labels["standing"] }), ["pending"],
                       "not approved yet: each terminal pending")
        XCTAssertEqual(query(portP, "intercom_site_document_version").first?.value, 2)
        // How each is doing, as it tells every 10 s: sound running, no fault, a while up.
        let fine = ["rooma": 0.0, "roomb": 0, "roomc": 0]
        XCTAssertTrue(rooms.wait(25) { byRoom("intercom_site_terminal_fault") == fine },
                      "no terminal in fault, says Prometheus: \(byRoom("intercom_site_terminal_fault"))")
        XCTAssertEqual(Set(query(portP, "intercom_site_terminal_audio_info").compactMap { $0.labels["audio"] }), ["running"])
        XCTAssertEqual(byRoom("intercom_site_terminal_uptime_seconds").count, 3)

        let stopped = Date()
        _ = rooms.stop("roomc")
        XCTAssertTrue(rooms.wait(30) { byRoom("intercom_site_terminal_online")["roomc"] == 0 && byRoom("intercom_site_terminal_reached")["roomc"] == 0 },
                      "C offline and not answering, says Prometheus: \(byRoom("intercom_site_terminal_online"))")
        let seen = Date().timeIntervalSince(stopped)
        XCTAssertEqual(byRoom("intercom_site_terminal_online")["rooma"], 1)
        XCTAssertEqual(byRoom("intercom_site_terminal_online")["roomb"], 1, "B stays online")
        print(String(format: "site metrics: C's stop seen in Prometheus after %.1f s (scraped every 2 s)", seen))
    }
}

/// Debian's Prometheus, started with `config` (written to `folder`/prometheus.yml), its data in
/// `folder`, answering queries on `port`.
private final class PrometheusProcess {
    private let process = Process()
    private let log = Pipe()

    init(folder: String, port: Int, config: String) throws {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try config.write(toFile: folder + "/prometheus.yml", atomically: true, encoding: .utf8)
        process.executableURL = URL(fileURLWithPath: "/usr/bin/prometheus")
        process.arguments = ["--config.file=\(folder)/prometheus.yml", "--storage.tsdb.path=\(folder)/data",
                             "--web.listen-address=127.0.0.1:\(port)", "--log.level=warn"]
        process.standardOutput = log
        process.standardError = log
        try process.run()
    }

    /// What it said if it ended (a configuration it refused); empty while it runs.
    var failure: String {
        process.isRunning ? "" : String(decoding: log.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    }

    func stop() {
        process.terminate()
        process.waitUntilExit()
    }
}
