import Calls
import Foundation
import Posix
import RealTime
import SignalTools
import SiteService
import TestSupport
import XCTest

/// The suite's site service figures: the page loaded and the site shown in Debian's chromium
/// (the browser's own timings), and a change made through the API until every terminal of a
/// small site runs it (each terminal's typed `applied_at`).
final class SuiteSiteServiceTests: XCTestCase {
    func testSuiteThePageLoadsAndAChangeReachesEveryTerminal() throws {
        let mode = try SuiteMode.require()
        let loads = mode.isSmoke ? 3 : 30, changes = mode.isSmoke ? 2 : 20
        let ids = ["roomA", "roomB", "roomC"]
        let rooms = try CallRooms(ids)
        defer { rooms.stopAll() }
        let folder = rooms.dir + "/site"
        try SiteKit.create(folder, document: SiteKit.document(rooms))
        let daemons = try ids.map { try SiteKit.start(rooms, $0.lowercased(), folder: folder) }
        XCTAssertTrue(rooms.waitOnline("rooma", ["roomb", "roomc"]))
        let service = SiteServiceProcess(dir: folder)
        defer { service.stop() }
        XCTAssertEqual(try service.addAccount("anna", role: "manager", password: "Empfang-2026!").status, 0)
        try service.start()
        let anna = try XCTUnwrap(try service.login("anna", password: "Empfang-2026!"))

        // Changes: each a new notification type, until all three terminals applied it.
        var answered: [Double] = [], applied: [Double] = []
        for n in 0..<changes {
            let version = try service.request("GET", "/api/v1/site", as: anna).decode(SiteEditor.View.self).version
            let t0 = Date().timeIntervalSince1970
            let reply = try service.request("PATCH", "/api/v1/site", as: anna,
                                            json: #"{"version":\#(version),"edits":[{"path":["notifications","t\#(n)"],"value":{"recipients":["roomb"]}}]}"#)
            answered.append((Date().timeIntervalSince1970 - t0) * 1000)
            XCTAssertEqual(reply.status, 200, reply.text)
            var last = 0.0
            for d in daemons {
                let stats = d.waitForStatistics(timeout: 10) { $0.site?.version == version + 1 && $0.site?.appliedAt != nil }
                last = max(last, stats?.site?.appliedAt ?? .infinity)
            }
            applied.append((last - t0) * 1000)
        }

        let python = Repo.root + "/.venv-api/bin/python"
        let arguments: [String: Any] = ["url": "https://127.0.0.1:\(service.port)/", "certificate": folder + "/service/tls/server.pem",
                                        "manager": "anna", "manager_password": "Empfang-2026!", "count": loads]
        let walk = try SiteServiceProcess.run([python, Repo.root + "/Tests/Page/page_loads.py",
                                               String(decoding: try JSONSerialization.data(withJSONObject: arguments), as: UTF8.self)])
        let timings = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(walk.out.utf8)) as? [String: [Double]], "\(walk.out)\(walk.err)")
        let loaded = try XCTUnwrap(timings["loaded"]), shown = try XCTUnwrap(timings["shown"])
        XCTAssertEqual(loaded.count, loads)

