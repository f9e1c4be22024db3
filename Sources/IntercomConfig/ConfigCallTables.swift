import TOMLKit
import Calls

// `[rooms.<id>]` and `[buttons.<name>]`: tables whose names are ids, so they cannot be fixed
// schema sections. Their keys are fixed, though: unknown ones are errors with a suggestion.

extension RoomEntry {
    static let keyNames = ["name", "address", "signalling_port", "media_port", "may_call"]

    static func read(_ key: String, _ value: TOMLValueConvertible, _ entry: inout RoomEntry) throws(ValueProblem) {
        switch key {
        case "name": entry.name = try TOMLRead.string(value)
        case "address": entry.address = try TOMLRead.string(value)
        case "signalling_port": entry.signallingPort = try TOMLRead.int(value)
        case "media_port": entry.mediaPort = try TOMLRead.int(value)
        case "may_call": entry.mayCall = try TOMLRead.strings(value)
        default: preconditionFailure("not in keyNames: \(key)")
        }
    }

    func rendered(id: String) -> String {
        var out = "\n[rooms.\(TOMLWrite.key(id))]\nname = \(TOMLWrite.string(name))\naddress = \(TOMLWrite.string(address))\n"
        out += "signalling_port = \(signallingPort)\nmedia_port = \(mediaPort)\n"
        if let mayCall { out += "may_call = [\(mayCall.map(TOMLWrite.string).joined(separator: ", "))]\n" }
        return out
    }
}

extension ButtonEntry {
    static let keyNames = ["rooms", "label", "kind"]

    static func read(_ key: String, _ value: TOMLValueConvertible, _ entry: inout ButtonEntry) throws(ValueProblem) {
        switch key {
        case "rooms": entry.rooms = try TOMLRead.strings(value)
        case "label": entry.label = try TOMLRead.string(value)
        case "kind": entry.kind = try TOMLRead.string(value)
        default: preconditionFailure("not in keyNames: \(key)")
        }
    }

    func rendered(name: String) -> String {
        "\n[buttons.\(TOMLWrite.key(name))]\nrooms = [\(rooms.map(TOMLWrite.string).joined(separator: ", "))]\n"
            + "label = \(TOMLWrite.string(label))\n" + (kind == CallKind.normal.rawValue ? "" : "kind = \(TOMLWrite.string(kind))\n")
    }
}

extension DaemonConfig {
    /// Section names that hold one table per id.
    static let tableOfTablesNames = ["rooms", "buttons", "notifications", "groups"]

    /// Reads `[rooms.<id>]` or `[buttons.<name>]` into `config`, recording the dotted keys found
    /// in `present`; false (nothing read) for any other section.
    static func readCallTables(_ name: String, _ value: TOMLValueConvertible, into config: inout DaemonConfig,
                               present: inout Set<String>, report: ([String], String) -> Void) -> Bool {
        switch name {
        case "rooms":
            config.rooms = readEntries(name, value, RoomEntry(), RoomEntry.keyNames, RoomEntry.read, &present, report)
        case "buttons":
            config.buttons = readEntries(name, value, ButtonEntry(), ButtonEntry.keyNames, ButtonEntry.read, &present, report)
        case "notifications":
            config.notifications = readEntries(name, value, NotificationEntry(), NotificationEntry.keyNames, NotificationEntry.read,
                                               &present, report)
        case "groups":
            config.groups = readGroups(value, present: &present, report: report)
        default:
            return false
        }
        return true
    }

    private static func readEntries<Entry>(
        _ section: String, _ value: TOMLValueConvertible, _ empty: Entry, _ keyNames: [String],
        _ read: (String, TOMLValueConvertible, inout Entry) throws(ValueProblem) -> Void,
        _ present: inout Set<String>, _ report: ([String], String) -> Void
    ) -> [String: Entry] {
        guard let tables = value.table else {
            report([section], "expected one table per entry ([\(section).<id>]), got \(TOMLRead.describe(value))")
            return [:]
        }
        var entries: [String: Entry] = [:]
        for (id, entryValue) in tables {
            guard let fields = entryValue.table else {
                report([section, id], "expected a table ([\(section).\(id)] with its keys), got \(TOMLRead.describe(entryValue))")
                continue
            }
            var entry = empty
            for (key, fieldValue) in fields {
                let path = [section, id, key]
                guard keyNames.contains(key) else {
                    let hint = Spelling.closest(to: key, among: keyNames).map { " (did you mean \(section).\(id).\($0)?)" }
                    report(path, "unknown key" + (hint ?? ""))
                    continue
                }
                do {
                    try read(key, fieldValue, &entry)
                    present.insert(path.joined(separator: "."))
                } catch {
                    report(path, error.text)
                }
            }
            entries[id] = entry
        }
        return entries
    }

    /// The practice's tables: the directory, the buttons, the groups and the notification types,
    /// each under a short comment; a commented example of all of them when there are none.
    func renderedTables() -> String {
        guard !rooms.isEmpty || !buttons.isEmpty || !groups.isEmpty || !notifications.isEmpty else {
            return "\n" + Self.comment(Self.tablesExample, wrap: false)
        }
        var out = ""
        if !rooms.isEmpty {
            out += "\n# The directory: one table per room, this one included. name (default: the id), address\n"
            out += "# (required), signalling_port (default 5070), media_port (default 5004), may_call (optional;\n"
            out += "# once a room has it, rooms without it may call nobody).\n"
        }
        for (id, entry) in rooms.sorted(by: { $0.key < $1.key }) { out += entry.rendered(id: id) }
        if !buttons.isEmpty {
            out += "\n# Call buttons: the rooms each calls (1...16; group names stand for their rooms), its label\n"
            out += "# (default: the name) and kind: call (default), emergency or announcement.\n"
        }
        for (name, button) in buttons.sorted(by: { $0.key < $1.key }) { out += button.rendered(name: name) }
        return out + renderedGroups() + renderedNotifications()
    }

    /// The tables' documentation where a file has none of them.
    static let tablesExample = """
        The directory: one table per room of the practice, this one included. Example:
          [rooms.empfang]
          name = "Empfang"           # display name (default: the id)
          address = "192.168.10.11"  # the room terminal's IPv4 address (required)
          signalling_port = 5070     # default 5070
          media_port = 5004          # default 5004
          may_call = ["beh1"]        # optional: once any room has it, rooms without it call nobody
        Call buttons: one table per button; one room = a direct call, several = a group call.
          [buttons.alle]
          rooms = ["beh1", "beh2", "beh3"]   # room ids and group names
          label = "Alle Behandlungsräume"
          kind = "call"              # call; emergency (answered at once, through do-not-disturb
                                     # and calls); announcement (one-way: the rooms only listen)
        Named groups of rooms, for buttons and notification recipients (a group name must not be a room id):
          [groups]
          behandlung = ["beh1", "beh2", "beh3"]
        Notification types, sent with a key (notify:<id>) or `intercomctl notify <id>`:
          [notifications.material]
          label = "Material bringen"     # history and intercomctl (default: the id)
          recipients = ["lager"]         # room ids and group names
          text = "Bitte Material bringen" # read aloud (default: the label)
          tone = "bell"                  # gong, bell, alert, alarm (default: by priority)
          priority = "normal"            # normal, urgent, emergency
          read_aloud = true              # false: the tone only
        SIGHUP applies changed rooms, buttons, groups and notifications between calls.
        """
}
