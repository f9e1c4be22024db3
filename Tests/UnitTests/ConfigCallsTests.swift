import Calls
import Control
import Foundation
import Keys
import Posix
import Transport
import Lights
import XCTest

@testable import IntercomDaemon
@testable import IntercomConfig

final class ConfigCallsTests: XCTestCase {
    /// Three rooms; this terminal is the reception.
    private let practice = """
        [room]
        id = "empfang"

        [rooms.empfang]
        name = "Empfang"
        address = "192.168.10.11"

        [rooms.beh1]
        address = "192.168.10.12"
        signalling_port = 6070
        media_port = 6004

        [rooms.beh2]
        name = "Behandlung 2"
        address = "192.168.10.13"

        [buttons.alle]
        rooms = ["beh1", "beh2"]
        label = "Alle Behandlungsräume"

        [buttons.beh1]
        rooms = ["beh1"]

        [calls]
        auto_answer = false
        ring_ms = 800
        answer_timeout_ms = 20000
        do_not_disturb = true

        [control]
        socket = "/run/test/control.sock"
        mode = "0640"
        group = "staff"

        [keys]
        device = "/dev/input/event3"
        debounce_ms = 40
        [keys.map]
        KEY_F1 = "call:alle"
        KEY_F2 = "call:2"
        KEY_ESC = "hang_up"

        """

    private func endpoint(_ text: String) -> IPv4Endpoint { IPv4Endpoint(text)! }

