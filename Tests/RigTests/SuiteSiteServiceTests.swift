import Foundation
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
}
