import Calls
import Control
import Keys
import Posix
import TOMLKit

// Calls: this room, the directory of rooms, the call buttons, how calls behave, the control
// socket and the keys. Calls are on when `[room] id` is set; without it the file means what it
// meant before calls existed. `[rooms.<id>]` and `[buttons.<name>]` are tables of tables
// (ConfigCallTables.swift); the checks across sections are in ConfigCallRules.swift.

/// `[room]`: which room of the directory this terminal is.
public struct RoomSection: Sendable, Equatable {
    /// The room's id in `[rooms]`; empty = calls off.
    public var id: String = ""

    public init() {}
}

/// `[rooms.<id>]`: one room of the practice (the directory lists every room, this one included).
public struct RoomEntry: Sendable, Equatable {
    /// Display name; empty = the id.
    public var name: String = ""
    /// IPv4 address of the room's terminal (required).
    public var address: String = ""
    public var signallingPort: Int = 5070
    public var mediaPort: Int = 5004
    /// Rooms this one may call; nil = every room. Once any room has the key, a room without it
    /// may call nobody.
    public var mayCall: [String]? = nil

    public init() {}

    public init(name: String = "", address: String, signallingPort: Int = 5070, mediaPort: Int = 5004,
                mayCall: [String]? = nil) {
        self.name = name
        self.address = address
        self.signallingPort = signallingPort
        self.mediaPort = mediaPort
        self.mayCall = mayCall
    }

    /// `name`, or the id when it is empty.
    public func displayName(id: String) -> String { name.isEmpty ? id : name }
}

/// `[buttons.<name>]`: a call button.
public struct ButtonEntry: Sendable, Equatable {
    /// The rooms it calls (one = a direct call, several = a group call); group names from
    /// `[groups]` stand for their rooms.
    public var rooms: [String] = []
    /// Text for the terminal; empty = the button's name.
    public var label: String = ""
    /// "call", "emergency" or "announcement" (`CallKind`).
    public var kind: String = CallKind.normal.rawValue

    public init() {}

    public init(rooms: [String], label: String = "", kind: CallKind = .normal) {
        self.rooms = rooms
        self.label = label
        self.kind = kind.rawValue
    }
}

/// `[calls]`: how calls behave in this room.
public struct CallsSection: Sendable, Equatable {
    /// A called room opens its audio by itself after the chime.
    public var autoAnswer: Bool = true
    // The times' defaults are the call engine's (`CallTiming`): one number each, there.
    /// The chime plays this long in a called room before its audio opens (`ring_ms`).
    public var ring: Duration = .seconds(CallTiming().ringTime)
    /// A call nobody answers is given up after this long (`answer_timeout_ms`).
    public var answerTimeout: Duration = .seconds(CallTiming().answerTimeout)
    /// Do-not-disturb at the very first start (afterwards the saved state wins).
    public var doNotDisturb: Bool = false
    /// One stream to each callee, or one stream to `multicastGroup`.
    public var callerVoice: CallerVoice = .unicast
    /// Required for multicast (`""` in the file: none).
    public var multicastGroup: IPv4Endpoint?
    public var historyPath: String = "/var/lib/intercomd/history.json"
    public var historyLimit: Int = 500
    /// History entries older than this many days are dropped; 0 = kept by count only.
    public var historyMaxAgeDays: Int = 90
    /// A missed call not yet acknowledged sounds a reminder once it is this old, and again every
    /// this long while one waits; 0 = no reminder (`missed_reminder_s`).
    public var missedReminder: Duration = .seconds(CallTiming().missedReminder)
    /// A notification heard and not acknowledged is reminded (its reminder tone, read again) this
    /// long after it was heard, and again every this long; 0 = no reminder (`notification_reminder_s`).
    public var notificationReminder: Duration = .seconds(CallTiming().notificationReminder)
    /// Read notifications aloud at the very first start (afterwards the room's saved switch wins).
    public var readAloud: Bool = true
    public var statePath: String = "/var/lib/intercomd/state.json"
    /// A 48 kHz mono 16-bit WAV replacing the generated chime; "" = generated.
    public var chimeWav: String = ""

    public init() {}

    public static let ringMsRange = 0...10_000
    public static let answerTimeoutMsRange = 1000...600_000
    public static let historyLimitRange = 1...100_000
    public static let historyMaxAgeDaysRange = 0...36_500
    public static let missedReminderSRange = 0...86_400
}

