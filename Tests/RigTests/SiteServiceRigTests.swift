import Calls
import Control
import Foundation
import Glibc
import SiteService
import TestSupport
import XCTest

/// The site service changing a running site: the practice manager's change (a notification type
/// for one room, on every terminal's first key) goes through the API over TLS, is signed as the
/// next version and handed to the terminals, which take it; then a key press at one terminal
/// sends the new type and the other reads it aloud. Real daemons on the rig, the built service,
/// curl as the client; every fact from typed replies.
final class SiteServiceRigTests: XCTestCase {
    func testAChangeMadeThroughTheServiceReachesTheTerminalsAndItsKeySendsTheNewNotification() throws {
        let rooms = try CallRooms(["roomA", "roomB"])
        defer { rooms.stopAll() }
        let folder = rooms.dir + "/site"
        try SiteKit.create(folder, document: SiteKit.document(rooms))
        let fifo = "\(rooms.dir)/roomA-keys"
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        let a = try SiteKit.start(rooms, "rooma", folder: folder, own: "[keys]\ndevice = \"\(fifo)\"")
        let b = try SiteKit.start(rooms, "roomb", folder: folder)
        XCTAssertTrue(rooms.waitOnline("rooma", ["roomb"]), a.log)

        let service = SiteServiceProcess(dir: folder)
        defer { service.stop() }
        XCTAssertEqual(try service.addAccount("anna", role: "manager", password: "Empfang-2026!").status, 0)
        try service.start()
        let anna = try XCTUnwrap(try service.login("anna", password: "Empfang-2026!"))
        let view = try service.request("GET", "/api/v1/site", as: anna).decode(SiteEditor.View.self)
        XCTAssertEqual(view.version, 2)

        let edits = """
            {"version":2,"edits":[
             {"path":["notifications","material"],"value":{"label":"Material bringen","recipients":["roomb"],"text":"Bitte Material bringen","tone":"bell"}},
             {"path":["keys","map","KEY_1"],"value":"notify:material"}]}
            """
        let t0 = Date()
        let reply = try service.request("PATCH", "/api/v1/site", as: anna, json: edits)
        XCTAssertEqual(reply.status, 200, reply.text)
        let outcome = try reply.decode(SiteEditor.Outcome.self)
        print("site service: version \(outcome.plan.version) applied in \(String(format: "%.0f", Date().timeIntervalSince(t0) * 1000)) ms; "
              + "published: \(outcome.published.map { "\($0.room) \($0.result.rawValue)" }.joined(separator: ", "))")
        XCTAssertTrue(outcome.applied)
        XCTAssertEqual(outcome.plan.version, 3)
        XCTAssertEqual(outcome.published.map(\.result), [.took, .took], "each terminal took it from the service")
        for (id, daemon) in [("rooma", a), ("roomb", b)] {
            XCTAssertNotNil(daemon.waitForStatistics(timeout: 10) { $0.site?.version == 3 && $0.site?.appliedAt != nil },
                            "\(id) applied version 3 (its keys too): \(daemon.log)")
        }

        // The key the change put there sends the type the change made; B reads it aloud.
        let before = try b.statistics().calls?.speech.spoken ?? 0
        let keys = try FIFOKeyWriter(path: fifo)
        keys.press(2)  // KEY_1
        XCTAssertTrue(rooms.wait(5) {
            rooms.notifications("rooma").contains { $0.direction == .outgoing && $0.notification.type == "material" && $0.delivered == [RoomID("roomb")!] }
        }, "A sent it and B has it: \(a.log)")
        XCTAssertNotNil(b.waitForStatistics(timeout: 8) { ($0.calls?.speech.spoken ?? 0) > before }, "B read it aloud: \(b.log)")
        XCTAssertEqual(rooms.notifications("roomb").last?.notification.type, "material")
    }

