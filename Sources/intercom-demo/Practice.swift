import Foundation
import RigKit

/// The small practice the main job shows: three rooms, each a terminal on a rig room of its own,
/// described once. `practiceText` is the part every terminal shares (the directory); a terminal's
/// file adds what belongs to its box (devices, its room, its keys and the buttons and notification
/// types they use, its files).
struct Practice {
    struct Terminal {
        /// Room id, display name, and the rig room whose air and speaker it has.
        let id: String
        let name: String
        let rig: String
        /// What each key does (key name → action, as `[keys.map]` takes it).
        let keys: [(key: String, action: String)]
        /// The call buttons and notification types its keys use (TOML tables). A terminal's
        /// buttons cannot name its own room, so they are its own, not the practice's.
        var tables = ""
        var signallingPort = 0
        var mediaPort = 0
    }

    static let reception = "empfang", treatment = "beh1", lab = "labor"
    /// The notification Behandlung 1 sends to the lab, read aloud there.
    static let materialText = "Behandlung eins braucht Material"

    /// The keys, by what the demo presses (the names are the terminal's own, in `[keys.map]`).
    enum Key: String {
        case callTreatment = "KEY_1", callLab = "KEY_2", emergencyLab = "KEY_3", hangUp = "KEY_9"
        case sendMaterial = "KEY_4"
        case acknowledge = "KEY_5", toggleDoNotDisturb = "KEY_6"
        /// The evdev code the FIFO carries (KEY_1 = 2 ... KEY_9 = 10).
        var code: UInt16 { UInt16(rawValue.dropFirst(4))! + 1 }
    }

    var terminals: [Terminal] = [
        Terminal(id: reception, name: "Empfang", rig: "empfang", keys: [
            (Key.callTreatment.rawValue, "call:beh1"), (Key.callLab.rawValue, "call:labor"),
            (Key.emergencyLab.rawValue, "call:notruf_labor"), (Key.hangUp.rawValue, "hang_up"),
        ], tables: """
            [buttons.beh1]
            rooms = ["beh1"]
            label = "Behandlung 1"
            [buttons.labor]
            rooms = ["labor"]
            label = "Labor"
            [buttons.notruf_labor]
            rooms = ["labor"]
            label = "Notruf Labor"
            kind = "emergency"
            """),
        Terminal(id: treatment, name: "Behandlung 1", rig: "behandlung1", keys: [
            (Key.sendMaterial.rawValue, "notify:material"), (Key.hangUp.rawValue, "hang_up"),
        ], tables: """
            [notifications.material]
            label = "Material bringen"
            recipients = ["labor"]
            text = "\(materialText)"
            tone = "bell"
            """),
        Terminal(id: lab, name: "Labor", rig: "labor", keys: [
            (Key.acknowledge.rawValue, "acknowledge"), (Key.toggleDoNotDisturb.rawValue, "toggle_dnd"),
            (Key.hangUp.rawValue, "hang_up"),
        ]),
    ]
    let folder: String
    let reminderSeconds: Int

    init(folder: String, reminderSeconds: Int) throws {
        self.folder = folder
        self.reminderSeconds = reminderSeconds
        for i in terminals.indices {
            terminals[i].signallingPort = try FreePort.udp()
            terminals[i].mediaPort = try FreePort.udp()
        }
    }

    func terminal(_ id: String) -> Terminal { terminals.first { $0.id == id }! }

    func socket(_ id: String) -> String { "\(folder)/\(id).sock" }
    func keyDevice(_ id: String) -> String { "\(folder)/\(id)-keys" }
    func configPath(_ id: String) -> String { "\(folder)/\(id).toml" }
    var practicePath: String { "\(folder)/practice.toml" }
    var siteKeyPath: String { "\(folder)/site.key" }

    /// The practice's directory: every room, its name and where its terminal is. The same text in
    /// every terminal's file (until one signed site document holds the whole practice, issue 52).
    var practiceText: String {
        var text = "# The practice: the same in every terminal's file.\n"
        for t in terminals {
            text += """

                [rooms.\(t.id)]
                name = "\(t.name)"
                address = "127.0.0.1"
                signalling_port = \(t.signallingPort)
                media_port = \(t.mediaPort)

                """
        }
        return text
    }

    /// One terminal's file: its box (devices, room, keys and what they call or send, files), then
    /// the practice's directory.
    func terminalText(_ t: Terminal) -> String {
        """
        # \(t.name): this terminal's own settings; the practice follows.
        [audio]
        capture_device = "\(t.rig)"
        playback_device = "\(t.rig)"
        [network]
        listen_port = \(t.mediaPort)
        [log]
        stats_interval_s = 5
        [room]
        id = "\(t.id)"
        [calls]
        ring_ms = 1000
        notification_reminder_s = \(reminderSeconds)
        history_path = "\(folder)/\(t.id)-history.json"
        state_path = "\(folder)/\(t.id)-state.json"
        [security]
        site_key = "\(siteKeyPath)"
        [control]
        socket = "\(socket(t.id))"
        [keys]
        device = "\(keyDevice(t.id))"
        [keys.map]
        \(t.keys.map { "\($0.key) = \"\($0.action)\"" }.joined(separator: "\n"))
        \(t.tables)

        """ + practiceText
    }

    /// Writes the site key (0600), the practice and each terminal's file, and makes each
    /// terminal's key device (a FIFO: the box's keys, as evdev records).
    func write() throws {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        var key = [UInt8](repeating: 0, count: 32)
        guard getentropy(&key, key.count) == 0 else { throw RigError(description: "getentropy failed") }
        guard FileManager.default.createFile(atPath: siteKeyPath, contents: Data(Data(key).base64EncodedString().utf8),
                                             attributes: [.posixPermissions: 0o600]) else {
            throw RigError(description: "cannot write \(siteKeyPath)")
        }
        try practiceText.write(toFile: practicePath, atomically: true, encoding: .utf8)
        for t in terminals {
            try terminalText(t).write(toFile: configPath(t.id), atomically: true, encoding: .utf8)
            unlink(keyDevice(t.id))
            guard mkfifo(keyDevice(t.id), 0o600) == 0 else { throw RigError(description: "mkfifo \(keyDevice(t.id)) failed") }
            for stale in ["history.json", "state.json"] { unlink("\(folder)/\(t.id)-\(stale)") }
        }
    }
}