/// `calls.caller_voice`: how a caller's voice reaches its callees.
public enum CallerVoice: String, CaseIterable, Sendable {
    /// One stream to each callee.
    case unicast
    /// One stream to `calls.multicast_group`, which every callee joins.
    case multicast
}

/// `[security]`: the site key that authenticates and encrypts what terminals send each other.
public struct SecuritySection: Sendable, Equatable {
    /// Path of the site key file (base64, at least 32 bytes, not readable by others); "" = none:
    /// the terminal keys the site document approves, or nothing at all (docs/identity.md).
    public var siteKey: String = ""
    public var mode: SecurityMode = .secure

    public init() {}
}

/// `security.mode`: whether a terminal with no key may talk in the clear.
public enum SecurityMode: String, CaseIterable, Sendable {
    /// With no key, nothing is sent or taken on the network.
    case secure
    /// With no key, signalling and media in the clear: a test bench, never a practice.
    case lab
}

/// `[control]`: the local control socket (docs/control.md).
public struct ControlSection: Sendable, Equatable {
    public var socket: String = ControlSettings.defaultSocketPath
    /// Permissions of the socket file; written as an octal string ("0660") in the file.
    public var mode: UInt32 = 0o660
    /// Group owning the socket (name or number); "" = the daemon's.
    public var group: String = ""
    /// Members of this group (and root) may run the technician's commands (the loopback tests);
    /// "" = anyone who may connect.
    public var technicianGroup: String = ""

    public init() {}

    /// sun_path holds 108 bytes, one of them the terminating NUL.
    public static let maxSocketPathBytes = 107
}

/// `[keys]`: the terminal's keys (a Linux input device).
public struct KeysSection: Sendable, Equatable {
    /// Device path, e.g. /dev/input/event0; "" = no keys.
    public var device: String = ""
    /// Presses of one key closer together than this count once (`debounce_ms`; the default is
    /// `KeyTiming`'s, there only).
    public var debounce: Duration = KeyTiming.debounce
    /// Key name or code → action (`[keys.map]`), as `Keys.KeyMap.parse` takes them.
    public var map: [String: String] = [:]
    /// Key name or code → action on a long press (`[keys.long_map]`).
    public var longMap: [String: String] = [:]
    /// A key with a long action held this long fires it; let go sooner, its short action (`long_press_ms`).
    public var longPress: Duration = KeyTiming.longPress

    public init() {}

    public static let debounceMsRange = 0...1000
    public static let longPressMsRange = 300...5000
}

// MARK: - What the rest of the daemon is built from

extension DaemonConfig {
    /// Calls are on: `[room] id` is set.
    public var callsEnabled: Bool { !room.id.isEmpty }

    /// Media goes on the wire: with calls (keyed by them), or fixed streams (`network.peers`,
    /// always in the clear) in lab mode only.
    public var networkMediaEnabled: Bool { network.isEnabled && (callsEnabled || security.mode == .lab) }

    /// Why fixed streams are refused outside lab mode, or nil.
    static func clearStreamProblem(_ c: DaemonConfig, _ what: [String]) -> String? {
        c.callsEnabled || what.isEmpty || c.security.mode == .lab ? nil
            : "fixed streams without calls carry audio in the clear; set security.mode = \"lab\" to allow that on a test bench, or give the terminal a room ([room] id) so that calls key its media"
    }

    /// The call engine's settings. Precondition: calls are on and the configuration is valid.
    /// How a call's voice travels, as the call engine takes it.
    var voiceDelivery: VoiceDelivery {
        if calls.callerVoice == .multicast, let group = calls.multicastGroup { return .multicast(group: group) }
        return .unicast
    }

