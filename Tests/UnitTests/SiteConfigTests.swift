import Calls
import Foundation
import SiteSecurity
import XCTest

@testable import IntercomConfig

/// The site document's body and a terminal's file: each key in one of them, joined in layers
/// (the site's, the kind's, the terminal's), every problem named by its key.
final class SiteConfigTests: XCTestCase {
    private let document = """
        [site]
        name = "Praxis am Markt"

        [rooms.empfang]
        name = "Empfang"
        address = "10.0.0.11"
        [rooms.beh1]
        name = "Behandlung 1"
        address = "10.0.0.12"
        [rooms.labor]
        address = "10.0.0.13"

        [buttons.beh1]
        rooms = ["beh1"]
        [buttons.alle]
        rooms = ["empfang", "beh1", "labor"]
        kind = "announcement"

        [notifications.material]
        label = "Material bringen"
        recipients = ["labor"]

        [calls]
        ring_ms = 800

        [keys]
        debounce_ms = 40
        [keys.map]
        KEY_F1 = "call:alle"

        [kinds.wall.keys.map]
        KEY_F1 = "call:beh1"
        KEY_F2 = "notify:material"
        [kinds.wall.calls]
        ring_ms = 1200

        [terminals.labor]
        kind = "wall"
        [terminals.labor.calls]
        auto_answer = false
        answer_timeout_ms = 20000

        [terminals.beh1]
        kind = "wall"

        """

    private func terminal(_ room: String, extra: String = "") throws -> (config: DaemonConfig, present: Set<String>) {
        try DaemonConfig.parseTerminalFile("""
            [site]
            id = "praxis-am-markt"
            [room]
            id = "\(room)"
            [keys]
            device = "/dev/input/event3"
            \(extra)
            """, source: "\(room).toml")
    }

    private func joined(_ room: String) throws -> DaemonConfig {
        let site = try SiteDocument.parse(document)
        let local = try terminal(room)
        return try site.configuration(local: local.config, localPresent: local.present, source: "site for \(room)")
    }

    func testEachTerminalRunsByTheSiteItsKindAndItsOwnEntryOverItsFile() throws {
        let site = try SiteDocument.parse(document)
        XCTAssertEqual(site.name, "Praxis am Markt")
        XCTAssertEqual(site.rooms.keys.sorted(), ["beh1", "empfang", "labor"])
        XCTAssertEqual(site.kindNames, ["wall"])

        let empfang = try joined("empfang")  // no [terminals] entry: the site's settings
        XCTAssertEqual(empfang.keys.map, ["KEY_F1": "call:alle"])
        XCTAssertEqual(empfang.calls.ring, .milliseconds(800))
        XCTAssertEqual(empfang.keys.debounce, .milliseconds(40))
        XCTAssertEqual(empfang.keys.device, "/dev/input/event3", "the box's own key, from its file")
        XCTAssertEqual(empfang.rooms.count, 3)
        XCTAssertEqual(empfang.network.listenPort, 5004, "follows its room's media port")

        let beh1 = try joined("beh1")  // the kind's
        XCTAssertEqual(beh1.keys.map, ["KEY_F1": "call:beh1", "KEY_F2": "notify:material"], "a kind's table replaces the site's whole")
        XCTAssertEqual(beh1.calls.ring, .milliseconds(1200))
        XCTAssertTrue(beh1.calls.autoAnswer)

        let labor = try joined("labor")  // the kind's, then its own
        XCTAssertEqual(labor.calls.ring, .milliseconds(1200))
        XCTAssertFalse(labor.calls.autoAnswer)
        XCTAssertEqual(labor.calls.answerTimeout, .milliseconds(20000))
        XCTAssertEqual(labor.keys.debounce, .milliseconds(40))
        XCTAssertNoThrow(try labor.validate())
    }

    /// Who may call whom at a site: the buttons are every terminal's, so at a room that may not
    /// call some of a button's rooms the button calls the others, and one that reaches none is
    /// refused when pressed there. The document is valid for each room.
    func testASitesButtonsCallOnlyWhomEachRoomMayCall() throws {
        let site = try SiteDocument.parse(document.replacingOccurrences(of: "name = \"Behandlung 1\"\n", with: "name = \"Behandlung 1\"\nmay_call = [\"empfang\"]\n")
            .replacingOccurrences(of: "name = \"Empfang\"\n", with: "name = \"Empfang\"\nmay_call = [\"beh1\", \"labor\"]\n"))
        func settings(_ room: String) throws -> CallSettings {
            let local = try terminal(room)
            let config = try site.configuration(local: local.config, localPresent: local.present, source: "site for \(room)")
            XCTAssertNoThrow(try config.validate(), room)
            return config.callSettings()
        }
        let empfang = try settings("empfang")
        XCTAssertEqual(empfang.buttons["alle"]?.rooms.map(\.description).sorted(), ["beh1", "labor"])
        XCTAssertEqual(empfang.buttons["beh1"]?.rooms.map(\.description), ["beh1"])
        let beh1 = try settings("beh1")
        XCTAssertEqual(beh1.buttons["alle"]?.rooms.map(\.description), ["empfang"], "beh1 may call only the reception")
        XCTAssertNil(beh1.buttons["beh1"], "its own button reaches nobody from there")
        XCTAssertNil(try settings("labor").buttons["alle"], "labor has no list once others do: it calls nobody")
    }

