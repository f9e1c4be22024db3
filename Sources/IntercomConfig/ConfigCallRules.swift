import Calls
import Keys
import Posix

// Checks of the call configuration that look across keys and tables: the directory, the
// buttons, the key map and this room. Each issue names the key to fix. Whatever passes here
// gives `CallSettings` without `problems()` (checked last, as a safety net).

typealias PathIssue = (path: [String], problem: String)

extension DaemonConfig {
    /// With calls on, this room receives media on its directory `media_port`: a `[network]
    /// listen_port` that is not in the file follows it.
    mutating func applyCallDefaults(present: Set<String>) {
        guard callsEnabled, !present.contains("network.listen_port"), let me = rooms[room.id],
              (1...65535).contains(me.mediaPort) else { return }
        network.listenPort = me.mediaPort
    }

    /// Problems of the call configuration. `present` as in `ruleIssues`; `othersFound`: the
    /// schema's rules found problems (then the values may not even convert to `CallSettings`).
    func callIssues(present: Set<String>?, othersFound: Bool) -> [PathIssue] {
        var out: [PathIssue] = []
        directoryIssues(&out)
        buttonIssues(&out)
        groupIssues(&out)
        notificationIssues(&out)
        keyMapIssues(&out)
        guard callsEnabled else {
            let unused = [(!rooms.isEmpty, "[rooms]"), (!buttons.isEmpty, "[buttons]"), (!notifications.isEmpty, "[notifications]"),
                          (!keys.device.isEmpty, "keys.device"), (!keys.map.isEmpty, "[keys.map]"),
                          (!keys.longMap.isEmpty, "[keys.long_map]")]
                .filter(\.0).map(\.1)
            if !unused.isEmpty {
                out.append((["room", "id"], "is not set, so calls are off and \(unused.joined(separator: ", ")) unused: set it to this terminal's room id"))
            }
            return out
        }
        thisRoomIssues(present: present, &out)
        if out.isEmpty, !othersFound {
            // Safety net: anything the engine would refuse that the checks above let through.
            out += callSettings().problems().map { (path: ["room", "id"], problem: "the call engine refuses the configuration: \($0)") }
        }
        return out
    }

    private func directoryIssues(_ out: inout [PathIssue]) {
        var taken: [IPv4Endpoint: String] = [:]  // endpoint → the key that has it
        for (id, entry) in rooms.sorted(by: { $0.key < $1.key }) {
            if RoomID(id) == nil { out.append((["rooms", id], "\(TOMLWrite.string(id)) is not a room id (1-32 of a-z, 0-9, - and _)")) }
            if let p = unicastAddressProblem(entry.address) { out.append((["rooms", id, "address"], p)) }
            for (key, port) in [("signalling_port", entry.signallingPort), ("media_port", entry.mediaPort)] {
                guard (1...65535).contains(port) else {
                    out.append((["rooms", id, key], "\(port) is not in range 1...65535"))
                    continue
                }
                guard let endpoint = entry.endpoint(port: port) else { continue }
                let dotted = "rooms.\(id).\(key)"
                if let other = taken[endpoint] {
                    out.append((["rooms", id, key], "\(endpoint) is also \(other): each socket needs its own address and port"))
                } else {
                    taken[endpoint] = dotted
                }
            }
            for target in entry.mayCall ?? [] where rooms[target] == nil {
                out.append((["rooms", id, "may_call"], "\(TOMLWrite.string(target)) is not a room in [rooms]"))
            }
        }
    }

    /// The tables come from a site document: shared by every terminal, this one included.
    var ofSite: Bool { !site.id.isEmpty }

    /// Whether `caller` may call `callee` by the directory's may_call lists.
    func permits(_ caller: String, _ callee: String) -> Bool {
        guard rooms.values.contains(where: { $0.mayCall != nil }) else { return true }
        return rooms[caller]?.mayCall?.contains(callee) ?? false
    }