    public func callSettings() -> CallSettings {
        precondition(callsEnabled, "callSettings() needs [room] id")
        var directory: [RoomID: DirectoryEntry] = [:]
        for (id, entry) in rooms {
            directory[RoomID(id)!] = DirectoryEntry(name: entry.displayName(id: id),
                                                    signalling: entry.endpoint(port: entry.signallingPort)!)
        }
        let me = rooms[room.id]!
        var s = CallSettings(room: RoomID(room.id)!, directory: directory, media: me.endpoint(port: me.mediaPort)!)
        // A site's button calls here only the rooms this one may call (`rooms.<id>.may_call`); one
        // left with none (e.g. for this room alone) is refused when pressed here.
        s.buttons = buttons.mapValues {
            CallButton(rooms: resolveRecipients($0.rooms).filter { $0 != room.id && (!ofSite || permits(room.id, $0)) }.map { RoomID($0)! },
                       kind: CallKind(rawValue: $0.kind) ?? .normal)
        }.filter { !$0.value.rooms.isEmpty }
        if rooms.values.contains(where: { $0.mayCall != nil }) {
            var allowed: [RoomID: Set<RoomID>] = [:]
            for (id, entry) in rooms {
                if let may = entry.mayCall { allowed[RoomID(id)!] = Set(may.map { RoomID($0)! }) }
            }
            s.permissions = .only(allowed)
        }
        s.autoAnswer = calls.autoAnswer
        s.doNotDisturb = calls.doNotDisturb
        s.callerVoice = voiceDelivery
        s.timing.ringTime = calls.ring.seconds
        s.timing.answerTimeout = calls.answerTimeout.seconds
        s.timing.missedReminder = calls.missedReminder.seconds
        s.timing.notificationReminder = calls.notificationReminder.seconds
        s.timing = s.timing.scaled(by: testing.timeScale)
        s.readAloud = calls.readAloud
        s.audio = audio.enabled
        s.notifications = notificationTypes()
        return s
    }

    /// Where a room of the directory receives media (its address and `media_port`); nil for a
    /// room that is not in `[rooms]` or has no valid address.
    public func mediaEndpoint(of room: String) -> IPv4Endpoint? {
        rooms[room].flatMap { $0.endpoint(port: $0.mediaPort) }
    }

    /// The control socket's settings (every bound not in the file at its default).
    public func controlSettings() -> ControlSettings {
        var s = ControlSettings(socketPath: control.socket)
        s.mode = control.mode
        s.group = control.group.isEmpty ? nil : control.group
        return s
    }

    /// The key map. Precondition: the configuration is valid (else the map is empty).
    public func keyMap() -> KeyMap { (try? KeyMap.parse(keys.map, long: keys.longMap)) ?? KeyMap() }
}

extension RoomEntry {
    /// `address:port`, nil when the address is not dotted IPv4 or the port is out of range.
    func endpoint(port: Int) -> IPv4Endpoint? {
        guard let a = try? IPv4Endpoint.parseAddress(address), let p = UInt16(exactly: port) else { return nil }
        return IPv4Endpoint(address: a, port: p)
    }
}

// MARK: - Schema of the fixed call sections