    /// The issues `parse` reports for `text`; fails the test if it parses.
    private func issues(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> [ConfigIssue] {
        do {
            let config = try DaemonConfig.parse(text, source: "room.toml")
            XCTFail("expected an error, parsed \(config)", file: file, line: line)
        } catch let error as ConfigError {
            return error.issues
        } catch {
            XCTFail("unexpected error \(error)", file: file, line: line)
        }
        return []
    }

    /// Asserts `text` gives exactly one issue, at `key`, whose problem contains `words`.
    private func assertIssue(_ text: String, key: String, _ words: String, line expectedLine: Int? = nil,
                             file: StaticString = #filePath, line: UInt = #line) {
        let found = issues(text, file: file, line: line)
        XCTAssertEqual(found.count, 1, "issues: \(found)", file: file, line: line)
        guard let issue = found.first else { return }
        XCTAssertEqual(issue.key, key, "\(issue)", file: file, line: line)
        XCTAssertTrue(issue.problem.contains(words), "\(issue)", file: file, line: line)
        if let expectedLine { XCTAssertEqual(issue.line, expectedLine, "\(issue)", file: file, line: line) }
    }

    // MARK: Valid configurations

    func testPracticeGivesCallSettings() throws {
        let config = try DaemonConfig.parse(practice)
        XCTAssertTrue(config.callsEnabled)
        let s = config.callSettings()
        XCTAssertEqual(s.problems(), [])

        let empfang = RoomID("empfang")!, beh1 = RoomID("beh1")!, beh2 = RoomID("beh2")!
        var expected = CallSettings(room: empfang, directory: [
            empfang: DirectoryEntry(name: "Empfang", signalling: endpoint("192.168.10.11:5070")),
            beh1: DirectoryEntry(name: "beh1", signalling: endpoint("192.168.10.12:6070")),
            beh2: DirectoryEntry(name: "Behandlung 2", signalling: endpoint("192.168.10.13:5070")),
        ], media: endpoint("192.168.10.11:5004"))
        expected.buttons = ["alle": CallButton(rooms: [beh1, beh2]), "beh1": CallButton(rooms: [beh1])]
        expected.permissions = .everyone
        expected.autoAnswer = false
        expected.doNotDisturb = true
        expected.callerVoice = .unicast
        expected.timing.ringTime = 0.8
        expected.timing.answerTimeout = 20
        XCTAssertEqual(s, expected)

        XCTAssertEqual(config.buttons["alle"]?.label, "Alle Behandlungsräume")
        XCTAssertEqual(config.mediaEndpoint(of: "beh1"), endpoint("192.168.10.12:6004"))
        XCTAssertEqual(config.mediaEndpoint(of: "beh2"), endpoint("192.168.10.13:5004"))
        XCTAssertNil(config.mediaEndpoint(of: "labor"))
        XCTAssertEqual(config.network.listenPort, 5004, "listen_port follows this room's media_port")
    }

    func testControlAndKeys() throws {
        let config = try DaemonConfig.parse(practice)
        let control = config.controlSettings()
        XCTAssertEqual(control.socketPath, "/run/test/control.sock")
        XCTAssertEqual(control.mode, 0o640)
        XCTAssertEqual(control.group, "staff")
        XCTAssertEqual(control.maxClients, ControlSettings().maxClients)

        XCTAssertEqual(config.keys.device, "/dev/input/event3")
        XCTAssertEqual(config.keys.debounce, .milliseconds(40))
        XCTAssertEqual(config.keys.map, ["KEY_F1": "call:alle", "KEY_F2": "call:2", "KEY_ESC": "hang_up"])
        XCTAssertEqual(config.keyMap(), KeyMap([59: .perform(.call(button: "alle")), 60: .callButton(2), 1: .perform(.hangUp)]))

        let defaults = try DaemonConfig.parse("[room]\nid = \"a\"\n[rooms.a]\naddress = \"10.0.0.1\"\n")
        XCTAssertEqual(defaults.controlSettings(), ControlSettings())
        XCTAssertEqual(defaults.keys, KeysSection())
        XCTAssertEqual(defaults.keyMap(), KeyMap())
    }

    func testMayCallMakesEveryRoomRestricted() throws {
        let text = practice.replacingOccurrences(of: "name = \"Empfang\"\n", with: "name = \"Empfang\"\nmay_call = [\"beh1\", \"beh2\"]\n")
            .replacingOccurrences(of: "media_port = 6004\n", with: "media_port = 6004\nmay_call = [\"empfang\"]\n")
        let s = try DaemonConfig.parse(text).callSettings()
        let empfang = RoomID("empfang")!, beh1 = RoomID("beh1")!, beh2 = RoomID("beh2")!
        XCTAssertEqual(s.permissions, .only([empfang: [beh1, beh2], beh1: [empfang]]))
        XCTAssertTrue(s.permissions.allows(caller: empfang, callee: beh2))
        XCTAssertFalse(s.permissions.allows(caller: beh2, callee: empfang), "no may_call: calls nobody")
        XCTAssertFalse(s.permissions.allows(caller: beh1, callee: beh2))
    }

    func testMulticastCallerVoice() throws {
        let text = practice.replacingOccurrences(of: "do_not_disturb = true\n", with: """
            caller_voice = "multicast"
            multicast_group = "239.1.2.3:5004"

            """).replacingOccurrences(of: "media_port = 6004\n", with: "")
        let s = try DaemonConfig.parse(text).callSettings()
        XCTAssertEqual(s.callerVoice, .multicast(group: endpoint("239.1.2.3:5004")))
        assertIssue(text + "[network]\nbind_address = \"192.168.10.11\"\n", key: "network.bind_address",
                    "must be \"0.0.0.0\" with calls.caller_voice = \"multicast\"")
    }

    func testCallsOffWithoutRoom() throws {
        let config = try DaemonConfig.parse("[audio]\nperiod_ms = 5\n")
        XCTAssertFalse(config.callsEnabled)
        XCTAssertEqual(config.room, RoomSection())
        XCTAssertEqual(config.rooms, [:])
        XCTAssertEqual(config.buttons, [:])
        XCTAssertEqual(config.calls, CallsSection())
        XCTAssertEqual(config.network.listenPort, 5004)
        let printed = DaemonConfig.default.rendered()
        XCTAssertTrue(printed.contains("\n[room]\n") && printed.contains("\nid = \"\"\n"), "the defaults show [room] too, with calls off")
        // An empty id is calls off too, with every other call section allowed at its values.
        XCTAssertFalse(try DaemonConfig.parse("[room]\nid = \"\"\n[calls]\nring_ms = 100\n").callsEnabled)
    }

    func testExplicitListenPortEqualToMediaPort() throws {
        let config = try DaemonConfig.parse(practice + "[network]\nlisten_port = 5004\n")
        XCTAssertEqual(config.network.listenPort, 5004)
        XCTAssertNoThrow(try config.validate())
    }

    // MARK: Errors name their key

    func testDirectoryErrors() {
        assertIssue(practice.replacingOccurrences(of: "\"192.168.10.12\"", with: "\"1.2.3\""),
                    key: "rooms.beh1.address", "\"1.2.3\" is not an IPv4 address", line: 9)
        assertIssue(practice.replacingOccurrences(of: "\"192.168.10.12\"", with: "\"239.0.0.1\""),
                    key: "rooms.beh1.address", "not the address of a terminal")
        assertIssue(practice.replacingOccurrences(of: "address = \"192.168.10.13\"\n", with: ""),
                    key: "rooms.beh2.address", "is required", line: 13)
        assertIssue(practice.replacingOccurrences(of: "media_port = 6004", with: "media_port = 70000"),
                    key: "rooms.beh1.media_port", "70000 is not in range 1...65535")
        assertIssue(practice.replacingOccurrences(of: "signalling_port = 6070", with: "adress = \"x\""),
                    key: "rooms.beh1.adress", "unknown key (did you mean rooms.beh1.address?)", line: 10)
        assertIssue(practice.replacingOccurrences(of: "signalling_port = 6070", with: "signalling_port = \"6070\""),
                    key: "rooms.beh1.signalling_port", "expected an integer")
        assertIssue(practice.replacingOccurrences(of: "name = \"Empfang\"\n", with: "name = \"Empfang\"\nmay_call = [\"beh1\", \"beh2\", \"labor\"]\n"),
                    key: "rooms.empfang.may_call", "\"labor\" is not a room in [rooms]")
        assertIssue(practice.replacingOccurrences(of: "signalling_port = 6070\nmedia_port = 6004", with: "signalling_port = 5004"),
                    key: "rooms.beh1.media_port", "192.168.10.12:5004 is also rooms.beh1.signalling_port")
        assertIssue(practice + "[rooms.Labor]\naddress = \"192.168.10.14\"\n",
                    key: "rooms.Labor", "\"Labor\" is not a room id")
        assertIssue(practice + "[rooms]\nlabor = \"192.168.10.14\"\n",
                    key: "rooms.labor", "expected a table")
    }

    func testThisRoomErrors() {
        assertIssue(practice.replacingOccurrences(of: "id = \"empfang\"", with: "id = \"foo\""),
                    key: "room.id", "\"foo\" has no [rooms.foo] entry", line: 2)
        assertIssue(practice.replacingOccurrences(of: "id = \"empfang\"", with: "id = \"Empfang\""),
                    key: "room.id", "\"Empfang\" is not a room id")
        assertIssue(practice + "[network]\nlisten_port = 6000\n",
                    key: "network.listen_port", "6000 differs from rooms.empfang.media_port (5004, its default)")
        assertIssue(practice + "[network]\npeers = [\"192.168.10.12:5004\"]\n",
                    key: "network.peers", "must be empty with calls on")
        assertIssue("[rooms.a]\naddress = \"10.0.0.1\"\n[keys]\ndevice = \"/dev/input/event0\"\n",
                    key: "room.id", "calls are off and [rooms], keys.device unused")
    }

    /// A 50-room practice: a button and a notification type reach every room, each message in
    /// one datagram; ids so long that the list does not fit are named at the key, with the size.
    func testFiftyRoomsAreCalledAndNotifiedInOneDatagramAndTooLongIdsAreNamed() throws {
        func practice(idLength: Int) -> String {
            let ids = (1...50).map { n in "raum\(n)" + String(repeating: "x", count: max(0, idLength - 4 - String(n).count)) }
            return "[room]\nid = \"\(ids[0])\"\n" + ids.enumerated().map { "[rooms.\($1)]\naddress = \"10.0.2.\($0 + 1)\"\n" }.joined()
                + "[groups]\nalle = [\(ids.map { "\"\($0)\"" }.joined(separator: ", "))]\n"
                + "[buttons.alle]\nrooms = [\"alle\"]\nkind = \"emergency\"\n"
                + "[notifications.alarm]\nlabel = \"Alarm\"\nrecipients = [\"alle\"]\ntext = \"Alarm im ganzen Haus, bitte sofort kommen\"\n"
        }
        let config = try DaemonConfig.parse(practice(idLength: 12))
        let s = config.callSettings()
        XCTAssertEqual(s.buttons["alle"]?.rooms.count, 49)
        XCTAssertEqual(s.notifications["alarm"]?.recipients.count, 49)
        let me = s.room, everyone = try XCTUnwrap(s.buttons["alle"]?.rooms)
        let call = try XCTUnwrap(CallSettings.largestCallMessage(from: me, to: everyone, voice: s.callerVoice))
        let notification = CallSettings.notificationMessage(from: me, type: try XCTUnwrap(s.notifications["alarm"]), to: everyone)
        print("50 rooms, ids of 12 bytes: a call's largest message \(call) bytes, the notification \(notification) (one datagram: \(SignalCodec.maxDatagramBytes))")
        XCTAssertLessThanOrEqual(max(call, notification), SignalCodec.maxDatagramBytes)
        // The engine sends them: a call to all 49 others is placed, not refused.
        var engine = CallEngine(settings: s, seed: 1)
        XCTAssertFalse(engine.handle(.call(button: "alle"), now: 0).contains { if case .rejected = $0 { true } else { false } })

        // Its media: the network thread's route lists hold every participant of the largest call.
        XCTAssertGreaterThanOrEqual(MediaRoutes.maxEndpoints, SignalCodec.maxParticipants)

        // Ids of 30 bytes: 49 of them do not fit.
        let found = issues(practice(idLength: 30))
        XCTAssertEqual(found.map(\.key), ["buttons.alle.rooms", "notifications.alarm.recipients"], "\(found)")
        XCTAssertTrue(found.allSatisfy { $0.problem.contains("one datagram holds \(SignalCodec.maxDatagramBytes)") }, "\(found)")
    }

    func testButtonErrors() {
        assertIssue(practice.replacingOccurrences(of: "rooms = [\"beh1\", \"beh2\"]", with: "rooms = [\"beh1\", \"x\"]"),
                    key: "buttons.alle.rooms", "\"x\" is not a room in [rooms]", line: 18)
        assertIssue(practice.replacingOccurrences(of: "rooms = [\"beh1\", \"beh2\"]", with: "rooms = []"),
                    key: "buttons.alle.rooms", "is required")
        assertIssue(practice.replacingOccurrences(of: "rooms = [\"beh1\", \"beh2\"]", with: "rooms = [\"beh1\", \"beh1\"]"),
                    key: "buttons.alle.rooms", "\"beh1\" is listed twice")
        assertIssue(practice.replacingOccurrences(of: "rooms = [\"beh1\", \"beh2\"]", with: "rooms = [\"beh1\", \"empfang\"]"),
                    key: "buttons.alle.rooms", "\"empfang\" is this room")
        assertIssue(practice.replacingOccurrences(of: "label = \"Alle", with: "lable = \"Alle"),
                    key: "buttons.alle.lable", "unknown key (did you mean buttons.alle.label?)")
        assertIssue(practice + "[buttons.7]\nrooms = [\"beh1\"]\n", key: "buttons.7", "not only digits")
        let sixtyFive = (1...65).map { "[rooms.r\($0)]\naddress = \"10.0.1.\($0)\"\n" }.joined()
        assertIssue(practice + sixtyFive + "[buttons.many]\nrooms = [\((1...65).map { "\"r\($0)\"" }.joined(separator: ", "))]\n",
                    key: "buttons.many.rooms", "65 rooms; a call has at most 64")
        assertIssue(practice.replacingOccurrences(of: "name = \"Empfang\"\n", with: "name = \"Empfang\"\nmay_call = [\"beh1\"]\n"),
                    key: "buttons.alle.rooms", "\"beh2\" may not be called from here (rooms.empfang.may_call)")
        assertIssue("[button.alle]\nrooms = [\"a\"]\n", key: "button", "unknown section (did you mean [buttons]?)")
        assertIssue(practice.replacingOccurrences(of: "label = \"Alle", with: "kind = \"emergncy\"\nlabel = \"Alle"),
                    key: "buttons.alle.kind", "\"emergncy\" is not a call kind: call, emergency, announcement (did you mean \"emergency\"?)")
        assertIssue(practice + "[groups]\nnur = [\"empfang\"]\n[buttons.selbst]\nrooms = [\"nur\"]\n",
                    key: "buttons.selbst.rooms", "reaches no room but this one")
    }

    /// docs/calls.md's practice example is a valid configuration with what it says.
    func testThePracticeExampleInTheDocsIsValid() throws {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("docs/calls.md").path
        let doc = try String(contentsOfFile: path, encoding: .utf8)
        let from = try XCTUnwrap(doc.range(of: "A practice with a reception"))
        let open = try XCTUnwrap(doc.range(of: "```toml\n", range: from.upperBound..<doc.endIndex))
        let close = try XCTUnwrap(doc.range(of: "```", range: open.upperBound..<doc.endIndex))
        let rooms = [("empfang", 11), ("beh1", 12), ("beh2", 13), ("beh3", 14), ("labor", 15)]
            .map { "[rooms.\($0.0)]\naddress = \"192.168.10.\($0.1)\"\n" }.joined()
        let text = "[room]\nid = \"empfang\"\n" + rooms
            + doc[open.upperBound..<close.lowerBound].replacingOccurrences(of: "[keys.map]", with: "[keys]\ndevice = \"/dev/input/event0\"\n[keys.map]")
        let config = try DaemonConfig.parse(text)
        try config.validate()
        let s = config.callSettings()
        XCTAssertEqual(s.buttons["notfall"]?.kind, .emergency)
        XCTAssertEqual(s.buttons["notfall"]?.rooms.count, 4, "every other room")
        XCTAssertEqual(s.notifications["alarm"]?.priority, .emergency)
        XCTAssertEqual(s.notifications["naechster"]?.recipients.map(\.value), ["beh1", "beh2", "beh3"])
        XCTAssertEqual(config.textsReadHere(), ["Alarm am Empfang"], "reception prepares only what it receives")
    }

    /// A button's kind and group names in its rooms reach the call engine's button.
    func testButtonKindAndGroups() throws {
        let text = practice + "[groups]\nalle_raeume = [\"empfang\", \"beh1\", \"beh2\"]\n"
            + "[buttons.notfall]\nrooms = [\"alle_raeume\"]\nkind = \"emergency\"\n"
            + "[buttons.durchsage]\nrooms = [\"beh2\", \"alle_raeume\"]\nkind = \"announcement\"\n"
        let settings = try DaemonConfig.parse(text).callSettings()
        let beh1 = RoomID("beh1")!, beh2 = RoomID("beh2")!
        XCTAssertEqual(settings.buttons["notfall"], CallButton(rooms: [beh1, beh2], kind: .emergency), "this room left out")
        XCTAssertEqual(settings.buttons["durchsage"], CallButton(rooms: [beh2, beh1], kind: .announcement), "each room once")
        XCTAssertEqual(settings.buttons["alle"]?.kind, .normal)
        XCTAssertTrue(try DaemonConfig.parse(text).rendered().contains("kind = \"emergency\""))
    }

    func testCallsControlAndKeysErrors() {
        let calls = { (line: String) in self.practice.replacingOccurrences(of: "do_not_disturb = true\n", with: line + "\n") }
        assertIssue(calls("caller_voice = \"multicast\""), key: "calls.multicast_group",
                    "is required when calls.caller_voice is \"multicast\"")
        assertIssue(calls("caller_voice = \"multicast\"\nmulticast_group = \"10.1.2.3:5004\""),
                    key: "calls.multicast_group", "is not a multicast address")
        assertIssue(calls("caller_voice = \"multicast\"\nmulticast_group = \"239.1.2.3:5004\""),
                    key: "calls.multicast_group", "port 5004 is not rooms.beh1.media_port (6004)")
        assertIssue(calls("caller_voice = \"broadcast\""), key: "calls.caller_voice", "is not one of unicast, multicast")
        assertIssue(practice.replacingOccurrences(of: "auto_answer = false", with: "auto_answer = true")
                        .replacingOccurrences(of: "answer_timeout_ms = 20000", with: "answer_timeout_ms = 1000")
                        .replacingOccurrences(of: "ring_ms = 800", with: "ring_ms = 1000"),
                    key: "calls.answer_timeout_ms", "not more than calls.ring_ms")
        assertIssue(calls("history_limit = 0"), key: "calls.history_limit", "0 is not in range 1...100000")
        assertIssue(practice.replacingOccurrences(of: "mode = \"0640\"", with: "mode = \"0999\""),
                    key: "control.mode", "\"0999\" is not an octal mode")
        assertIssue(practice.replacingOccurrences(of: "mode = \"0640\"", with: "mode = 640"),
                    key: "control.mode", "expected an octal string such as \"0660\", got an integer (640)")
        assertIssue(practice.replacingOccurrences(of: "/run/test/control.sock", with: "/" + String(repeating: "s", count: 120)),
                    key: "control.socket", "121 bytes; a Unix socket path has 1...107")
        assertIssue(practice.replacingOccurrences(of: "debounce_ms = 40", with: "debounce_ms = -1"),
                    key: "keys.debounce_ms", "-1 is not in range 0...1000")
    }

    /// Issue 55, the accelerated soak: `[testing] time_scale` divides every time of the call
    /// engine (each of CallTiming's, found by reflection: a new one cannot be missed), and is
    /// refused out of range, naming its key.
    func testTimeScaleDividesEveryCallTimer() throws {
        let bare = "[room]\nid = \"a\"\n[rooms.a]\naddress = \"10.0.0.1\"\n[rooms.b]\naddress = \"10.0.0.2\"\n"
        let scaled = try DaemonConfig.parse(bare + "[testing]\ntime_scale = 10\n")
        XCTAssertEqual(scaled.testing.timeScale, 10)
        let normal = Mirror(reflecting: CallTiming()).children
        let fast = Mirror(reflecting: scaled.callSettings().timing).children
        XCTAssertGreaterThanOrEqual(normal.count, 11)
        for (n, f) in zip(normal, fast) {
            let before = try XCTUnwrap(n.value as? Double, "\(n.label ?? "?") is a time in seconds")
            let after = try XCTUnwrap(f.value as? Double)
            XCTAssertEqual(after, before / 10, accuracy: 1e-12, "\(n.label ?? "?") runs 10 times faster")
        }
        XCTAssertEqual(scaled.testing.scaled(86400), 8640)
        XCTAssertEqual(try DaemonConfig.parse(bare).testing.timeScale, 1, "1 unless set")
        assertIssue(bare + "[testing]\ntime_scale = 0.5\n", key: "testing.time_scale", "not in range")
    }

    /// Issue 52, point 5: times, modes and addresses are typed once when read, and each default
    /// has one source, which the configuration takes from the code that uses it.
    func testTimesModesAndAddressesAreTypedOnceAndEachDefaultHasOneSource() throws {
        let defaults = DaemonConfig.default
        let timing = CallTiming()
        XCTAssertEqual(defaults.calls.ring.seconds, timing.ringTime)
        XCTAssertEqual(defaults.calls.answerTimeout.seconds, timing.answerTimeout)
        XCTAssertEqual(defaults.calls.missedReminder.seconds, timing.missedReminder)
        XCTAssertEqual(defaults.calls.notificationReminder.seconds, timing.notificationReminder)
        XCTAssertEqual(defaults.keys.debounce, KeyTiming.debounce)
        XCTAssertEqual(defaults.keys.longPress, KeyTiming.longPress)
        XCTAssertEqual(KeyReaderSettings(path: "", map: KeyMap()).debounce, KeyTiming.debounce, "the key reader's own default is the same one")
        // A room that sets nothing runs the engine's own times.
        let bare = "[room]\nid = \"a\"\n[rooms.a]\naddress = \"10.0.0.1\"\n[rooms.b]\naddress = \"10.0.0.2\"\n"
        XCTAssertEqual(try DaemonConfig.parse(bare).callSettings().timing, timing)

        let text = practice.replacingOccurrences(of: "do_not_disturb = true\n", with: """
            caller_voice = "multicast"
            multicast_group = "239.1.2.3:5004"
            missed_reminder_s = 90

            """).replacingOccurrences(of: "media_port = 6004\n", with: "")
        let c = try DaemonConfig.parse(text)
        XCTAssertEqual(c.calls.callerVoice, .multicast)
        XCTAssertEqual(c.calls.multicastGroup, IPv4Endpoint("239.1.2.3:5004"))
        XCTAssertEqual(c.calls.ring, .milliseconds(800))
        XCTAssertEqual(c.calls.missedReminder, .seconds(90))
        XCTAssertEqual(c.callSettings().timing.missedReminder, 90)
        XCTAssertEqual(c.callSettings().callerVoice, .multicast(group: IPv4Endpoint("239.1.2.3:5004")!))
        // Written back as read: the same numbers in the same units.
        let again = try DaemonConfig.parse(c.rendered())
        XCTAssertEqual(again.calls.ring, c.calls.ring)
        XCTAssertEqual(again.calls.multicastGroup, c.calls.multicastGroup)
        XCTAssertTrue(c.rendered().contains("ring_ms = 800\n") && c.rendered().contains("missed_reminder_s = 90\n"))
        // A malformed address is refused when read, naming its key.
        let calls = { (line: String) in self.practice.replacingOccurrences(of: "do_not_disturb = true\n", with: line + "\n") }
        assertIssue(calls("caller_voice = \"multicast\"\nmulticast_group = \"239.1.2:5004\""),
                    key: "calls.multicast_group", "is not an IPv4 address and port")
        assertIssue(calls("caller_voice = \"multicst\""), key: "calls.caller_voice", "(did you mean multicast?)")
    }

    func testTonesAndTheNewKeyActionsAreReadAndBadEntriesNameTheirKey() throws {
        let tones = practice.replacingOccurrences(of: "KEY_ESC = \"hang_up\"\n", with: """
            KEY_ESC = "hang_up"
            KEY_1 = "answer"
            KEY_2 = "decline"
            KEY_3 = "call_back"
            KEY_4 = "call_missed"
            KEY_5 = "acknowledge_all"

            [tones]
            in_call_db = -18
            [tones.wav]
            busy = "/etc/intercomd/busy.wav"
            [tones.gain_db]
            missed_call = 6

            """)
        let config = try DaemonConfig.parse(tones)
        XCTAssertEqual(config.tones.wav, ["busy": "/etc/intercomd/busy.wav"])
        XCTAssertEqual(config.tones.gainDB, ["missed_call": 6])
        XCTAssertEqual(config.tones.inCallDB, -18)
        XCTAssertEqual(config.keyMap()[2], .perform(.answer))
        XCTAssertEqual(config.keyMap()[6], .perform(.acknowledge(all: true)))
        XCTAssertEqual(try DaemonConfig.parse(config.rendered()).tones, config.tones, "rendered and read back")
        assertIssue(tones.replacingOccurrences(of: "busy = ", with: "bussy = "), key: "tones.wav.bussy", "did you mean busy?")
        assertIssue(tones.replacingOccurrences(of: "missed_call = 6", with: "missed_call = 60"), key: "tones.gain_db.missed_call",
                    "60 is not in range -40...20")
        assertIssue(tones.replacingOccurrences(of: "in_call_db = -18", with: "in_call_db = 3"), key: "tones.in_call_db", "not in range")
    }

    func testKeyMapErrorsNameTheirEntry() {
        let map = { (entries: String) in
            self.practice.replacingOccurrences(of: "KEY_F1 = \"call:alle\"\nKEY_F2 = \"call:2\"\nKEY_ESC = \"hang_up\"\n", with: entries)
        }
        assertIssue(map("KEY_F99 = \"hang_up\"\n"), key: "keys.map.KEY_F99", "not a key code", line: 39)
        assertIssue(map("KEY_F1 = \"dial\"\n"), key: "keys.map.KEY_F1", "\"dial\" is not an action")
        assertIssue(map("KEY_F1 = \"hang_up\"\n59 = \"toggle_dnd\"\n"), key: "keys.map.KEY_F1",
                    "code 59 is already mapped by \"59\"")
        assertIssue(map("KEY_F1 = \"call:labor\"\n"), key: "keys.map.KEY_F1", "\"call:labor\": there is no [buttons.labor]")
        assertIssue(map("KEY_F1 = \"call:3\"\n"), key: "keys.map.KEY_F1", "there are 2 buttons (numbered in name order: alle, beh1)")
        assertIssue(map("KEY_F1 = 3\n"), key: "keys.map.KEY_F1", "expected a string")
        assertIssue(map("").replacingOccurrences(of: "[keys.map]", with: "map = 3"), key: "keys.map", "expected a table")

        // Every bad entry is reported, not only the first.
        let found = issues(map("KEY_F1 = \"dial\"\nKEY_F2 = \"ring\"\n"))
        XCTAssertEqual(found.map(\.key), ["keys.map.KEY_F1", "keys.map.KEY_F2"])
    }

    func testLightsMapStatesToLEDsAndBadEntriesNameTheirKey() throws {
        let lights = practice + """
            [lights]
            led_dir = "/run/test/leds"
            gpio_chip = "gpiochip1"
            [lights.gpio]
            red = 27
            [lights.map]
            ringing = { led = "board:green:status", pattern = "fast_blink" }
            in_call = { led = "board:green:status" }
            fault = { led = "red", pattern = "slow_blink" }

            """
        let config = try DaemonConfig.parse(lights)
        let settings = try XCTUnwrap(config.lightsSettings())
        XCTAssertEqual(settings.ledDirectory, "/run/test/leds")
        XCTAssertEqual(settings.gpioChip, "gpiochip1")
        XCTAssertEqual(settings.gpioLines, ["red": 27])
        XCTAssertEqual(settings.plan.rules, [.ringing: LightRule(led: "board:green:status", pattern: .fastBlink),
                                             .inCall: LightRule(led: "board:green:status", pattern: .steady),
                                             .fault: LightRule(led: "red", pattern: .slowBlink)])
        XCTAssertEqual(try DaemonConfig.parse(config.rendered()).lights, config.lights, "rendered and read back")
        XCTAssertNil(DaemonConfig().lightsSettings(), "no map, no lights thread")
        assertIssue(lights.replacingOccurrences(of: "ringing =", with: "rining ="), key: "lights.map.rining", "did you mean ringing?")
        assertIssue(lights.replacingOccurrences(of: "\"fast_blink\"", with: "\"fast\""), key: "lights.map.ringing.pattern",
                    "\"fast\" is not a pattern")
        assertIssue(lights.replacingOccurrences(of: "{ led = \"board:green:status\" }", with: "{ pattern = \"steady\" }"),
                    key: "lights.map.in_call", "needs led")
        assertIssue(lights.replacingOccurrences(of: "{ led = \"red\",", with: "{ led = \"../red\","), key: "lights.map.fault.led",
                    "is not an LED name")
        assertIssue(lights.replacingOccurrences(of: "red = 27", with: "red = -1"), key: "lights.gpio.red", "not a line offset")
        assertIssue(lights.replacingOccurrences(of: "in_call = { led", with: "in_call = { colour = 1, led"), key: "lights.map.in_call.colour",
                    "is not a field")
    }

    func testLongMapGivesAKeyASecondActionAndItsErrorsNameTheirEntry() throws {
        let long = practice + "[keys.long_map]\nKEY_F1 = \"call_back\"\nBTN_0 = \"acknowledge_all\"\n"
        let config = try DaemonConfig.parse(long.replacingOccurrences(of: "debounce_ms = 40", with: "debounce_ms = 40\nlong_press_ms = 600"))
        XCTAssertEqual(config.keys.longPress, .milliseconds(600))
        XCTAssertEqual(config.keyMap().long, [59: .perform(.callBack), 0x100: .perform(.acknowledge(all: true))])
        XCTAssertEqual(config.keyMap()[59], .perform(.call(button: "alle")), "the short action stays")
        XCTAssertEqual(try DaemonConfig.parse(config.rendered()).keys, config.keys, "rendered and read back")
        assertIssue(long.replacingOccurrences(of: "\"call_back\"", with: "\"call_bak\""), key: "keys.long_map.KEY_F1",
                    "\"call_bak\" is not an action")
        assertIssue(long.replacingOccurrences(of: "\"call_back\"", with: "\"call:labor\""), key: "keys.long_map.KEY_F1",
                    "there is no [buttons.labor]")
        assertIssue(long.replacingOccurrences(of: "debounce_ms = 40", with: "long_press_ms = 100"), key: "keys.long_press_ms",
                    "not in range 300...5000")
    }

    func testValidateChecksCodeBuiltConfiguration() throws {
        var c = DaemonConfig()
        c.room.id = "a"
        c.rooms = ["a": RoomEntry(address: "10.0.0.1", mediaPort: 6000), "b": RoomEntry(address: "10.0.0.2")]
        c.buttons = ["b": ButtonEntry(rooms: ["b"])]
        XCTAssertThrowsError(try c.validate()) { error in
            XCTAssertEqual((error as? ConfigError)?.issues.map(\.key), ["network.listen_port"])
        }
        c.network.listenPort = 6000
        XCTAssertNoThrow(try c.validate())
        XCTAssertEqual(c.callSettings().media, endpoint("10.0.0.1:6000"))
    }

    // MARK: Rendering and the example

    func testRenderedCallsRoundTrip() throws {
        let config = try DaemonConfig.parse(practice.replacingOccurrences(
            of: "media_port = 6004\n", with: "media_port = 6004\nmay_call = [\"empfang\"]\n")
            .replacingOccurrences(of: "name = \"Empfang\"\n", with: "name = \"Empfang\"\nmay_call = [\"beh1\", \"beh2\"]\n"))
        let text = config.rendered()
        XCTAssertEqual(try DaemonConfig.parse(text, source: "rendered"), config)
        XCTAssertTrue(text.contains("\n[rooms.beh1]\n"), text)
        XCTAssertTrue(text.contains("\n[buttons.alle]\n"), text)
        XCTAssertTrue(text.contains("\nmode = \"0640\"\n"), text)

        assertEveryKeyRenderedUnderAComment(text, DaemonConfig.callSchema)
    }

    func testExampleDocumentsEveryCallKey() throws {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("config/intercomd.example.toml").path
        let text = try String(contentsOfFile: path, encoding: .utf8)
        XCTAssertFalse(try DaemonConfig.parse(text).callsEnabled)
        let locator = KeyLocator(text)
        for section in DaemonConfig.callSchema {
            for key in section.keys {
                XCTAssertTrue(locator.defines([section.name, key.name]), "example lacks \(section.name).\(key.name)")
            }
        }
        for key in RoomEntry.keyNames + ButtonEntry.keyNames {
            XCTAssertTrue(text.contains("#   \(key) = "), "example lacks an example of \(key)")
        }
    }
}
