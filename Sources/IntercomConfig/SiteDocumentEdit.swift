import TOMLKit

// Changes to a site document made by the page and the API: a list of edits, each setting or
// removing one value at a path, applied to the document's text; and what a document makes of each
// room's terminal, so that a change can say what it changes where. Deterministic, no I/O.

/// A value in a site document, as the API carries it in JSON: a string, an integer, a number, a
/// boolean, a list or a table. The one wire type for a value of an edit.
public enum SettingValue: Sendable, Equatable, Codable {
    case string(String)
    case integer(Int)
    case number(Double)
    case boolean(Bool)
    case list([SettingValue])
    case table([String: SettingValue])

    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if let b = try? c.decode(Bool.self) { self = .boolean(b) }
        else if let i = try? c.decode(Int.self) { self = .integer(i) }
        else if let d = try? c.decode(Double.self) { self = .number(d) }
        else if let s = try? c.decode(String.self) { self = .string(s) }
        else if let l = try? c.decode([SettingValue].self) { self = .list(l) }
        else if let t = try? c.decode([String: SettingValue].self) { self = .table(t) }
        else {
            throw DecodingError.dataCorruptedError(in: c, debugDescription: "expected a string, number, boolean, list or table")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .string(let s): try c.encode(s)
        case .integer(let i): try c.encode(i)
        case .number(let d): try c.encode(d)
        case .boolean(let b): try c.encode(b)
        case .list(let l): try c.encode(l)
        case .table(let t): try c.encode(t)
        }
    }
}

/// One change to a site document: the value at `path` (e.g. `["notifications", "naechster"]`
/// or `["keys", "map", "KEY_F3"]`) set to `value`, or removed when `value` is absent.
public struct SiteEdit: Sendable, Equatable, Codable {
    public var path: [String]
    public var value: SettingValue?

    public init(path: [String], value: SettingValue?) {
        self.path = path
        self.value = value
    }
}

/// The layer of a site document a terminal's setting comes from (`SiteDocument.source`).
public enum SettingSource: String, Sendable, Codable {
    case site, kind, terminal
}

extension SiteDocument {
    /// `text` with `edits` applied in order, written out as `rendered()` writes a document
    /// (comments are not kept). The result is checked for every room.
    /// - Throws: `ConfigError`: for an edit that cannot apply, the key `edits.<n>`; for a
    ///   document that does not hold afterwards, each problem's key.
    public static func edited(_ text: String, _ edits: [SiteEdit], source: String = "<site document>") throws -> (text: String, document: SiteDocument) {
        let (root, _) = try DaemonConfig.tomlRoot(text, source: source)
        var tree: [String: SettingValue]
        do throws(ValueProblem) { tree = try Self.tree(of: root) } catch {
            throw ConfigError(source: source, issues: [ConfigIssue(key: "", problem: error.text)])
        }
        for (n, edit) in edits.enumerated() {
            if let problem = Self.apply(edit, to: &tree) {
                throw ConfigError(source: source, issues: [ConfigIssue(key: "edits.\(n)", problem: problem)])
            }
        }
        let document = try SiteDocument.parse(Self.toml(tree), source: source)
        return (document.rendered(), document)
    }

    /// What this document makes of the terminal in `room`: each site key and each table entry's
    /// key (`notifications.naechster.text`), dotted, with its value as TOML writes it.
    /// - Throws: `ConfigError` when the room's joined settings break a rule.
    public func settings(room: String) throws -> [String: String] {
        let config = try configuration(room: room)
        var out: [String: String] = [:]
        for section in DaemonConfig.sections {
            for key in section.keys where !DaemonConfig.tableOfTablesNames.contains(section.name) && DaemonConfig.isSiteWide(section.name, key.name) {
                out["\(section.name).\(key.name)"] = key.render(config)
            }
        }
        // The tables as rendered: `[notifications.x]` then `key = value` lines; comments skipped.
        var header = ""
        for line in config.renderedTables().split(separator: "\n") where !line.hasPrefix("#") {
            if line.hasPrefix("[") {
                header = String(line.dropFirst().dropLast())
            } else if let eq = line.range(of: " = ") {
                out[header + "." + line[..<eq.lowerBound]] = String(line[eq.upperBound...])
            }
        }
        return out
    }