extension DaemonConfig {
    /// `[room]`, `[calls]`, `[control]`, `[keys]`: read and checked like `schema`, but rendered
    /// only when calls are configured, so a file without calls renders as it did before.
    static let callSchema: [SchemaSection] = [
        SchemaSection(name: "room", comment: "This terminal's room. Calls are on when id names this terminal's entry in [rooms]; then [network] listen_port follows that entry's media_port and [network] peers stay empty.", keys: [
            .string("id", \.room.id, "Id of this room in [rooms] (1-32 of a-z, 0-9, - and _); \"\" = calls off", .any),
        ]),
        SchemaSection(name: "calls", comment: "Calls between rooms (docs/calls.md).", keys: [
            .bool("auto_answer", \.calls.autoAnswer, "A called room opens its audio by itself after the chime").reloaded(.betweenCalls),
            .duration("ring_ms", \.calls.ring, .milliseconds, "Chime time in a called room before its audio opens, ms",
                      CallsSection.ringMsRange).reloaded(.betweenCalls),
            .duration("answer_timeout_ms", \.calls.answerTimeout, .milliseconds, "The ring timeout: a call nobody takes is given up after this, ms (the callee keeps it as missed); more than ring_ms when auto_answer is on",
                      CallsSection.answerTimeoutMsRange)
                .alsoChecking { c in
                    !c.calls.autoAnswer || c.calls.answerTimeout > c.calls.ring ? nil
                        : "\(c.calls.answerTimeout.milliseconds) is not more than calls.ring_ms (\(c.calls.ring.milliseconds)): calls would be given up before they open"
                }.reloaded(.betweenCalls),
            .bool("do_not_disturb", \.calls.doNotDisturb, "Refuse calls at the very first start (afterwards the saved state wins)"),
            .choice("caller_voice", \.calls.callerVoice,
                    "How this room's voice reaches its callees: one stream each, or one multicast stream").reloaded(.betweenCalls),
            .endpoint("multicast_group", \.calls.multicastGroup, "Group the caller's voice is sent to when caller_voice = \"multicast\"",
                      allowed: "\"a.b.c.d:port\", 224...239.x.x.x; \"\" = none", multicastGroupProblem)
                .alsoChecking { c in
                    c.calls.callerVoice == .multicast && c.calls.multicastGroup == nil
                        ? "is required when calls.caller_voice is \"multicast\" (\"a.b.c.d:port\")" : nil
                }.reloaded(.betweenCalls),
            .string("history_path", \.calls.historyPath, "Call history file (JSON, written atomically)"),
            .int("history_limit", \.calls.historyLimit, "Entries the history keeps (the oldest are dropped)",
                 .range(CallsSection.historyLimitRange)),
            .int("history_max_age_days", \.calls.historyMaxAgeDays, "History entries older than this many days are dropped (at start, with each new call, and daily); 0 = kept by history_limit only",
                 .range(CallsSection.historyMaxAgeDaysRange)),
            .duration("missed_reminder_s", \.calls.missedReminder, .seconds, "A missed call nobody acknowledged sounds the missed_call tone once it is this old and again every this many seconds while one waits; 0 = no reminder",
                      CallsSection.missedReminderSRange).reloaded(.betweenCalls),
            .duration("notification_reminder_s", \.calls.notificationReminder, .seconds, "A notification heard and not acknowledged sounds the reminder tone and is read again this many seconds after it was heard, and every this many seconds until acknowledged; 0 = no reminder",
                      CallsSection.missedReminderSRange).reloaded(.betweenCalls),
            .bool("read_aloud", \.calls.readAloud, "Read notifications aloud at the very first start (afterwards the room's saved switch wins; the key action toggle_read_aloud and the command read_aloud switch it)"),
            .string("state_path", \.calls.statePath, "File keeping do-not-disturb and the read-aloud switch across restarts"),
            .string("chime_wav", \.calls.chimeWav, "48 kHz mono 16-bit WAV replacing the generated chime; \"\" = generated", .any).reloaded(.live),
        ]),
        SchemaSection(name: "security", comment: "Sealed signalling and SRTP media between the terminals of a site.", keys: [
            .string("site_key", \.security.siteKey,
                    "The site key file: the same file on every terminal of the site, base64 of at least 32 random bytes, readable by the service only (head -c 32 /dev/urandom | base64 > /etc/intercomd/site.key; chown root:intercomd and chmod 0640 it). With it, signalling between terminals is encrypted and authenticated, each call's media is SRTP under keys derived per call and per sending room, and a terminal without it can neither call, nor be called, nor be heard. \"\" = none: the terminal keys the site document approves (docs/identity.md), or, with neither, no network at all outside lab mode", .any),
            .choice("mode", \.security.mode,
                    "secure: a terminal with neither a site key nor an approved terminal key sends and takes nothing on the network (it waits for its approval). lab: with neither, signalling and media go in the clear and anyone on the network can call, listen and be heard; for a test bench only, and named so in every start and in status"),
        ]),
        SchemaSection(name: "control", comment: "The local control socket (intercomctl, docs/control.md).", keys: [
            .string("socket", \.control.socket, "Path of the Unix socket",
                    Rule(allowed: "1...\(ControlSection.maxSocketPathBytes) bytes") { v in
                        (1...ControlSection.maxSocketPathBytes).contains(v.utf8.count) ? nil
                            : "\(v.utf8.count) bytes; a Unix socket path has 1...\(ControlSection.maxSocketPathBytes)"
                    }),
            .octalMode("mode", \.control.mode, "Permissions of the socket file (clients need write permission)"),
            .string("group", \.control.group, "Group owning the socket, name or number; \"\" = the daemon's", .any),
            .string("technician_group", \.control.technicianGroup,
                    "Only root and members of this group (name or number) may run the loopback tests; \"\" = every client", .any),
        ]),
        SchemaSection(name: "keys", comment: "The terminal's keys (a Linux input device).", keys: [
            .string("device", \.keys.device, "Input device (evdev), e.g. /dev/input/event0; \"\" = no keys", .any),
            .duration("debounce_ms", \.keys.debounce, .milliseconds, "Presses of one key closer together than this count once, ms",
                      KeysSection.debounceMsRange).reloaded(.live),
            .duration("long_press_ms", \.keys.longPress, .milliseconds, "A key with an entry in long_map, held this long, does its long action; let go sooner, its map action, ms",
                      KeysSection.longPressMsRange).reloaded(.live),
            .keyMap("map", \.keys.map, "Key name (KEY_F1, BTN_0) or code → call:<button name or number>, answer, decline, hang_up, call_back, call_missed, acknowledge, acknowledge_all, toggle_mic_mute, toggle_speaker_mute, toggle_dnd, toggle_read_aloud, say_enrolment_code or notify:<notification id>; e.g. { KEY_F1 = \"call:alle\", KEY_ESC = \"hang_up\" }, or the same as a [keys.map] table").reloaded(.live),
            .keyMap("long_map", \.keys.longMap, "The same for a long press (long_press_ms), for a box with few keys; a key listed here fires its map action when let go, not when pressed; e.g. { KEY_F1 = \"call_back\" }").reloaded(.live),
        ]),
        tonesSection,
        speechSection,
    ]
}

