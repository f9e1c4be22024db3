import IntercomConfig

/// One setting a change moves at one terminal: its key, as the document names it, and its value
/// before and after as TOML writes it (absent: not set, or the table entry does not exist).
public struct SettingChange: Sendable, Equatable, Codable {
    public var key: String
    public var before: String?
    public var after: String?

    public init(key: String, before: String?, after: String?) {
        self.key = key
        self.before = before
        self.after = after
    }
}

/// What a change does to one room's terminal.
public struct TerminalChange: Sendable, Equatable, Codable {
    public enum Kind: String, Sendable, Codable { case added, removed, changed }
    public var room: String
    public var kind: Kind
    public var settings: [SettingChange]

    public init(room: String, kind: Kind, settings: [SettingChange]) {
        self.room = room
        self.kind = kind
        self.settings = settings
    }
}

/// What a new version of the site document would change, terminal by terminal, before it is
/// signed: the page shows it for approval, the API's dry run answers it. Deterministic, no I/O.
public struct SiteChangePlan: Sendable, Equatable, Codable {
    /// The version the change was made on, and the version it becomes.
    public var baseVersion: UInt64
    public var version: UInt64
    /// The new document's text (what is signed, without the enrolment decisions).
    public var text: String
    /// Only the terminals that change, by room.
    public var terminals: [TerminalChange]

    /// Compares what `held` and `proposed` make of each room's terminal.
    public static func make(held: SiteDocument, version: UInt64, proposed: SiteDocument, text: String) -> SiteChangePlan {
        var terminals: [TerminalChange] = []
        for room in Set(held.rooms.keys).union(proposed.rooms.keys).sorted() {
            let before = held.rooms[room] == nil ? nil : (try? held.settings(room: room)) ?? [:]
            let after = proposed.rooms[room] == nil ? nil : (try? proposed.settings(room: room)) ?? [:]
            let keys = Set((before ?? [:]).keys).union((after ?? [:]).keys).sorted()
            let settings = keys.compactMap { key -> SettingChange? in
                let b = before?[key], a = after?[key]
                return b == a ? nil : SettingChange(key: key, before: b, after: a)
            }
            let kind: TerminalChange.Kind = before == nil ? .added : after == nil ? .removed : .changed
            if kind != .changed || !settings.isEmpty { terminals.append(TerminalChange(room: room, kind: kind, settings: settings)) }
        }
        return SiteChangePlan(baseVersion: version, version: version + 1, text: text, terminals: terminals)
    }
}
