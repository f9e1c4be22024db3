import Calls
import IntercomConfig
import Lights
import SignalTools
import SiteAdmin
import XCTest

/// Changes to the site document as the page and the API make them: edits at a path, the result
/// checked for every room; and the plan that says, before anything is signed, what a change does
/// at which terminal. Deterministic: a seeded run of random edits checks that each result reads,
/// that writing is a fixed point and that undoing a change plans exactly its inverse.
final class SiteEditTests: XCTestCase {
    static let base = """
        [site]
        name = "Praxis"
        [rooms.empfang]
        address = "10.0.0.1"
        [rooms.labor]
        address = "10.0.0.2"
        [rooms.arzt]
        address = "10.0.0.3"
        [buttons.empfang]
        rooms = ["empfang"]
        [notifications.naechster]
        label = "Nächster Patient"
        recipients = ["arzt"]
        [kinds.desk.keys.map]
        KEY_F1 = "call:empfang"
        [terminals.empfang]
        kind = "desk"
        """

    private func plan(_ from: String, _ to: String) throws -> SiteChangePlan {
        SiteChangePlan.make(held: try SiteDocument.parse(from), version: 7, proposed: try SiteDocument.parse(to), text: to)
    }

    func testEditsSetAndRemoveValuesAndTheResultIsCheckedForEveryRoom() throws {
        let (text, document) = try SiteDocument.edited(Self.base, [
            SiteEdit(path: ["notifications", "material"], value: .table(["label": .string("Material bringen"), "recipients": .list([.string("labor")]),
                                                                        "tone": .string("bell")])),
            SiteEdit(path: ["keys", "map", "KEY_F3"], value: .string("notify:material")),
            SiteEdit(path: ["calls", "ring_ms"], value: .integer(1500)),
            SiteEdit(path: ["notifications", "naechster"], value: nil),
            SiteEdit(path: ["groups", "nobody"], value: nil),  // removing what is not there changes nothing
        ])
        XCTAssertEqual(document.rooms.keys.sorted(), ["arzt", "empfang", "labor"])
        let labor = try document.settings(room: "labor")
        XCTAssertEqual(labor["notifications.material.tone"], "\"bell\"")
        XCTAssertEqual(labor["keys.map"], #"{ KEY_F3 = "notify:material" }"#)
        XCTAssertEqual(labor["calls.ring_ms"], "1500")
        XCTAssertNil(labor["notifications.naechster.label"])
        XCTAssertEqual(try document.settings(room: "empfang")["keys.map"], #"{ KEY_F1 = "call:empfang" }"#, "the desk's own map stays over the shared one")
        XCTAssertEqual(try SiteDocument.parse(text).rendered(), text, "the text written reads back as the same document")
        XCTAssertEqual(document.rendered(), text)

        // An edit that breaks the document is refused with the key it breaks; one that cannot apply names the edit.
        XCTAssertThrowsError(try SiteDocument.edited(Self.base, [SiteEdit(path: ["notifications", "naechster", "tone"], value: .string("quack"))])) { error in
            XCTAssertEqual((error as? ConfigError)?.issues.first?.key, "notifications.naechster.tone", "\(error)")
        }
        XCTAssertThrowsError(try SiteDocument.edited(Self.base, [SiteEdit(path: ["audio", "capture_device"], value: .string("hw:0"))])) { error in
            XCTAssertTrue("\(error)".contains("terminal's own setting"), "\(error)")
        }
        XCTAssertThrowsError(try SiteDocument.edited(Self.base, [SiteEdit(path: ["site", "name", "x"], value: .integer(1))])) { error in
            XCTAssertEqual((error as? ConfigError)?.issues.first?.key, "edits.0", "\(error)")
            XCTAssertTrue("\(error)".contains("site.name is a value, not a table"), "\(error)")
        }
        XCTAssertThrowsError(try SiteDocument.edited(Self.base, [SiteEdit(path: [], value: .integer(1))]))
    }

    /// The page's keys and lights for one terminal: an edit under `terminals.<room>` gives that
    /// room its own map, which replaces the shared one whole there and changes nothing elsewhere;
    /// removing it gives the room the shared (or its kind's) map again.
    func testOneTerminalsOwnKeysAndLightsReplaceTheSharedOnesThereAlone() throws {
        let shared = SiteEdit(path: ["lights", "map", "in_call"], value: .table(["led": .string("green")]))
        let (sharedText, sharedDocument) = try SiteDocument.edited(Self.base, [shared, SiteEdit(path: ["keys", "map", "KEY_F2"], value: .string("hang_up"))])
        XCTAssertEqual(sharedDocument.source(of: "keys.map", room: "labor"), .site)
        XCTAssertEqual(sharedDocument.source(of: "keys.map", room: "empfang"), .kind, "the desk's kind sets its keys")
        XCTAssertEqual(try sharedDocument.configuration(room: "empfang").keys.map, ["KEY_F1": "call:empfang"])

        let (text, document) = try SiteDocument.edited(sharedText, [
            SiteEdit(path: ["terminals", "labor", "keys", "map"], value: .table(["KEY_F2": .string("hang_up"), "KEY_F3": .string("toggle_dnd")])),
            SiteEdit(path: ["terminals", "labor", "lights", "map", "dnd"], value: .table(["led": .string("yellow"), "pattern": .string("slow_blink")])),
        ])
        let labor = try document.configuration(room: "labor")
        XCTAssertEqual(labor.keys.map, ["KEY_F2": "hang_up", "KEY_F3": "toggle_dnd"])
        XCTAssertEqual(labor.lights.map, [.doNotDisturb: LightRule(led: "yellow", pattern: .slowBlink)], "its own lights replace the shared ones whole")
        XCTAssertEqual(document.source(of: "keys.map", room: "labor"), .terminal)
        XCTAssertEqual(document.source(of: "lights.map", room: "labor"), .terminal)
        XCTAssertEqual(try document.configuration(room: "arzt").keys.map, ["KEY_F2": "hang_up"], "the others keep the shared keys")
        XCTAssertEqual(try document.configuration(room: "arzt").lights.map, [.inCall: LightRule(led: "green", pattern: .steady)])
        let changed = try plan(sharedText, text)
        XCTAssertEqual(changed.terminals.map(\.room), ["labor"], "only the lab's terminal changes")
        XCTAssertEqual(Set(changed.terminals.first?.settings.map(\.key) ?? []), ["keys.map", "lights.map"])

        // A wrong state or pattern names its key; removing the room's own map brings the shared one back.
        XCTAssertThrowsError(try SiteDocument.edited(sharedText, [SiteEdit(path: ["terminals", "labor", "lights", "map", "dnd"], value: .table(["led": .string("y"), "pattern": .string("flicker")]))])) { error in
            XCTAssertTrue((error as? ConfigError)?.issues.first?.key.hasPrefix("terminals.labor.lights.map") == true, "\(error)")
        }
        let (_, back) = try SiteDocument.edited(text, [SiteEdit(path: ["terminals", "labor", "keys", "map"], value: nil),
                                                     SiteEdit(path: ["terminals", "labor", "lights", "map"], value: nil)])
        XCTAssertEqual(back.source(of: "keys.map", room: "labor"), .site)
        XCTAssertEqual(try back.configuration(room: "labor").keys.map, ["KEY_F2": "hang_up"])
        XCTAssertEqual(try back.settings(room: "labor"), try sharedDocument.settings(room: "labor"))
    }

    /// The keys inside a value are the document's, not Swift's: the wire's snake_case conversion
    /// leaves them as they are, both ways.
    func testAnEditsValueKeepsItsKeysOnTheWire() throws {
        let json = #"{"path":["notifications","x"],"value":{"KEY_F1":"a","read_aloud":false,"n":[1,2.5,true]}}"#
        let edit = try Wire.decode(SiteEdit.self, from: Array(json.utf8))
        XCTAssertEqual(edit.value, .table(["KEY_F1": .string("a"), "read_aloud": .boolean(false), "n": .list([.integer(1), .number(2.5), .boolean(true)])]))
        XCTAssertEqual(try Wire.string(edit), #"{"path":["notifications","x"],"value":{"KEY_F1":"a","n":[1,2.5,true],"read_aloud":false}}"#)
        XCTAssertNil(try Wire.decode(SiteEdit.self, from: Array(#"{"path":["a"]}"#.utf8)).value, "no value: remove")
    }

    func testAPlanListsOnlyTheTerminalsThatChangeAndWhatChangesThere() throws {
        // A notification type for the lab, on the desk's F3: the three rooms learn the type, only the desk gets the key.
        let (text, _) = try SiteDocument.edited(Self.base, [
            SiteEdit(path: ["notifications", "material"], value: .table(["recipients": .list([.string("labor")])])),
            SiteEdit(path: ["kinds", "desk", "keys", "map", "KEY_F3"], value: .string("notify:material")),
        ])
        let p = try plan(Self.base, text)
        XCTAssertEqual(p.baseVersion, 7)
        XCTAssertEqual(p.version, 8)
        XCTAssertEqual(p.terminals.map(\.room), ["arzt", "empfang", "labor"])
        let empfang = try XCTUnwrap(p.terminals.first { $0.room == "empfang" })
        XCTAssertEqual(empfang.settings.first { $0.key == "keys.map" },
                       SettingChange(key: "keys.map", before: #"{ KEY_F1 = "call:empfang" }"#, after: #"{ KEY_F1 = "call:empfang", KEY_F3 = "notify:material" }"#))
        XCTAssertNil(p.terminals.first { $0.room == "labor" }?.settings.first { $0.key == "keys.map" }, "the lab's keys stay")

        // Only the desk's key: only the desk changes. A new room is added, a dropped one removed.
        let (deskOnly, _) = try SiteDocument.edited(Self.base, [SiteEdit(path: ["kinds", "desk", "keys", "map", "KEY_F2"], value: .string("hang_up"))])
        XCTAssertEqual(try plan(Self.base, deskOnly).terminals.map(\.room), ["empfang"])
        let (moved, _) = try SiteDocument.edited(Self.base, [
            SiteEdit(path: ["rooms", "labor"], value: nil),
            SiteEdit(path: ["rooms", "wartezimmer"], value: .table(["address": .string("10.0.0.9")])),
        ])
        let kinds = try plan(Self.base, moved).terminals.map { "\($0.room):\($0.kind.rawValue)" }
        XCTAssertTrue(kinds.contains("labor:removed") && kinds.contains("wartezimmer:added"), "\(kinds)")
        XCTAssertEqual(try plan(Self.base, Self.base).terminals, [], "no change, no terminal")
    }

    /// 400 random edits (seeded), each on the last good document: notification types, buttons,
    /// groups, key maps at every layer, call timings, good and bad values. Each accepted result
    /// reads back as itself and writes to the same text; the plan of undoing it is exactly the
    /// change's inverse; each refused one names a key and leaves the document as it was.
    func testSeededEditsGiveDocumentsThatReadAndUndoPlansTheExactInverse() throws {
        var rng = SplitMix64(seed: 56)
        func pick<T>(_ items: [T]) -> T { items[Int(rng.next() % UInt64(items.count))] }
        let rooms = ["empfang", "labor", "arzt"]
        let recipients = rooms + ["alle", "nowhere"]
        let tones = ["gong", "bell", "alert", "alarm", "", "quack"]
        var text = try SiteDocument.edited(Self.base, []).text
        var accepted = 0, refused = 0, changedSomething = 0
        for _ in 0..<400 {
            let id = pick(["material", "naechster", "alarm", "tee"])
            let edit: SiteEdit = switch rng.next() % 8 {
            case 0: SiteEdit(path: ["notifications", id], value: .table(["recipients": .list([.string(pick(recipients))]), "tone": .string(pick(tones))]))
            case 1: SiteEdit(path: ["notifications", id], value: nil)
            case 2: SiteEdit(path: ["groups", "alle"], value: rng.next() % 2 == 0 ? nil : .list(rooms.prefix(Int(1 + rng.next() % 3)).map { .string($0) }))
            case 3: SiteEdit(path: pick([["keys", "map"], ["kinds", "desk", "keys", "map"], ["terminals", "labor", "keys", "map"]]) + [pick(["KEY_F1", "KEY_F2", "KEY_F3"])],
                             value: rng.next() % 4 == 0 ? nil : .string(pick(["notify:\(id)", "call:empfang", "hang_up", "toggle_dnd", "fly"])))
            case 4: SiteEdit(path: ["calls", "ring_ms"], value: .integer(pick([0, 800, 1500, -5, 100_000])))
            case 5: SiteEdit(path: ["buttons", pick(rooms)], value: rng.next() % 3 == 0 ? nil : .table(["rooms": .list([.string(pick(recipients))])]))
            case 6: SiteEdit(path: ["speech", "words_per_minute"], value: .integer(pick([120, 160, 2])))
            default: SiteEdit(path: ["site", "name", "x"], value: .boolean(true))
            }
            let before = try SiteDocument.parse(text)
            do {
                let (next, document) = try SiteDocument.edited(text, [edit])
                accepted += 1
                XCTAssertEqual(document.rendered(), next)
                XCTAssertEqual(try SiteDocument.edited(next, []).text, next, "writing a document is a fixed point")
                let forward = try plan(text, next), back = try plan(next, text)
                let inverse = forward.terminals.map { t in
                    TerminalChange(room: t.room, kind: t.kind == .added ? .removed : t.kind == .removed ? .added : .changed,
                                   settings: t.settings.map { SettingChange(key: $0.key, before: $0.after, after: $0.before) })
                }
                XCTAssertEqual(back.terminals, inverse, "undoing \(edit) plans the inverse")
                if !forward.terminals.isEmpty { changedSomething += 1 }
                XCTAssertEqual(forward.terminals.isEmpty, rooms.allSatisfy { (try? before.settings(room: $0)) == (try? document.settings(room: $0)) })
                text = next
            } catch let error as ConfigError {
                refused += 1
                XCTAssertFalse(error.issues.isEmpty)
                XCTAssertTrue(error.issues.allSatisfy { !$0.key.isEmpty }, "a refusal names the key: \(error)")
            }
        }
        print("seeded edits: \(accepted) accepted (\(changedSomething) changed a terminal), \(refused) refused")
        XCTAssertGreaterThan(changedSomething, 50)
        XCTAssertGreaterThan(refused, 50)
    }
}