/// Problem with `calls.multicast_group` on its own, or nil (none is fine here).
private func multicastGroupProblem(_ group: IPv4Endpoint?) -> String? {
    guard let group else { return nil }
    let text = TOMLWrite.string(group.description)
    if !group.isMulticast { return "\(text) is not a multicast address (224...239.x.x.x)" }
    return group.port == 0 ? "\(text): port 0 cannot be sent to" : nil
}

extension SchemaKey {
    /// A file mode written as an octal string ("0660"), so it reads the way chmod takes it.
    static func octalMode(_ name: String, _ path: Path<UInt32>, _ comment: String) -> SchemaKey {
        SchemaKey(
            name: name, comment: comment, allowed: "octal, \"0000\"...\"0777\"",
            read: { value, config throws(ValueProblem) in
                if value.int != nil {
                    throw ValueProblem("expected an octal string such as \"0660\", got \(TOMLRead.describe(value))")
                }
                let text = try TOMLRead.string(value)
                guard (1...4).contains(text.utf8.count), let mode = UInt32(text, radix: 8), mode <= 0o777,
                      text.utf8.allSatisfy({ $0 >= 48 && $0 <= 55 })
                else { throw ValueProblem("\(TOMLWrite.string(text)) is not an octal mode \"0000\"...\"0777\"") }
                config[keyPath: path] = mode
            },
            check: { c in c[keyPath: path] <= 0o777 ? nil : "\(octal(c[keyPath: path])) is not a mode \"0000\"...\"0777\"" },
            render: { TOMLWrite.string(octal($0[keyPath: path])) },
            adopt: { $0[keyPath: path] = $1[keyPath: path] })
    }

    /// `[keys.map]`: entries are checked against the buttons in `callIssues` (each names its
    /// entry), so the key's own check has nothing to add.
    static func keyMap(_ name: String, _ path: Path<[String: String]>, _ comment: String) -> SchemaKey {
        SchemaKey(
            name: name, comment: comment, allowed: "a table, KEY = \"action\"",
            read: { value, config throws(ValueProblem) in
                guard let table = value.table else {
                    throw ValueProblem("expected a table ([keys.\(name)] or { KEY_F1 = \"hang_up\" }), got \(TOMLRead.describe(value))")
                }
                var map: [String: String] = [:]
                for (key, action) in table {
                    do throws(ValueProblem) { map[key] = try TOMLRead.string(action) } catch {
                        throw ValueProblem(error.text, at: key)
                    }
                }
                config[keyPath: path] = map
            },
            check: { _ in nil },
            render: { c in
                let entries = c[keyPath: path].sorted { $0.key < $1.key }
                return entries.isEmpty ? "{}"
                    : "{ " + entries.map { "\(TOMLWrite.key($0.key)) = \(TOMLWrite.string($0.value))" }.joined(separator: ", ") + " }"
            },
            adopt: { $0[keyPath: path] = $1[keyPath: path] })
    }
}

/// "0660".
private func octal(_ mode: UInt32) -> String {
    let digits = String(mode, radix: 8)
    return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
}