    private func buttonIssues(_ out: inout [PathIssue]) {
        for (name, button) in buttons.sorted(by: { $0.key < $1.key }) {
            if RoomID(name) == nil || name.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) {
                out.append((["buttons", name], "\(TOMLWrite.string(name)) is not a button name (1-32 of a-z, 0-9, - and _, not only digits: keys.map's call:N is button number N)"))
            }
            if CallKind(rawValue: button.kind) == nil {
                let kinds = CallKind.allCases.map(\.rawValue)
                let hint = Spelling.closest(to: button.kind, among: kinds).map { " (did you mean \(TOMLWrite.string($0))?)" } ?? ""
                out.append((["buttons", name, "kind"], "\(TOMLWrite.string(button.kind)) is not a call kind: \(kinds.joined(separator: ", "))" + hint))
            }
            let path = ["buttons", name, "rooms"]
            if button.rooms.isEmpty { out.append((path, "is required: 1...\(SignalCodec.maxParticipants) room ids from [rooms] or group names")) }
            // A group may hold this room: the button calls the others.
            let resolved = resolveRecipients(button.rooms).filter { $0 != room.id }
            // A site's buttons are every terminal's: one that reaches only this room is left out here.
            if !button.rooms.isEmpty, resolved.isEmpty, !ofSite {
                out.append((path, "reaches no room but this one"))
            } else if resolved.count > SignalCodec.maxParticipants {
                out.append((path, "\(resolved.count) rooms; a call has at most \(SignalCodec.maxParticipants)"))
            } else if let me = RoomID(room.id), let size = CallSettings.largestCallMessage(from: me, to: resolved.compactMap(RoomID.init), voice: voiceDelivery),
                      size > SignalCodec.maxDatagramBytes {
                out.append((path, "\(resolved.count) rooms need \(size)-byte call messages; one datagram holds \(SignalCodec.maxDatagramBytes): fewer rooms or shorter room ids"))
            }
            var seen: Set<String> = []
            for entry in button.rooms where !seen.insert(entry).inserted {
                out.append((path, "\(TOMLWrite.string(entry)) is listed twice"))
            }
            for target in button.rooms where groups[target] == nil {
                let quoted = TOMLWrite.string(target)
                if rooms[target] == nil {
                    out.append((path, "\(quoted) is not a room in [rooms] nor a group in [groups]"))
                } else if target == room.id, !ofSite {
                    out.append((path, "\(quoted) is this room"))
                } else if callsEnabled, !ofSite, rooms[room.id] != nil, !permits(room.id, target) {
                    // A site's buttons are every terminal's: here they call only whom this room may.
                    out.append((path, "\(quoted) may not be called from here (rooms.\(room.id).may_call)"))
                }
            }
        }
    }

    private func keyMapIssues(_ out: inout [PathIssue]) {
        keyTableIssues("map", keys.map, &out)
        keyTableIssues("long_map", keys.longMap, &out)
    }

    private func keyTableIssues(_ table: String, _ entries: [String: String], _ out: inout [PathIssue]) {
        // KeyMap.table stops at its first problem; adding one entry at a time (in its order)
        // finds each, worded as the daemon's key reader would.
        var good: [String: String] = [:]
        for (key, action) in entries.sorted(by: { $0.key < $1.key }) {
            var trial = good
            trial[key] = action
            do throws(KeyMapError) {
                _ = try KeyMap.table(trial)
                good = trial
            } catch {
                out.append((["keys", table, key], error.problem))
                continue
            }
            if case .perform(.notify(let id))? = KeyAction(configValue: action), notifications[id] == nil {
                let hint = Spelling.closest(to: id, among: Array(notifications.keys)).map { " (did you mean notify:\($0)?)" } ?? ""
                out.append((["keys", table, key], "\(TOMLWrite.string(action)): there is no [notifications.\(id)]" + hint))
                continue
            }
            guard callsEnabled, let button = KeyAction(configValue: action) else { continue }
            let names = buttons.keys.sorted()
            switch button {
            case .perform(.call(let name)) where buttons[name] == nil:
                out.append((["keys", table, key], "\(TOMLWrite.string(action)): there is no [buttons.\(name)]"))
            case .callButton(let n) where n > names.count:
                out.append((["keys", table, key], "\(TOMLWrite.string(action)): there \(names.count == 1 ? "is 1 button" : "are \(names.count) buttons") (numbered in name order: \(names.joined(separator: ", ")))"))
            default: break
            }
        }
    }

    private func thisRoomIssues(present: Set<String>?, _ out: inout [PathIssue]) {
        guard RoomID(room.id) != nil else {
            out.append((["room", "id"], "\(TOMLWrite.string(room.id)) is not a room id (1-32 of a-z, 0-9, - and _)"))
            return
        }
        guard let me = rooms[room.id] else {
            out.append((["room", "id"], "\(TOMLWrite.string(room.id)) has no [rooms.\(room.id)] entry"))
            return
        }
        if network.listenPort != me.mediaPort, (1...65535).contains(me.mediaPort) {
            let mediaKey = "rooms.\(room.id).media_port"
            let mediaDefault = present.map { !$0.contains(mediaKey) } == true ? ", its default" : ""
            out.append((["network", "listen_port"], "\(network.listenPort) differs from \(mediaKey) (\(me.mediaPort)\(mediaDefault)): with calls on, this room receives media on its media_port; remove listen_port or make them equal"))
        }
        if !network.peers.isEmpty {
            out.append((["network", "peers"], "must be empty with calls on: the calls decide where this room's voice goes"))
        }
        if calls.callerVoice == .multicast, let group = calls.multicastGroup, group.isMulticast {
            // Callees receive the group on their media socket, so its port must be theirs.
            for (id, entry) in rooms.sorted(by: { $0.key < $1.key })
            where id != room.id && permits(room.id, id) && entry.mediaPort != Int(group.port) {
                out.append((["calls", "multicast_group"], "port \(group.port) is not rooms.\(id).media_port (\(entry.mediaPort)): callees receive the group on their media port"))
            }
            // Linux delivers a group's datagrams only to sockets bound to the wildcard (or the group).
            if network.bindAddress != "0.0.0.0" {
                out.append((["network", "bind_address"], "\(TOMLWrite.string(network.bindAddress)) must be \"0.0.0.0\" with calls.caller_voice = \"multicast\": a socket bound to one address does not receive the group"))
            }
        }
    }
}

/// Problem with the address of a room's terminal, or nil.
private func unicastAddressProblem(_ text: String) -> String? {
    if text.isEmpty { return "is required: the IPv4 address of the room's terminal" }
    let a: UInt32
    do { a = try IPv4Endpoint.parseAddress(text) } catch { return "\(TOMLWrite.string(text)) is not an IPv4 address (a.b.c.d): \(error.problem)" }
    if a == 0 || a == .max || a >> 28 == 0xE {
        return "\(TOMLWrite.string(text)) is not the address of a terminal (a unicast address)"
    }
    return nil
}