    func testASiteTerminalsFileRefusesTheSitesKeysAndKeepsItsOwn() {
        XCTAssertThrowsError(try terminal("labor", extra: """
            debounce_ms = 20
            [rooms.labor]
            address = "10.0.0.13"
            [calls]
            ring_ms = 500
            history_path = "/tmp/h.json"
            """)) { error in
            let issues = (error as? ConfigError)?.issues ?? []
            XCTAssertEqual(Set(issues.map(\.key)), ["keys.debounce_ms", "rooms", "calls.ring_ms"], "\(error)")
            XCTAssertTrue(issues.allSatisfy { $0.problem.contains("belongs in the site document") }, "\(error)")
        }
        // Without a site, the file holds everything, as before.
        XCTAssertNoThrow(try DaemonConfig.parse("""
            [keys]
            debounce_ms = 20
            [calls]
            ring_ms = 500
            """))
    }

    func testADocumentNamesEachKeyThatIsNotTheSitesOrDoesNotHold() {
        func problems(_ text: String) -> [String: String] {
            do {
                _ = try SiteDocument.parse(text)
                return [:]
            } catch let error as ConfigError {
                return Dictionary(error.issues.map { ($0.key, $0.problem) }, uniquingKeysWith: { a, _ in a })
            } catch {
                return ["": "\(error)"]
            }
        }
        let bad = document + """

            [audio]
            capture_device = "hw:0"
            [kinds.desk.buttons.x]
            rooms = ["beh1"]
            [kinds.desk.keys]
            device = "/dev/input/event1"
            [terminals.kueche]
            kind = "desk"
            [terminals.empfang]
            kind = "wal"

            """
        let found = problems(bad)
        XCTAssertEqual(found["audio.capture_device"].map { $0.contains("the terminal's own") }, true, "\(found)")
        XCTAssertEqual(found["kinds.desk.buttons"].map { $0.contains("whole site's") }, true, "\(found)")
        XCTAssertEqual(found["kinds.desk.keys.device"].map { $0.contains("the terminal's own") }, true, "\(found)")
        XCTAssertEqual(found["terminals.kueche"].map { $0.contains("not a room") }, true, "\(found)")
        XCTAssertEqual(found["terminals.empfang.kind"].map { $0.contains("did you mean \"wall\"") }, true, "\(found)")

        // Joined for a room, the layers still meet every rule: the kind maps a key to a button
        // that is not there.
        let joinedBad = document.replacingOccurrences(of: "KEY_F2 = \"notify:material\"", with: "KEY_F2 = \"call:nobody\"")
        let joinedFound = problems(joinedBad)
        XCTAssertEqual(joinedFound["keys.map.KEY_F2"].map { $0.contains("for room beh1") && $0.contains("no [buttons.nobody]") }, true,
                       "\(joinedFound)")
        XCTAssertEqual(problems("[site]\nname = \"leer\"\n")["rooms"].map { $0.contains("at least one room") }, true)
    }

    func testTheEnrolmentSectionReadsBackAsRenderedAndNamesEachBadEntry() throws {
        let a = TerminalIdentity().publicIdentity, b = TerminalIdentity().publicIdentity, c = TerminalIdentity().publicIdentity
        var site = try SiteDocument.parse(document)
        site.enrolment = SiteEnrolment(approved: ["empfang": a, "labor": b], revoked: [c])
        let back = try SiteDocument.parse(site.rendered())
        XCTAssertEqual(back.enrolment, site.enrolment)
        XCTAssertEqual(try SiteDocument.parse(document + site.enrolment.rendered()).enrolment, site.enrolment,
                       "the section appended to an administrator's text (enrolment.toml after site.toml) reads the same")

        func problems(_ section: String) -> [String: String] {
            do {
                _ = try SiteDocument.parse(document + section)
                return [:]
            } catch let error as ConfigError {
                return Dictionary(error.issues.map { ($0.key, $0.problem) }, uniquingKeysWith: { a, _ in a })
            } catch {
                return ["": "\(error)"]
            }
        }
        let found = problems("""

            [enrolment]
            revoked = ["\(c.text)", "bm90IGEga2V5"]
            colour = "blue"
            [enrolment.approved]
            empfang = "\(a.text)"
            beh1 = "\(a.text)"
            labor = "\(c.text)"
            keller = "\(b.text)"

            """)
        XCTAssertEqual(found["enrolment.revoked"].map { $0.contains("32 bytes") }, true, "\(found)")
        XCTAssertEqual(found["enrolment.colour"].map { $0.contains("unknown key") }, true, "\(found)")
        XCTAssertEqual(found["enrolment.approved.empfang"].map { $0.contains("approved for beh1 too") }, true, "\(found)")
        XCTAssertEqual(found["enrolment.approved.labor"].map { $0.contains("is revoked") }, true, "\(found)")
        XCTAssertEqual(found["enrolment.approved.keller"].map { $0.contains("not a room") }, true, "\(found)")
    }