    /// The site's settings as the terminal in `room` runs by them: shared, its kind's, its own.
    /// - Throws: `ConfigError` when the room's joined settings break a rule.
    public func configuration(room: String) throws -> DaemonConfig {
        var local = DaemonConfig()
        local.site.id = "check"
        local.room.id = room
        return try configuration(local: local, localPresent: ["room.id"], source: "room \(room)")
    }

    /// Which layer gives the terminal in `room` its `key` (dotted, `keys.map`): the site's shared
    /// settings, its kind's, or its own entry's (`[terminals.<room>.keys] map`).
    public func source(of key: String, room: String) -> SettingSource {
        let terminal = terminals[room]
        if terminal?.layer.present.contains(key) == true { return .terminal }
        if let kind = terminal?.kind, kinds[kind]?.present.contains(key) == true { return .kind }
        return .site
    }

    // MARK: The document as a tree of values

    private static func tree(of table: TOMLTable) throws(ValueProblem) -> [String: SettingValue] {
        var out: [String: SettingValue] = [:]
        for (key, value) in table { out[key] = try Self.value(of: value) }
        return out
    }

    private static func value(of value: TOMLValueConvertible) throws(ValueProblem) -> SettingValue {
        switch value.type {
        case .string: return .string(value.string ?? "")
        case .int: return .integer(value.int ?? 0)
        case .double: return .number(value.double ?? 0)
        case .bool: return .boolean(value.bool ?? false)
        case .table: return .table(try tree(of: value.table ?? TOMLTable()))
        case .array:
            var items: [SettingValue] = []
            for item in value.array ?? TOMLArray() { items.append(try Self.value(of: item)) }
            return .list(items)
        case .date, .time, .dateTime: throw ValueProblem("dates and times have no place in a site document")
        }
    }

    /// Sets or removes one value; the problem when the path does not lead to a place.
    private static func apply(_ edit: SiteEdit, to tree: inout [String: SettingValue], depth: Int = 0) -> String? {
        guard !edit.path.isEmpty else { return "path is empty" }
        guard edit.path.allSatisfy({ !$0.isEmpty }) else { return "path has an empty name" }
        let name = edit.path[depth]
        if depth == edit.path.count - 1 {
            tree[name] = edit.value
            return nil
        }
        var inner: [String: SettingValue]
        switch tree[name] {
        case nil:
            guard edit.value != nil else { return nil }  // removing what is not there: nothing to do
            inner = [:]
        case .table(let t): inner = t
        case .some: return "\(edit.path[...depth].joined(separator: ".")) is a value, not a table"
        }
        if let problem = apply(edit, to: &inner, depth: depth + 1) { return problem }
        tree[name] = .table(inner)
        return nil
    }

    /// The tree as TOML text: each table's values, then its tables under their own headers.
    private static func toml(_ tree: [String: SettingValue], path: [String] = []) -> String {
        var out = ""
        let sorted = tree.sorted { $0.key < $1.key }
        for (key, value) in sorted {
            if case .table = value { continue }
            out += "\(TOMLWrite.key(key)) = \(inline(value))\n"
        }
        for (key, value) in sorted {
            guard case .table(let inner) = value else { continue }
            let here = path + [key]
            out += "\n[" + here.map(TOMLWrite.key).joined(separator: ".") + "]\n" + toml(inner, path: here)
        }
        return out
    }

    private static func inline(_ value: SettingValue) -> String {
        switch value {
        case .string(let s): TOMLWrite.string(s)
        case .integer(let i): String(i)
        case .number(let d): "\(d)"  // Swift writes 1.0, 1e+20, inf and nan as TOML does
        case .boolean(let b): String(b)
        case .list(let l): "[" + l.map(inline).joined(separator: ", ") + "]"
        case .table(let t): "{ " + t.sorted { $0.key < $1.key }.map { "\(TOMLWrite.key($0.key)) = \(inline($0.value))" }.joined(separator: ", ") + " }"
        }
    }
}
