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
    /// (previewed per terminal, applied, taken by every terminal), puts it on every terminal's key 1,
    /// undoes that and restores it from the list of changes; approves the three pending terminals
    /// with the codes read at them and revokes C; a viewer's change is refused. Then the key press at A sends it and B reads it aloud.
    /// Screenshots of each page go to `INTERCOM_SCREENSHOTS` when set (docs/page), else the test's folder.
    func testThePageInChromiumAddsANotificationTypePutsItOnAKeyAndTheTerminalReadsItAloud() throws {
        let rooms = try CallRooms(["roomA", "roomB", "roomC"])
        defer { rooms.stopAll() }
        let folder = rooms.dir + "/site"
        try SiteKit.create(folder, document: SiteKit.document(rooms, names: ["rooma": "Empfang", "roomb": "Labor", "roomc": "Lager"]))
        let fifo = "\(rooms.dir)/roomA-keys"
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        let leds = "\(rooms.dir)/leds"
        try TerminalLightsRigTests.makeLEDs(leds)
        let a = try SiteKit.start(rooms, "rooma", folder: folder, own: "[keys]\ndevice = \"\(fifo)\"\n[lights]\nled_dir = \"\(leds)\"")
        let b = try SiteKit.start(rooms, "roomb", folder: folder)
        let c = try SiteKit.start(rooms, "roomc", folder: folder)
        XCTAssertTrue(rooms.waitOnline("rooma", ["roomb", "roomc"]), a.log)
        // The codes the installer reads at each terminal.
        let codes = try [a, b, c].map { try XCTUnwrap(try $0.statistics().site?.terminal?.enrolmentCode, "pending with a code") }

        let service = SiteServiceProcess(dir: folder)
        defer { service.stop() }
        XCTAssertEqual(try service.addAccount("anna", role: "manager", password: "Empfang-2026!").status, 0)
        XCTAssertEqual(try service.addAccount("vera", role: "viewer", password: "Wartezimmer-7").status, 0)
        try service.start(member: try XCTUnwrap(a.controlSocket))

        let screenshots = ProcessInfo.processInfo.environment["INTERCOM_SCREENSHOTS"] ?? rooms.dir
        let arguments: [String: Any] = [
            "url": "https://127.0.0.1:\(service.port)/", "certificate": folder + "/service/tls/server.pem", "lang": "de",
            "manager": "anna", "manager_password": "Empfang-2026!", "viewer": "vera", "viewer_password": "Wartezimmer-7",
            "label": "Material bringen", "text": "Bitte Material ins Labor bringen", "room": "roomb", "key": "KEY_1", "screenshots": screenshots,
            "approve": [["rooma", codes[0]], ["roomb", codes[1]], ["roomc", codes[2]]], "revoke": "roomc",
            "live_type": "material-bringen", "live_room_name": "Labor",
            "group_name": "Labor und Lager", "group_rooms": ["roomb", "roomc"], "call_label": "Labor rufen", "room_may_call": ["rooma"],
            "call_key": "KEY_2", "own_room": "rooma", "own_room_name": "Empfang", "own_key": "KEY_3", "own_led": "green",
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
        // Each took it from the service, or had it already from another terminal (they pass it on).
        let published = fact("notification_published").split(separator: "\n").map { String($0) }
        XCTAssertEqual(published.map { $0.components(separatedBy: ": ")[0] }, ["Empfang", "Labor", "Lager"], fact("notification_published"))
        XCTAssertTrue(published.allSatisfy { $0.hasSuffix(": hat sie übernommen") || $0.hasSuffix(": hatte sie schon") }, fact("notification_published"))
        XCTAssertTrue(fact("key_preview").contains("Taste 1: sendet „Material bringen“"), fact("key_preview"))
        XCTAssertEqual(fact("key_result"), "Version 4 gilt.")
        XCTAssertTrue(fact("undo_preview").contains("Taste 1 ist nicht mehr belegt"), fact("undo_preview"))
        XCTAssertEqual(fact("undo_result"), "Version 5 gilt.")
        XCTAssertTrue(fact("restore_preview").contains("Taste 1: sendet „Material bringen“"), fact("restore_preview"))
        XCTAssertEqual(fact("restore_result"), "Version 6 gilt.")
        XCTAssertEqual(fact("version_after"), "6")
        XCTAssertTrue(fact("approve_rooma_preview").contains("Das Terminal mit dem Code \(codes[0]) wird für „Empfang“ freigegeben."), fact("approve_rooma_preview"))
        XCTAssertEqual(fact("approve_roomc_result"), "Version 9 gilt.")
        XCTAssertEqual(fact("terminals_approved").components(separatedBy: "freigegeben").count - 1, 3, fact("terminals_approved"))
        XCTAssertEqual(fact("terminals_approved").components(separatedBy: " jetzt ").count - 1, 3, "each reachable now: \(fact("terminals_approved"))")
        XCTAssertTrue(fact("revoke_preview").contains("„Lager“ wird gesperrt"), fact("revoke_preview"))
        XCTAssertEqual(fact("revoke_result"), "Version 10 gilt.")
        XCTAssertTrue(fact("terminals_after_revoke").contains("gesperrt"), fact("terminals_after_revoke"))
        XCTAssertTrue(fact("loopback_state").hasPrefix("Fertig: der Ton kam nach"), "B's loopback test from the page: \(fact("loopback_state"))")
        XCTAssertEqual(facts["loopback_plot_shown"] as? Bool, true, "its plot shown")
        XCTAssertEqual(fact("terminal_health").components(separatedBy: "in Ordnung").count - 1, 3,
                       "each terminal tells it is fine (sound running): \(fact("terminal_health"))")
        XCTAssertEqual(fact("version_final"), "10")
        XCTAssertTrue(fact("viewer_sees_types").contains("Material bringen"), "a viewer sees the site")
        XCTAssertEqual(facts["viewer_form_shown"] as? Bool, false, "a viewer's page offers no change")
        XCTAssertEqual(fact("viewer_status"), "403", "the change a viewer sends anyway is refused")
        XCTAssertTrue(fact("viewer_refused").hasPrefix("Dazu fehlt Ihnen die Berechtigung"), fact("viewer_refused"))
        XCTAssertEqual(fact("test_sent"), "„Material bringen“ gesendet an Labor.")
        let listened = try XCTUnwrap(facts["listened"] as? [String: Any], "the preview played")
        XCTAssertGreaterThan(listened["duration"] as? Double ?? 0, 1.5, "its tone, then its text: \(listened)")
        XCTAssertGreaterThan(listened["played"] as? Double ?? 0, 0.3, "playing in the browser: \(listened)")
        XCTAssertTrue(listened["error"] is NSNull, "\(listened)")
        XCTAssertTrue(fact("live_presence").contains("Labor\terreichbar") || fact("live_presence").contains("Labor erreichbar"), fact("live_presence"))
        XCTAssertTrue(fact("live_events").contains("„Material bringen“ ist bei Labor angekommen"), fact("live_events"))
        XCTAssertTrue(fact("live_events").contains("„Material bringen“: 1 von 1 haben sie"), fact("live_events"))
        // Call buttons, groups and who may call whom, in words; the history of the service's terminal.
        XCTAssertTrue(fact("group_preview").contains("Gruppe „labor-und-lager“ kommt hinzu"), fact("group_preview"))
        XCTAssertEqual(fact("group_result"), "Version 11 gilt.")
        XCTAssertTrue(fact("button_preview").contains("Ruftaste „Labor rufen“ kommt hinzu"), fact("button_preview"))
        XCTAssertEqual(fact("button_result"), "Version 12 gilt.")
        XCTAssertTrue(fact("permission_preview").contains("Labor darf anrufen: Empfang"), fact("permission_preview"))
        XCTAssertTrue(fact("permission_preview").contains("Empfang darf anrufen: Labor, Lager"), "the others keep calling everyone: \(fact("permission_preview"))")
        XCTAssertEqual(fact("permission_result"), "Version 13 gilt.")
        XCTAssertTrue(fact("buttons").contains("Labor rufen Labor Gespräch"), fact("buttons"))
        XCTAssertTrue(fact("groups").contains("labor-und-lager Labor, Lager"), fact("groups"))
        XCTAssertTrue(fact("permissions").contains("Labor Empfang") && fact("permissions").contains("Empfang Labor, Lager"), fact("permissions"))
        XCTAssertTrue(fact("call_key_preview").contains("Taste 2: ruft „Labor rufen“"), fact("call_key_preview"))
        XCTAssertEqual(fact("version_calling"), "14")
        XCTAssertTrue(fact("history").contains("„Material bringen“"), fact("history"))
        XCTAssertTrue(fact("history").contains("Empfang → Labor"), "the whole site's history, who to whom: \(fact("history"))")
        // A key and a light of the reception's own: previewed for the reception alone; the shared keys stay.
        XCTAssertTrue(fact("own_hint_before").contains("„Empfang“ hat die Belegung aller Terminals"), fact("own_hint_before"))
        XCTAssertTrue(fact("own_key_preview").contains("Taste 3: Nicht stören an/aus"), fact("own_key_preview"))
        XCTAssertFalse(fact("own_key_preview").contains("Labor"), "only the reception changes: \(fact("own_key_preview"))")
        XCTAssertEqual(fact("own_key_result"), "Version 15 gilt.")
        XCTAssertTrue(fact("own_hint_after").contains("„Empfang“ hat eine eigene Belegung"), fact("own_hint_after"))
        XCTAssertTrue(fact("own_keys").contains("1 sendet „Material bringen“") && fact("own_keys").contains("3 Nicht stören an/aus"),
                      "the shared keys copied, and its own: \(fact("own_keys"))")
        XCTAssertTrue(fact("light_preview").contains("nicht stören: Licht „green“ leuchtet"), fact("light_preview"))
        XCTAssertFalse(fact("light_preview").contains("Labor"), fact("light_preview"))
        XCTAssertEqual(fact("light_result"), "Version 16 gilt.")
        XCTAssertTrue(fact("own_lights").contains("nicht stören green leuchtet"), fact("own_lights"))
        XCTAssertFalse(fact("shared_keys").contains("Nicht stören"), "every terminal's keys are unchanged: \(fact("shared_keys"))")
        XCTAssertTrue(fact("shared_lights").contains("Keine Lichter belegt."), fact("shared_lights"))
        XCTAssertEqual(fact("version_own"), "16")
        XCTAssertEqual((facts["screenshots"] as? [String])?.count, 31, "every page photographed")

        for (id, daemon) in [("rooma", a), ("roomb", b)] {
            XCTAssertNotNil(daemon.waitForStatistics(timeout: 10) {
                $0.site?.version == 16 && $0.site?.appliedAt != nil && $0.site?.terminal?.standing == .approved && $0.calls?.protection == .terminalKeys
            }, "\(id) runs version 16, approved, sealing by terminal keys: \(daemon.log)")
        }
        XCTAssertNotNil(c.waitForStatistics(timeout: 10) { $0.site?.terminal?.standing == .revoked }, "C knows it is revoked: \(c.log)")
        XCTAssertTrue(rooms.waitOnline("rooma", ["roomb"], timeout: 10), "A and B hear each other under their own keys")
        // The page's test reached B and was read there; then the key sends one more.
        func material() -> Int { rooms.notifications("roomb").filter { $0.notification.type == "material-bringen" }.count }
        XCTAssertEqual(material(), 1, "the test sent from the page reached B")
        XCTAssertNotNil(b.waitForStatistics(timeout: 10) { ($0.calls?.speech.spoken ?? 0) >= 1 }, "B read the test aloud: \(b.log)")
        let before = try b.statistics().calls?.speech.spoken ?? 0
        try FIFOKeyWriter(path: fifo).press(2)  // KEY_1
        XCTAssertTrue(rooms.wait(5) { material() == 2 }, "B has the type made on the page from the key too: \(b.log)")
        XCTAssertNotNil(b.waitForStatistics(timeout: 8) { ($0.calls?.speech.spoken ?? 0) > before }, "B read it aloud: \(b.log)")
        // The call button made on the page, on key 2 at A, calls B; B may call only A now.
        try FIFOKeyWriter(path: fifo).press(3)  // KEY_2
        XCTAssertTrue(rooms.wait(8) { rooms.isConnected("roomb") }, "key 2 at A called B: \(rooms.status("roomb").debugDescription)")
        _ = try rooms.control("rooma", .perform(.hangUp))
        XCTAssertTrue(rooms.wait(5) { rooms.isIdle("roomb") && rooms.isIdle("rooma") })
        guard case .failure(let refusal) = try rooms.control("roomb", .perform(.callRooms([RoomID("roomc")!]))) else {
            return XCTFail("B may not call C any more")
        }
        XCTAssertEqual(refusal.code, .notPermitted, "\(refusal)")
        // Key 3 at the reception is its own: do not disturb, shown by its own light; B has neither.
        XCTAssertEqual(rooms.status("rooma")?.lights, [StatusLight(led: "green", pattern: "off")], "the reception's light, dark")
        XCTAssertEqual(rooms.status("roomb")?.lights, [], "B has no lights")
        try FIFOKeyWriter(path: fifo).press(4)  // KEY_3
        XCTAssertTrue(rooms.wait(3) { rooms.status("rooma")?.doNotDisturb == true }, "key 3 at A: do not disturb")
        XCTAssertTrue(rooms.wait(3) { rooms.status("rooma")?.lights == [StatusLight(led: "green", pattern: "steady", state: "dnd")] },
                      "\(rooms.status("rooma")?.lights ?? [])")
        XCTAssertTrue(rooms.wait(3) { (try? String(contentsOfFile: leds + "/green/brightness", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) == "255" }, "the LED lit")

        let anna = try XCTUnwrap(try service.login("anna", password: "Empfang-2026!"))
        let audit = try service.request("GET", "/api/v1/audit", as: anna).decode(SiteServer.List<AuditEntry>.self).items
        XCTAssertEqual(audit.filter { $0.action == "site.edit" && $0.actor == "anna" }.count, 8)
        XCTAssertEqual(audit.filter { $0.action == "site.restore" && $0.actor == "anna" }.count, 2)
        XCTAssertEqual(audit.filter { $0.action == "terminal.approve" && $0.actor == "anna" }.count, 3)
        XCTAssertEqual(audit.filter { $0.action == "terminal.revoke" && $0.actor == "anna" }.count, 1)
        XCTAssertEqual(audit.filter { $0.action == "notification.sent" && $0.actor == "anna" }.count, 1, "the test sent from the page")
        XCTAssertTrue(audit.contains { $0.action == "refused" && $0.actor == "vera" }, "the viewer's attempt is in the audit log")
        XCTAssertTrue(audit.contains { $0.action == "login.refused" && $0.actor == "anna" }, "so is the wrong password")
    }

    /// Approval and revocation through the API, with terminals that run secure (no key, no
    /// signalling until approved): the service lists both pending with the key each shows; a
    /// wrong code and a viewer are refused; each approved with the code read at it, they seal
    /// to each other by terminal keys; one revoked is out at once, and its key is never approved again.
    func testTerminalsAreApprovedAndRevokedThroughTheService() throws {
        let ids = ["desk1", "desk2"]
        let rooms = try CallRooms(ids, soundCards: false)
        defer { rooms.stopAll() }
        let folder = rooms.dir + "/site"
        try SiteKit.create(folder, document: SiteKit.document(rooms))  // versions 1 and 2
        let daemons = try ids.map { try SiteKit.start(rooms, $0, folder: folder, lab: false) }
        let service = SiteServiceProcess(dir: folder)
        defer { service.stop() }
        XCTAssertEqual(try service.addAccount("anna", role: "manager", password: "Empfang-2026!").status, 0)
        XCTAssertEqual(try service.addAccount("vera", role: "viewer", password: "Wartezimmer-7").status, 0)
        try service.start()
        let anna = try XCTUnwrap(try service.login("anna", password: "Empfang-2026!"))
        let vera = try XCTUnwrap(try service.login("vera", password: "Wartezimmer-7"))
        func terminals() throws -> [SiteEditor.Terminal] {
            try service.request("GET", "/api/v1/terminals", as: anna).decode(SiteServer.List<SiteEditor.Terminal>.self).items
        }

        let keys = try daemons.map { try XCTUnwrap(try $0.statistics().site?.terminal?.key) }
        let codes = try daemons.map { try XCTUnwrap(try $0.statistics().site?.terminal?.enrolmentCode, "pending with a code") }
        let listed = try terminals()
        XCTAssertEqual(listed.map(\.room), ids)
        XCTAssertEqual(listed.map(\.standing), [.pending, .pending])
        XCTAssertEqual(listed.map(\.identity), keys, "the key each terminal shows")
        XCTAssertEqual(listed.map(\.setUpFor), ids)

        let wrong = try service.request("POST", "/api/v1/terminals/desk1/approve", as: anna, json: #"{"code":"000 000 000 000"}"#)
        XCTAssertEqual(wrong.status, 422, wrong.text)
        XCTAssertEqual(try wrong.decode(ProblemDocument.self).field, "code")
        XCTAssertEqual(try service.request("POST", "/api/v1/terminals/desk1/approve", as: vera, json: #"{"code":"\#(codes[0])"}"#).status, 403)

        for (n, id) in ids.enumerated() {
            let approved = try service.request("POST", "/api/v1/terminals/\(id)/approve", as: anna, json: #"{"code":"\#(codes[n])"}"#)
            XCTAssertEqual(approved.status, 200, approved.text)
            XCTAssertEqual(try approved.decode(SiteEditor.Outcome.self).plan.version, UInt64(3 + n))
        }
        for (id, d) in zip(ids, daemons) {
            XCTAssertNotNil(d.waitForStatistics(timeout: 15) {
                $0.calls?.protection == .terminalKeys && $0.site?.version == 4 && $0.site?.appliedAt != nil && $0.site?.terminal?.standing == .approved
            }, "\(id) is approved and seals by terminal keys: \(d.log)")
        }
        XCTAssertTrue(rooms.waitOnline("desk1", ["desk2"], timeout: 10), "the two hear each other under their own keys")
        XCTAssertEqual(try terminals().map(\.standing), [.approved, .approved])

        let revoked = try service.request("POST", "/api/v1/terminals/desk2/revoke", as: anna)
        XCTAssertEqual(revoked.status, 200, revoked.text)
        XCTAssertNotNil(daemons[1].waitForStatistics(timeout: 10) { $0.site?.terminal?.standing == .revoked }, daemons[1].log)
        XCTAssertEqual(try terminals().map(\.standing), [.approved, .revoked])
        let again = try service.request("POST", "/api/v1/terminals/desk2/approve", as: anna, json: #"{"code":"\#(codes[1])"}"#)
        XCTAssertEqual(again.status, 422, "a revoked key is never approved again: \(again.text)")
        XCTAssertEqual(try service.request("POST", "/api/v1/terminals/desk2/revoke", as: anna).status, 409, "nothing left to revoke")

        let audit = try service.request("GET", "/api/v1/audit", as: anna).decode(SiteServer.List<AuditEntry>.self).items
        XCTAssertEqual(audit.filter { $0.action == "terminal.approve" }.count, 2)
        XCTAssertEqual(audit.filter { $0.action == "terminal.revoke" }.count, 1)
        XCTAssertTrue(audit.contains { $0.action == "refused" && $0.actor == "vera" })
    }

    /// The practice software's one request: "Nächster Patient" sent through the API with a token
    /// of scope notify. The service takes part in signalling through the reception's terminal (its
    /// control socket: `--member`); the examination room's terminal reads it aloud. The event
    /// stream shows it sent and delivered with ids, and a stream that comes back with the first
    /// id it saw gets exactly the rest again. Presence and history read through the same member;
    /// bad input names its field, a token without the scope is refused.
    func testANotificationSentThroughTheAPIIsReadAloudAndTheEventStreamReplaysFromTheLastID() throws {
        let rooms = try CallRooms(["roomA", "roomB"])
        defer { rooms.stopAll() }
        let folder = rooms.dir + "/site"
        let types = """
            [notifications.naechster-patient]
            label = "Nächster Patient"
            recipients = ["roomb"]
            text = "Nächster Patient bitte"
            tone = "bell"
            """
        try SiteKit.create(folder, document: SiteKit.document(rooms, names: ["rooma": "Empfang", "roomb": "Behandlung 1"], extra: types))
        let startedAt = Date()
        let a = try SiteKit.start(rooms, "rooma", folder: folder)
        let b = try SiteKit.start(rooms, "roomb", folder: folder)
        XCTAssertTrue(rooms.waitOnline("rooma", ["roomb"]), a.log)

        let service = SiteServiceProcess(dir: folder)
        defer { service.stop() }
        XCTAssertEqual(try service.addAccount("anna", role: "manager", password: "Empfang-2026!").status, 0)
        try service.start(member: try XCTUnwrap(a.controlSocket))
        let anna = try XCTUnwrap(try service.login("anna", password: "Empfang-2026!"))
        let software = try service.token("Praxissoftware", scopes: ["notify", "read"], as: anna)
        let reader = try service.token("Wartezimmer", scopes: ["read"], as: anna)
        func asSoftware(_ method: String, _ path: String, token: String = software, json: String? = nil) throws -> SiteServiceProcess.Reply {
            try service.request(method, path, json: json, headers: ["Authorization: Bearer \(token)"])
        }

        let stream = try service.events(token: software)
        defer { stream.stop() }
        XCTAssertTrue(rooms.wait(5) { stream.opened }, "the stream is open")

        // The one request of docs/api.md.
        let before = try b.statistics().calls?.speech.spoken ?? 0
        let t0 = Date()
        let sent = try asSoftware("POST", "/api/v1/notifications", json: #"{"type":"naechster-patient"}"#)
        XCTAssertEqual(sent.status, 201, sent.text)
        struct Sent: Decodable { var notificationId: String; var to: [String] }
        let reply = try sent.decode(Sent.self)
        XCTAssertEqual(reply.to, ["roomb"])
        XCTAssertNotNil(b.waitForStatistics(timeout: 8) { ($0.calls?.speech.spoken ?? 0) > before }, "B read it aloud: \(b.log)")
        print("api: notification answered in \(String(format: "%.0f", Date().timeIntervalSince(t0) * 1000)) ms, read aloud at B")
        XCTAssertEqual(rooms.notifications("roomb").last?.notification.type, "naechster-patient")

        XCTAssertTrue(rooms.wait(5) { stream.events.contains { $0.name == "notification_sent" && $0.data.contains("\"\(reply.notificationId)\"") } },
                      "delivered, then sent (all have it), in the stream: \(stream.events)")
        let seen = stream.events.filter { $0.id != nil }
        XCTAssertEqual(seen.map(\.name).filter { $0.hasPrefix("notification_") }, ["notification_delivered", "notification_sent"])
        XCTAssertEqual(seen.compactMap(\.id), seen.compactMap(\.id).sorted(), "ids increase")
        // Back with the first id it saw: exactly the rest again.
        let again = try service.events(token: reader, lastEventID: seen[0].id, name: "again")
        defer { again.stop() }
        XCTAssertTrue(rooms.wait(5) { again.events.count >= seen.count - 1 }, "\(again.events)")
        XCTAssertEqual(again.events.prefix(seen.count - 1).map(\.id), seen.dropFirst().map(\.id))
        XCTAssertEqual(again.events.prefix(seen.count - 1).map(\.data), seen.dropFirst().map(\.data))

        // The same events over the WebSocket, resuming after the first one: the same ids, names
        // and JSON. A page of another origin, and a client without a token, are refused.
        func socket(_ query: String, token: String? = software, origin: String? = nil) throws -> [String: Any] {
            let arguments: [String: Any] = [
                "url": "wss://127.0.0.1:\(service.port)/api/v1/events/socket\(query)", "ca": folder + "/service/tls/ca.pem",
                "token": token ?? "", "origin": origin ?? "", "until": "notification_sent", "until_text": reply.notificationId, "seconds": 10,
            ]
            let run = try SiteServiceProcess.run([Repo.root + "/.venv-api/bin/python", Repo.root + "/Tests/Page/event_socket.py",
                                                  String(decoding: try JSONSerialization.data(withJSONObject: arguments), as: UTF8.self)])
            return try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(run.out.utf8)) as? [String: Any], "\(run.out)\(run.err)")
        }
        let overSocket = try socket("?last_event_id=\(seen[0].id!)", origin: "https://127.0.0.1:\(service.port)")
        XCTAssertEqual(overSocket["status"] as? Int, 101, "\(overSocket)")
        let socketEvents = try XCTUnwrap(overSocket["events"] as? [[String: Any]])
        XCTAssertEqual(socketEvents.map { ($0["id"] as? NSNumber)?.uint64Value }, seen.dropFirst().map(\.id), "\(socketEvents)")
        XCTAssertEqual(socketEvents.map { $0["event"] as? String }, seen.dropFirst().map(\.name))
        func canonical(_ json: Any) throws -> String {
            String(decoding: try JSONSerialization.data(withJSONObject: json, options: [.sortedKeys, .fragmentsAllowed]), as: UTF8.self)
        }
        XCTAssertEqual(try socketEvents.map { try canonical($0["data"] as Any) },
                       try seen.dropFirst().map { try canonical(try JSONSerialization.jsonObject(with: Data($0.data.utf8))) }, "the same JSON")
        // Refusals come as the close frame's code and reason (a browser sees no handshake status).
        let foreign = try socket("", origin: "https://praxis.example")
        XCTAssertEqual(foreign["close_code"] as? Int, 4403, "\(foreign)")
        XCTAssertEqual((foreign["events"] as? [Any])?.count, 0, "nothing before the refusal")
        let anonymous = try socket("", token: nil)
        XCTAssertEqual(anonymous["close_code"] as? Int, 4401, "\(anonymous)")
        let badResume = try socket("?last_event_id=gestern")
        XCTAssertEqual(badResume["close_code"] as? Int, 4400, "\(badResume)")
        XCTAssertTrue((badResume["close_reason"] as? String)?.contains("last_event_id") == true, "\(badResume)")
        XCTAssertNil(overSocket["close_code"], "the good socket was not refused: \(overSocket)")

        // Presence and history through the same member, in the control socket's own form.
        let presence = try asSoftware("GET", "/api/v1/presence", token: reader)
        XCTAssertEqual(presence.status, 200, presence.text)
        XCTAssertTrue(try XCTUnwrap(try JSONSerialization.jsonObject(with: presence.body) as? [String: Any]).description.contains("roomb"), presence.text)
        let history = try asSoftware("GET", "/api/v1/history?limit=10", token: reader)
        XCTAssertEqual(history.status, 200, history.text)
        XCTAssertTrue(history.text.contains("\(reply.notificationId)"), history.text)
        // The whole site's history: each terminal asked (its reply sealed for the service), the
        // notification once, as its sender's terminal recorded it, delivered to B.
        let whole = try asSoftware("GET", "/api/v1/history/site?limit=10", token: reader)
        XCTAssertEqual(whole.status, 200, whole.text)
        let site = try whole.decode(SiteHistory.self)
        XCTAssertEqual(site.unanswered, [], "every terminal answered")
        let once = site.notifications.filter { $0.record.notification.id.description == reply.notificationId }
        XCTAssertEqual(once.map(\.room), ["rooma"], "once, from the sender's terminal: \(whole.text)")
        XCTAssertEqual(once.first?.record.direction, .outgoing)

        // How each terminal is doing, as the member hears it (its own: as it runs), on the
        // terminals list: the sound devices run, no self-test is configured.
        let listed = try service.request("GET", "/api/v1/terminals", as: anna).decode(SiteServer.List<SiteEditor.Terminal>.self).items
        XCTAssertEqual(listed.map(\.room), ["rooma", "roomb"])
        for terminal in listed {
            let health = try XCTUnwrap(terminal.health, "\(terminal.room) tells how it is doing: \(listed)")
            XCTAssertEqual(health.audio, .running, terminal.room)
            XCTAssertEqual(health.selfTest, TerminalHealth.Check.none, terminal.room)
            XCTAssertFalse(health.isFaulty, terminal.room)
            XCTAssertLessThanOrEqual(Double(health.uptimeSeconds), Date().timeIntervalSince(startedAt) + 1, terminal.room)
        }

        // B's device loopback test from the service: an order signed for B alone, started once B
        // is quiet (the read-out over), followed until done; its round trip, report and plot
        // served. A read token may look, not start; a room that does not exist is named.
        var started: SiteServiceProcess.Reply?
        XCTAssertTrue(rooms.wait(10) {
            started = try? service.request("POST", "/api/v1/terminals/roomb/loopback", as: anna)
            return started?.status == 202
        }, "started: \(started?.status ?? 0) \(started?.text ?? "")")
        var loop: [String: Any] = [:]
        XCTAssertTrue(rooms.wait(20) {
            let r = try? service.request("GET", "/api/v1/terminals/roomb/loopback", as: anna)
            loop = r.flatMap { try? JSONSerialization.jsonObject(with: $0.body) as? [String: Any] } ?? [:]
            return (loop["status"] as? [String: Any])?["state"] as? String == "done"
        }, "the test ends: \(loop)")
        let status = try XCTUnwrap(loop["status"] as? [String: Any], "\(loop)")
        let trip = try XCTUnwrap(status["round_trip_ms"] as? Double, "the chirp came back: \(status)")
        print(String(format: "api: B's device loopback test from the service: round trip %.1f ms", trip))
        XCTAssertTrue((5...500).contains(trip), "round trip \(trip) ms")
        XCTAssertTrue((loop["report"] as? String)?.contains("round trip") == true, "\(loop["report"] ?? "no report")")
        let plot = try service.request("GET", "/api/v1/terminals/roomb/loopback/plot", as: anna)
        XCTAssertEqual(plot.status, 200, plot.text)
        XCTAssertTrue(plot.text.hasPrefix("<svg"), String(plot.text.prefix(80)))
        XCTAssertEqual(try asSoftware("POST", "/api/v1/terminals/roomb/loopback", token: reader).status, 403, "a read token may not start one")
        XCTAssertEqual(try asSoftware("GET", "/api/v1/terminals/roomb/loopback", token: reader).status, 200, "but may look")
        XCTAssertEqual(try service.request("POST", "/api/v1/terminals/nowhere/loopback", as: anna).status, 404)

        // Refusals: each names what is wrong, nothing is sent.
        let unknown = try asSoftware("POST", "/api/v1/notifications", json: #"{"type":"kaffee"}"#)
        XCTAssertEqual(unknown.status, 422, unknown.text)
        XCTAssertEqual(try unknown.decode(ProblemDocument.self).field, "type")
        let malformed = try asSoftware("POST", "/api/v1/notifications", json: #"{"type":"Nächster Patient"}"#)
        XCTAssertEqual(malformed.status, 400, malformed.text)
        XCTAssertEqual(try malformed.decode(ProblemDocument.self).field, "type")
        let missing = try asSoftware("POST", "/api/v1/notifications", json: #"{}"#)
        XCTAssertEqual(try missing.decode(ProblemDocument.self).field, "type", missing.text)
        let readOnly = try asSoftware("POST", "/api/v1/notifications", token: reader, json: #"{"type":"naechster-patient"}"#)
        XCTAssertEqual(readOnly.status, 403, readOnly.text)
        XCTAssertEqual(rooms.notifications("rooma").filter { $0.direction == .outgoing }.count, 1, "only the one sent")
        let audit = try service.request("GET", "/api/v1/audit", as: anna).text
        XCTAssertTrue(audit.contains("notification.sent") && audit.contains("token:Praxissoftware"), audit)
        XCTAssertTrue(audit.contains("terminal.loopback"), "the loopback test started, in the audit log")

        // SIGTERM with both streams open: they end, and so does the service, at once.
        let stopping = service.stop()
        print("api: the service stopped in \(String(format: "%.2f", stopping)) s with two event streams open")
        XCTAssertLessThan(stopping, 3, "the open streams do not hold the service up: \(service.ended ?? "?"): \(service.log)")
    }

    /// The practice software places a call at the service's terminal (the reception's, with its
    /// audio on the rig), B rings and connects, the software hangs up; an emergency call too.
    /// A notification B sent to the reception is acknowledged through the API, and B learns who
    /// acknowledged. Bad input names its field; a token without `calls` is refused; a call on
    /// nothing is a 409 the software can read.
    func testCallsPlacedAndHungUpAndANotificationAcknowledgedThroughTheAPI() throws {
        let rooms = try CallRooms(["roomA", "roomB"])
        defer { rooms.stopAll() }
        let folder = rooms.dir + "/site"
        let types = """
            [notifications.material]
            label = "Material bringen"
            recipients = ["rooma"]
            """
        try SiteKit.create(folder, document: SiteKit.document(rooms, names: ["rooma": "Empfang", "roomb": "Behandlung 1"], extra: types))
        let a = try SiteKit.start(rooms, "rooma", folder: folder)
        _ = try SiteKit.start(rooms, "roomb", folder: folder)
        XCTAssertTrue(rooms.waitOnline("rooma", ["roomb"]), a.log)

        let service = SiteServiceProcess(dir: folder)
        defer { service.stop() }
        XCTAssertEqual(try service.addAccount("anna", role: "manager", password: "Empfang-2026!").status, 0)
        try service.start(member: try XCTUnwrap(a.controlSocket))
        let anna = try XCTUnwrap(try service.login("anna", password: "Empfang-2026!"))
        let software = try service.token("Praxissoftware", scopes: ["calls", "notify", "read"], as: anna)
        let notifier = try service.token("Tuerklingel", scopes: ["notify"], as: anna)
        func api(_ method: String, _ path: String, token: String = software, json: String? = nil) throws -> SiteServiceProcess.Reply {
            try service.request(method, path, json: json, headers: ["Authorization: Bearer \(token)"])
        }
        let stream = try service.events(token: software)
        defer { stream.stop() }
        XCTAssertTrue(rooms.wait(5) { stream.opened }, "the stream is open")

        struct Placed: Decodable { var callId: String; var to: [String] }
        for kind in ["call", "emergency"] {
            let placed = try api("POST", "/api/v1/calls", json: #"{"rooms":["roomb"],"kind":"\#(kind)"}"#)
            XCTAssertEqual(placed.status, 201, placed.text)
            let call = try placed.decode(Placed.self)
            XCTAssertEqual(call.to, ["roomb"])
            XCTAssertTrue(rooms.wait(8) { rooms.isConnected("roomb") && rooms.isConnected("rooma") }, "\(kind): B answered: \(rooms.status("roomb").debugDescription)")
            let status = try api("GET", "/api/v1/status")
            XCTAssertEqual(status.status, 200, status.text)
            struct Status: Decodable { struct Call: Decodable { var callId: String }; var call: Call? }
            XCTAssertEqual(try status.decode(Status.self).call?.callId, call.callId, "the status names the call")
            let busy = try api("POST", "/api/v1/calls", json: #"{"rooms":["roomb"]}"#)
            XCTAssertEqual(busy.status, 409, "\(kind): a second call while one runs: \(busy.text)")
            XCTAssertEqual(try busy.decode(ProblemDocument.self).type.hasSuffix("terminal-busy"), true, busy.text)
            let hungUp = try api("POST", "/api/v1/calls/hangup")
            XCTAssertEqual(hungUp.status, 204, hungUp.text)
            XCTAssertTrue(rooms.wait(5) { rooms.isIdle("roomb") && rooms.isIdle("rooma") }, "\(kind): ended on both sides")
            XCTAssertTrue(rooms.wait(5) { stream.events.contains { $0.name == "call_ended" && $0.data.contains(call.callId) } },
                          "\(kind): the stream saw it end: \(stream.events.map(\.name))")
            XCTAssertEqual(rooms.history("roomb").last?.kind?.rawValue ?? "call", kind)
        }
        let nothing = try api("POST", "/api/v1/calls/hangup")
        XCTAssertEqual(nothing.status, 409, nothing.text)
        XCTAssertEqual(try nothing.decode(ProblemDocument.self).type.hasSuffix("terminal-not-in-call"), true, nothing.text)

        // B asks the reception for material; the software acknowledges it there, B hears who.
        guard case .success(.notificationSent(let id, _)) = try rooms.control("roomb", .perform(.notify(type: "material"))) else {
            return XCTFail("B sends the notification")
        }
        XCTAssertTrue(rooms.wait(5) { rooms.status("rooma")?.notifications == 1 }, "it waits at the reception")
        let acknowledged = try api("POST", "/api/v1/notifications/acknowledge", token: notifier)
        XCTAssertEqual(acknowledged.status, 204, acknowledged.text)
        XCTAssertTrue(rooms.wait(5) {
            rooms.notifications("roomb").contains { $0.notification.id == id && $0.acknowledgedBy == [RoomID("rooma")!] }
        }, "B learns that the reception acknowledged it")
        XCTAssertEqual(rooms.status("rooma")?.notifications, 0)
        let again = try api("POST", "/api/v1/notifications/acknowledge", json: #"{"all":true}"#)
        XCTAssertEqual(again.status, 409, "nothing waits any more: \(again.text)")

        // Refusals name the field; nothing is called.
        for (body, status, field) in [(#"{"rooms":[]}"#, 400, "rooms"), (#"{"rooms":["Behandlung 1"]}"#, 400, "rooms"),
                                      (#"{"rooms":["roomb"],"kind":"laut"}"#, 400, "kind"), (#"{"rooms":["keller"]}"#, 422, "rooms"),
                                      (#"{"kind":"call"}"#, 400, "rooms")] {
            let refused = try api("POST", "/api/v1/calls", json: body)
            XCTAssertEqual(refused.status, status, "\(body): \(refused.text)")
            XCTAssertEqual(try refused.decode(ProblemDocument.self).field, field, "\(body): \(refused.text)")
        }
        let badAll = try api("POST", "/api/v1/notifications/acknowledge", json: #"{"all":"ja"}"#)
        XCTAssertEqual(badAll.status, 400, badAll.text)
        XCTAssertEqual(try badAll.decode(ProblemDocument.self).field, "all", badAll.text)
        let noScope = try api("POST", "/api/v1/calls", token: notifier, json: #"{"rooms":["roomb"]}"#)
        XCTAssertEqual(noScope.status, 403, noScope.text)
        XCTAssertEqual(rooms.history("roomb").count, 2, "only the two calls reached B")
        let audit = try service.request("GET", "/api/v1/audit", as: anna).text
        for action in ["call.placed", "calls.hangup", "notification.acknowledged"] {
            XCTAssertTrue(audit.contains(action), "\(action) in the audit log: \(audit)")
        }

        // The terminals as the page lists them: both online now, with the site version each
        // holds; B stopped is offline, last seen while it ran (the service noted it at start).
        func terminals() throws -> [SiteEditor.Terminal] {
            try api("GET", "/api/v1/terminals").decode(SiteServer.List<SiteEditor.Terminal>.self).items
        }
        let both = try terminals()
        XCTAssertEqual(both.map(\.online), [true, true], "\(both)")
        XCTAssertEqual(both.map(\.siteVersion), [2, 2], "\(both)")
        XCTAssertEqual(both.map(\.behind), [false, false])
        let stopped = Date().timeIntervalSince1970
        _ = rooms.stop("roomb")
        XCTAssertTrue(rooms.wait(20) { (try? terminals().last?.online) == false }, "A no longer hears B")
        let b = try XCTUnwrap(try terminals().last)
        XCTAssertEqual(b.room, "roomb")
        let lastSeen = try XCTUnwrap(b.lastSeen, "B was seen: \(b)")
        XCTAssertLessThanOrEqual(lastSeen, stopped)
        XCTAssertGreaterThan(lastSeen, stopped - 60, "noted at most LastSeen.interval apart")
        XCTAssertEqual(try terminals().first?.online, true, "A itself")
    }
}