    func testTheDefaultConfigurationDocumentsTheSiteSection() throws {
        let rendered = DaemonConfig.default.rendered()
        XCTAssertTrue(rendered.contains("\n[site]\n"))
        XCTAssertTrue(rendered.contains("administrator_key = \"/etc/intercomd/administrator.pub\""))
        XCTAssertEqual(try DaemonConfig.parse(rendered), DaemonConfig.default)
    }
}

/// Today's per-terminal files made into one document: what agreed is shared, what differed is
/// reported, and each terminal runs by the document as it ran by its file.
final class SiteConvertTests: XCTestCase {
    private func file(_ room: String, ringMs: Int, labAddress: String = "10.0.0.13", extraKeys: String = "") -> String {
        """
        [room]
        id = "\(room)"
        [rooms.empfang]
        address = "10.0.0.11"
        [rooms.beh1]
        address = "10.0.0.12"
        [rooms.labor]
        address = "\(labAddress)"
        [groups]
        praxis = ["empfang", "beh1", "labor"]
        [buttons.alle]
        rooms = ["praxis"]
        [calls]
        ring_ms = \(ringMs)
        [keys]
        device = "/dev/input/event0"
        \(extraKeys)
        """
    }

    func testThreeFilesBecomeOneDocumentThatDiffersOnlyWhereTheyDid() throws {
        let files = [
            ("empfang.toml", file("empfang", ringMs: 800, extraKeys: "[keys.map]\nKEY_F1 = \"call:alle\"")),
            ("beh1.toml", file("beh1", ringMs: 800, labAddress: "10.0.0.99")),
            ("labor.toml", file("labor", ringMs: 1500)),
        ].map { (source: $0.0, config: try! DaemonConfig.parse($0.1, source: $0.0)) }
        let (document, report) = SiteDocument.converting(files)

        XCTAssertEqual(document.rooms["labor"]?.address, "10.0.0.13", "the address two of three files had")
        XCTAssertTrue(report.contains { $0.hasPrefix("rooms.labor: beh1.toml disagree") }, "\(report)")
        XCTAssertTrue(report.contains { $0.hasPrefix("calls.ring_ms: labor.toml (room labor) has 1500, most have 800") }, "\(report)")
        XCTAssertTrue(report.contains { $0.hasPrefix("keys.map: empfang.toml (room empfang)") }, "\(report)")

        // Written out, read back: each terminal runs by what its own file said (but the one
        // disagreeing room address).
        let text = document.rendered()
        let reread = try SiteDocument.parse(text, source: "converted")
        XCTAssertEqual(reread.rendered(), text)
        for (source, original) in files {
            var local = DaemonConfig()
            local.site.id = "praxis"
            local.room.id = original.room.id
            local.keys.device = original.keys.device
            let joined = try reread.configuration(local: local, localPresent: ["room.id", "keys.device", "site.id"], source: source)
            XCTAssertEqual(joined.calls.ring, original.calls.ring, source)
            XCTAssertEqual(joined.keys.map, original.keys.map, source)
            XCTAssertEqual(joined.buttons, original.buttons, source)
        }
    }
}

extension SiteConfigTests {
    func testASiteTerminalsFileRendersOnlyItsOwnKeysAndReadsBack() throws {
        let (config, _) = try DaemonConfig.parseTerminalFile("[site]\nid = \"praxis\"\n[room]\nid = \"labor\"\n")
        let rendered = config.rendered()
        XCTAssertFalse(rendered.contains("\n[tones]\n"), "the site's sections are left out")
        XCTAssertFalse(rendered.contains("ring_ms"), "and the site's keys")
        XCTAssertTrue(rendered.contains("history_path"), "the terminal's own keys of a shared section stay")
        XCTAssertEqual(try DaemonConfig.parse(rendered), config)
    }
}