    /// The done-when of the page: Debian's chromium, headless, driven by Selenium
    /// (Tests/Page/site_page.py), logs in after a wrong password, adds a notification type for B
    /// (previewed per terminal, applied, taken by both), puts it on every terminal's key 1, undoes
    /// that and restores it from the list of changes; a viewer's change is refused. Then the key press at A sends it and B reads it aloud.
    /// Screenshots of each page go to `INTERCOM_SCREENSHOTS` when set (docs/page), else the test's folder.
    func testThePageInChromiumAddsANotificationTypePutsItOnAKeyAndTheTerminalReadsItAloud() throws {
        let rooms = try CallRooms(["roomA", "roomB"])
        defer { rooms.stopAll() }
        let folder = rooms.dir + "/site"
        try SiteKit.create(folder, document: SiteKit.document(rooms, names: ["rooma": "Empfang", "roomb": "Labor"]))
        let fifo = "\(rooms.dir)/roomA-keys"
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        let a = try SiteKit.start(rooms, "rooma", folder: folder, own: "[keys]\ndevice = \"\(fifo)\"")
        let b = try SiteKit.start(rooms, "roomb", folder: folder)
        XCTAssertTrue(rooms.waitOnline("rooma", ["roomb"]), a.log)

        let service = SiteServiceProcess(dir: folder)
        defer { service.stop() }
        XCTAssertEqual(try service.addAccount("anna", role: "manager", password: "Empfang-2026!").status, 0)
        XCTAssertEqual(try service.addAccount("vera", role: "viewer", password: "Wartezimmer-7").status, 0)
        try service.start()

        let screenshots = ProcessInfo.processInfo.environment["INTERCOM_SCREENSHOTS"] ?? rooms.dir
        let arguments: [String: String] = [
            "url": "https://127.0.0.1:\(service.port)/", "certificate": folder + "/service/tls/server.pem", "lang": "de",
            "manager": "anna", "manager_password": "Empfang-2026!", "viewer": "vera", "viewer_password": "Wartezimmer-7",
            "label": "Material bringen", "text": "Bitte Material ins Labor bringen", "room": "roomb", "key": "KEY_1", "screenshots": screenshots,
        ]
        let python = Repo.root + "/.venv-api/bin/python"
        XCTAssertTrue(FileManager.default.isExecutableFile(atPath: python), "scripts/setup.sh installs selenium into .venv-api")
        let walk = try SiteServiceProcess.run([python, Repo.root + "/Tests/Page/site_page.py",
                                               String(decoding: try JSONSerialization.data(withJSONObject: arguments), as: UTF8.self)])
        let facts = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(walk.out.utf8)) as? [String: Any], "the walk's facts: \(walk.out)\(walk.err)")
        func fact(_ name: String) -> String { facts[name].map { "\($0)" } ?? "" }
        print("page: \(facts.filter { $0.key != "screenshots" }.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: "\n  "))")
        XCTAssertEqual(facts["ok"] as? Bool, true, "the walk went through: \(fact("error"))\n\(walk.err.suffix(2000))")
        XCTAssertEqual(fact("wrong_password"), "Name oder Passwort falsch.")
        XCTAssertEqual(fact("version_before"), "2")
        XCTAssertTrue(fact("notification_preview").contains("Benachrichtigung „Material bringen“ kommt hinzu"), fact("notification_preview"))
        XCTAssertTrue(fact("notification_preview").contains("Empfang") && fact("notification_preview").contains("Labor"), "both terminals learn the type")
        XCTAssertEqual(fact("notification_result"), "Version 3 gilt.")
        XCTAssertEqual(fact("notification_published"), "Empfang: hat sie übernommen\nLabor: hat sie übernommen")
        XCTAssertTrue(fact("key_preview").contains("Taste 1: sendet „Material bringen“"), fact("key_preview"))
        XCTAssertEqual(fact("key_result"), "Version 4 gilt.")
        XCTAssertTrue(fact("undo_preview").contains("Taste 1 ist nicht mehr belegt"), fact("undo_preview"))
        XCTAssertEqual(fact("undo_result"), "Version 5 gilt.")
        XCTAssertTrue(fact("restore_preview").contains("Taste 1: sendet „Material bringen“"), fact("restore_preview"))
        XCTAssertEqual(fact("restore_result"), "Version 6 gilt.")
        XCTAssertEqual(fact("version_after"), "6")
        XCTAssertTrue(fact("viewer_sees_types").contains("Material bringen"), "a viewer sees the site")
        XCTAssertEqual(facts["viewer_form_shown"] as? Bool, false, "a viewer's page offers no change")
        XCTAssertEqual(fact("viewer_status"), "403", "the change a viewer sends anyway is refused")
        XCTAssertTrue(fact("viewer_refused").hasPrefix("Dazu fehlt Ihnen die Berechtigung"), fact("viewer_refused"))
        XCTAssertEqual((facts["screenshots"] as? [String])?.count, 13, "every page photographed")

        for (id, daemon) in [("rooma", a), ("roomb", b)] {
            XCTAssertNotNil(daemon.waitForStatistics(timeout: 10) { $0.site?.version == 6 && $0.site?.appliedAt != nil }, "\(id) runs version 6: \(daemon.log)")
        }
        let before = try b.statistics().calls?.speech.spoken ?? 0
        try FIFOKeyWriter(path: fifo).press(2)  // KEY_1
        XCTAssertTrue(rooms.wait(5) {
            rooms.notifications("roomb").contains { $0.notification.type == "material-bringen" }
        }, "B has the type made on the page: \(b.log)")
        XCTAssertNotNil(b.waitForStatistics(timeout: 8) { ($0.calls?.speech.spoken ?? 0) > before }, "B read it aloud: \(b.log)")

        let anna = try XCTUnwrap(try service.login("anna", password: "Empfang-2026!"))
        let audit = try service.request("GET", "/api/v1/audit", as: anna).decode(SiteServer.List<AuditEntry>.self).items
        XCTAssertEqual(audit.filter { $0.action == "site.edit" && $0.actor == "anna" }.count, 2)
        XCTAssertEqual(audit.filter { $0.action == "site.restore" && $0.actor == "anna" }.count, 2)
        XCTAssertTrue(audit.contains { $0.action == "refused" && $0.actor == "vera" }, "the viewer's attempt is in the audit log")
        XCTAssertTrue(audit.contains { $0.action == "login.refused" && $0.actor == "anna" }, "so is the wrong password")
    }
}