        func median(_ v: [Double]) -> Double { let s = v.sorted(); return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2 }
        func row(_ what: String, _ v: [Double], goal: String = "") {
            SuiteMode.emit(String(format: "| %@ | %d | %.1f | %.1f | %@ |", what, v.count, median(v), v.max() ?? 0, goal))
        }
        SuiteMode.emit("### The site service: the page and a change reaching the terminals")
        SuiteMode.emit("")
        SuiteMode.emitTable(intro: """
            `intercom-site serve` on loopback over TLS, a site of three terminals on the rig. The page in Debian's chromium \
            (headless, Selenium, logged in): each load's navigation timing (`loadEventEnd`) and the page's own mark once \
            `GET /api/v1/site` is shown, from the navigation's start. A change: `PATCH /api/v1/site` adding a notification \
            type, from the request to its answer (planned, signed, recorded and handed to the three terminals), and to the \
            last terminal's `applied_at` for that version (each terminal's typed statistics).
            """, columns: ["figure", "n", "median ms", "worst ms", "goal"])
        let goal = median(shown) < 200 ? "< 200 ms: met" : "< 200 ms: not met"
        row("page loaded", loaded)
        row("site shown on the page", shown, goal: goal)
        row("change answered (planned, signed, handed over)", answered)
        row("change applied at every terminal", applied)
        SuiteMode.emit("")
    }

    /// A notification sent through the API (`POST /api/v1/notifications`, a token, curl making
    /// a new TLS connection each time, as practice software would), to its tone at the
    /// recipient's speaker (recorded in this process, each frame stamped when read).
    func testSuiteANotificationSentThroughTheAPIIsHeard() throws {
        let mode = try SuiteMode.require()
        try Rig.require()
        let sends = mode.isSmoke ? 2 : 20
        let (rooms, service, token) = try Self.siteWithMember(type: "naechster-patient", tone: "gong", text: "Nächster Patient bitte", scopes: ["notify"])
        defer { rooms.stopAll() }
        defer { service.stop() }
        let tap = try SuiteNotificationTests.SpeakerTap(room: "roomB")
        defer { tap.stop() }
        Thread.sleep(forTimeInterval: 0.5)

        var heard: [Double] = [], answered: [Double] = []
        var missing = 0
        for _ in 0..<sends {
            let mark = tap.count
            let t0 = MonotonicClock.nanoseconds()
            let reply = try service.request("POST", "/api/v1/notifications", json: #"{"type":"naechster-patient"}"#,
                                            headers: ["Authorization: Bearer \(token)"])
            answered.append(SuiteNotificationTests.ms(t0, MonotonicClock.nanoseconds()))
            XCTAssertEqual(reply.status, 201, reply.text)
            Thread.sleep(forTimeInterval: 3.2)  // the tone and the text
            guard let t = SuiteNotificationTests.tone(.gong, in: tap, from: mark), let at = tap.time(ofSample: t.start) else {
                missing += 1
                continue
            }
            heard.append(SuiteNotificationTests.ms(t0, at))
        }
        print("suite api notifications: heard \(heard), answered \(answered), missing \(missing), tap xruns \(tap.xruns)")
        XCTAssertEqual(missing, 0, "every tone found at B's speaker")

        SuiteMode.emit("### A notification through the API, heard")
        SuiteMode.emit("")
        SuiteMode.emitTable(intro: """
            `POST /api/v1/notifications` with a token, by curl (a new TLS connection each time, as practice software would), \
            to `intercom-site serve` on loopback, which sends it through room A's terminal (`--member`, its control socket); \
            a tap in this process records B's speaker, each 10 ms frame stamped when read. From curl's launch to its answer, \
            and to the tone's first sample at B. \(sends) notifications; the tap's xruns: \(tap.xruns).
            """, columns: ["figure", "n", "median ms", "worst ms", "goal"])
        func row(_ what: String, _ v: [Double], goal: String = "") {
            SuiteMode.emit(String(format: "| %@ | %d | %.1f | %.1f | %@ |", what, v.count, Levels.median(v), v.max() ?? 0, goal))
        }
        row("request answered (curl launched to its exit)", answered)
        row("tone heard at the recipient", heard, goal: (heard.max() ?? .infinity) < 150 ? "< 150 ms: met" : "< 150 ms: not met")
        SuiteMode.emit("")
    }

    /// Many event-stream clients and a steady rate of requests held against the service with a
    /// small site behind it: the service's memory over the run, every request answered, every
    /// stream fed, and the terminals' audio untouched (their xruns before and after).
    func testSuiteEventStreamsAndRequestsHeldForMinutes() throws {
        let mode = try SuiteMode.require()
        let streams = 100, rate = 50, seconds = mode.isSmoke ? 8 : 600
        let (rooms, service, token) = try Self.siteWithMember(type: "info", tone: "bell", text: "Info", scopes: ["notify", "read"])
        defer { rooms.stopAll() }
        defer { service.stop() }
        let a = rooms.daemons["rooma"]!, b = rooms.daemons["roomb"]!
        let xrunsBefore = try [a, b].map { try $0.statistics().audio.xruns }

        let arguments: [String: Any] = ["url": "https://127.0.0.1:\(service.port)", "ca": service.dir + "/service/tls/ca.pem", "token": token,
                                        "streams": streams, "rate": rate, "seconds": seconds, "notify_every": 10, "type": "info",
                                        "pid": Int(service.pid)]
        let run = try SiteServiceProcess.run([Repo.root + "/.venv-api/bin/python", Repo.root + "/Tests/Page/api_load.py",
                                              String(decoding: try JSONSerialization.data(withJSONObject: arguments), as: UTF8.self)])
        struct Load: Decodable {
            var statuses: [String: Int]
            var requests: Int
            var p50: Double?, p99: Double?, max: Double?
            var streamEvents: [Int]
            var streamErrors: [String]
            var memoryKib: [[Double?]]
            var seconds: Double
        }
        let load = try Wire.decode(Load.self, from: Data(run.out.utf8))
        let xrunsAfter = try [a, b].map { try $0.statistics().audio.xruns }
        let memory = load.memoryKib.compactMap { $0.count == 2 ? $0[1] : nil }
        print("suite api load: \(load.requests) requests \(load.statuses), p50 \(load.p50 ?? -1) p99 \(load.p99 ?? -1) ms, "
              + "events per stream \(Set(load.streamEvents).sorted()), errors \(load.streamErrors), memory KiB \(memory), xruns \(xrunsBefore) → \(xrunsAfter)")
        XCTAssertEqual(load.statuses.filter { $0.key != "200" && $0.key != "201" }, [:], "every request answered")
        XCTAssertEqual(load.streamErrors, [], "every stream held")
        XCTAssertTrue(load.streamEvents.allSatisfy { $0 > 0 } && Set(load.streamEvents).count == 1, "every stream got the same events: \(load.streamEvents)")
        XCTAssertEqual(xrunsAfter, xrunsBefore, "no terminal xrun")

        // Memory: after the first minute (streams opened, caches warm) against the end.
        let settled = load.memoryKib.first { ($0.first ?? 0) ?? 0 >= (mode.isSmoke ? 5 : 60) }?.last ?? nil
        let end = memory.last ?? 0, peak = memory.max() ?? 0
        SuiteMode.emit("### The site service under load: event streams and requests held")
        SuiteMode.emit("")
        SuiteMode.emitTable(intro: """
            `intercom-site serve` with room A's terminal as its member and a site of two terminals on the rig; \
            \(streams) clients hold `GET /api/v1/events` open while \(rate) requests a second (presence, site, history, health \
            in turn over 5 kept-alive connections; every 10 s one of them a notification to B, whose events reach every stream) \
            run for \(Int(load.seconds)) s (Tests/Page/api_load.py, Python's http.client). The service's resident memory is \
            sampled every 5 s; settled is the first sample after \(mode.isSmoke ? 5 : 60) s.
            """, columns: ["figure", "value"])
        SuiteMode.emit("| requests answered (all 200 or 201) | \(load.requests) in \(Int(load.seconds)) s |")
        SuiteMode.emit(String(format: "| request time, median / 99th percentile / worst | %.1f / %.1f / %.1f ms |", load.p50 ?? 0, load.p99 ?? 0, load.max ?? 0))
        SuiteMode.emit("| events each of the \(streams) streams got | \(load.streamEvents.min() ?? 0) (all alike: \(Set(load.streamEvents).count == 1 ? "yes" : "no")) |")
        SuiteMode.emit(String(format: "| the service's memory: start, settled, end, peak | %.1f, %.1f, %.1f, %.1f MiB |",
                              (memory.first ?? 0) / 1024, (settled ?? 0) / 1024, end / 1024, peak / 1024))
        let growth = (end - (settled ?? end)) / 1024
        SuiteMode.emit(String(format: "| memory growth from settled to end (goal: flat, at most 2 MiB) | %+.1f MiB: %@ |", growth, growth <= 2 ? "met" : "not met"))
        SuiteMode.emit("| terminal xruns during the run | \(zip(xrunsAfter, xrunsBefore).map { $0 - $1 }.reduce(0, +)) |")
        SuiteMode.emit("")
    }

    /// Rooms A and B of a site with one notification type for B (no reminders), the built site
    /// service with A's terminal as its member, and a token with `scopes`.
    static func siteWithMember(type: String, tone: String, text: String, scopes: [String]) throws -> (CallRooms, SiteServiceProcess, String) {
        let rooms = try CallRooms(["roomA", "roomB"])
        do {
            return try siteWithMember(rooms, type: type, tone: tone, text: text, scopes: scopes)
        } catch {
            rooms.stopAll()
            throw error
        }
    }

    private static func siteWithMember(_ rooms: CallRooms, type: String, tone: String, text: String, scopes: [String]) throws -> (CallRooms, SiteServiceProcess, String) {
        let folder = rooms.dir + "/site"
        let types = "[notifications.\(type)]\nrecipients = [\"roomb\"]\ntone = \"\(tone)\"\ntext = \"\(text)\"\n"
        try SiteKit.create(folder, document: SiteKit.document(rooms, extra: "notification_reminder_s = 3600\n" + types))
        let a = try SiteKit.start(rooms, "rooma", folder: folder)
        try SiteKit.start(rooms, "roomb", folder: folder)
        XCTAssertTrue(rooms.waitOnline("rooma", ["roomb"]))
        let service = SiteServiceProcess(dir: folder)
        XCTAssertEqual(try service.addAccount("anna", role: "manager", password: "Empfang-2026!").status, 0)
        try service.start(member: try XCTUnwrap(a.controlSocket))
        let anna = try XCTUnwrap(try service.login("anna", password: "Empfang-2026!"))
        return (rooms, service, try service.token("Praxissoftware", scopes: scopes, as: anna))
    }
}
