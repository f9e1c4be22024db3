import TOMLKit

/// The body of a site document (docs/site.md): the practice's rooms, buttons, groups and
/// notification types, and the settings its terminals share: for all of them (the top sections),
/// by kind of terminal (`[kinds.<kind>.<section>]`), and for one terminal
/// (`[terminals.<room>]`: its `kind` and its own `[terminals.<room>.<section>]`), each later
/// layer over the one before. Only site keys (`DaemonConfig.isSiteWide`) may appear; a terminal's
/// own settings stay in its file. Read and checked once, for every room, before a terminal uses it.
public struct SiteDocument: Sendable, Equatable {
    /// What one layer of the document sets: the values, and which keys it set.
    struct Layer: Sendable, Equatable {
        var config = DaemonConfig()
        var present: Set<String> = []

        func apply(to target: inout DaemonConfig, present targetPresent: inout Set<String>) {
            for section in DaemonConfig.sections {
                for key in section.keys where present.contains("\(section.name).\(key.name)") {
                    key.adopt(&target, config)
                    targetPresent.insert("\(section.name).\(key.name)")
                }
            }
        }
    }

    struct Terminal: Sendable, Equatable {
        var kind: String?
        var layer: Layer
    }

    /// The practice's name, for people (`[site] name`).
    public var name: String = ""
    var shared = Layer()
    var kinds: [String: Layer] = [:]
    var terminals: [String: Terminal] = [:]
    /// Which terminal each room has, and the keys revoked (`[enrolment]`, docs/identity.md).
    public var enrolment = SiteEnrolment()

    /// A document with only `rooms` (a new site's first).
    public init(name: String = "", rooms: [String: RoomEntry] = [:]) {
        self.name = name
        shared.config.rooms = rooms
    }

    /// The rooms of the site, by id.
    public var rooms: [String: RoomEntry] { shared.config.rooms }
    /// What the document sets for every terminal: its tables (rooms, buttons, groups, notification
    /// types) and the shared keys (each kind's and terminal's own come on top, `configuration`).
    public var sharedSettings: DaemonConfig { shared.config }
    /// The kinds of terminal the document names.
    public var kindNames: [String] { kinds.keys.sorted() }

    /// Whether `text` has an `[enrolment]` table (the service keeps it out of texts it is sent:
    /// approvals are made by approving). False for a text that is not TOML: parsing says why.
    public static func holdsEnrolment(_ text: String) -> Bool {
        (try? DaemonConfig.tomlRoot(text, source: "").0)?.contains(key: "enrolment") ?? false
    }

    /// Reads a document's text and checks it for every room it lists.
    /// - Throws: `ConfigError` naming each problem's key (`kinds.wall.keys.map.KEY_F1`), and for
    ///   problems that show only once a room's layers are joined, the room.
    /// - Parameter checking: the rooms whose joined settings must hold (nil: every room's, as the
    ///   administrator's tool checks before signing). A terminal checks its own: each room's check
    ///   builds that room's whole configuration, and every room at every terminal grows with the
    ///   square of the site (50 rooms: 50 ms per terminal, 50 terminals at once on one machine
    ///   took 1.7 s). Another room's terminal refuses what does not hold for it.
    public static func parse(_ text: String, source: String = "<site document>", checking: [String]? = nil) throws -> SiteDocument {
        let (root, locator) = try DaemonConfig.tomlRoot(text, source: source)
        var issues: [ConfigIssue] = []
        func report(_ path: [String], _ problem: String) {
            issues.append(ConfigIssue(key: path.joined(separator: "."), problem: problem, line: locator.line(of: path)))
        }
        let ownSetting = "is the terminal's own setting (its file), not the site's"
        var document = SiteDocument()

        if let site = root["site"] {
            if let fields = site.table {
                for (key, value) in fields {
                    guard key == "name" else { report(["site", key], "unknown key (a site document's [site] has only name)"); continue }
                    do throws(ValueProblem) { document.name = try TOMLRead.string(value) } catch { report(["site", key], error.text) }
                }
            } else {
                report(["site"], "expected a table ([site] with name), got \(TOMLRead.describe(site))")
            }
        }
        DaemonConfig.readSections(root, at: [], skipping: ["site", "kinds", "terminals", "enrolment"], into: &document.shared.config,
                                  present: &document.shared.present, report: report) { section, key in
            DaemonConfig.isSiteWide(section, key) ? nil : ownSetting
        }

        func readLayer(_ value: TOMLValueConvertible, at path: [String], skipping: Set<String> = []) -> Layer {
            var layer = Layer()
            guard let table = value.table else {
                report(path, "expected a table of sections, got \(TOMLRead.describe(value))")
                return layer
            }
            DaemonConfig.readSections(table, at: path, skipping: skipping, into: &layer.config, present: &layer.present,
                                      report: report) { section, key in
                if key == nil { return "is the whole site's: set it at the top of the document" }
                return DaemonConfig.isSiteWide(section, key) ? nil : ownSetting
            }
            return layer
        }
        if let kinds = root["kinds"] {
            if let table = kinds.table {
                for (kind, value) in table {
                    if let problem = Self.nameProblem(kind) { report(["kinds", kind], problem) }
                    document.kinds[kind] = readLayer(value, at: ["kinds", kind])
                }
            } else {
                report(["kinds"], "expected one table per kind of terminal ([kinds.<kind>.<section>]), got \(TOMLRead.describe(kinds))")
            }
        }
        if let terminals = root["terminals"] {
            if let table = terminals.table {
                for (room, value) in table {
                    var kind: String?
                    if let kindValue = value.table?["kind"] {
                        do throws(ValueProblem) { kind = try TOMLRead.string(kindValue) } catch { report(["terminals", room, "kind"], error.text) }
                    }
                    if let kind, document.kinds[kind] == nil {
                        let hint = Spelling.closest(to: kind, among: Array(document.kinds.keys)).map { " (did you mean \(TOMLWrite.string($0))?)" } ?? ""
                        report(["terminals", room, "kind"], "\(TOMLWrite.string(kind)) names no [kinds.\(kind)]" + hint)
                    }
                    if document.shared.config.rooms[room] == nil {
                        report(["terminals", room], "\(TOMLWrite.string(room)) is not a room in [rooms]")
                    }
                    document.terminals[room] = Terminal(kind: kind, layer: readLayer(value, at: ["terminals", room], skipping: ["kind"]))
                }
            } else {
                report(["terminals"], "expected one table per room's terminal ([terminals.<room>]), got \(TOMLRead.describe(terminals))")
            }
        }
        if let enrolment = root["enrolment"] {
            document.enrolment = SiteEnrolment.read(enrolment, rooms: Set(document.rooms.keys), report: report)
        }
        if document.rooms.isEmpty { report(["rooms"], "is required: a site has at least one room") }
        try DaemonConfig.throwIfAny(issues, source: source)

        // Each room's terminal, with a file of defaults: what the site alone decides must hold.
        for room in document.rooms.keys.sorted() where checking?.contains(room) ?? true {
            do {
                var local = DaemonConfig()
                local.site.id = "check"
                local.room.id = room
                _ = try document.configuration(local: local, localPresent: ["room.id"], source: "room \(room)")
            } catch let error as ConfigError {
                issues += error.issues.map { ConfigIssue(key: $0.key, problem: "for room \(room): \($0.problem)", line: locator.line(of: $0.key.split(separator: ".").map(String.init))) }
            }
        }
        try DaemonConfig.throwIfAny(issues, source: source)
        return document
    }

    /// The configuration a terminal runs by: its file's own settings, then the site's shared
    /// settings and tables, its kind's, and its own entry's.
    /// - Throws: `ConfigError` (source `source`) when the joined settings break a rule.
    public func configuration(local: DaemonConfig, localPresent: Set<String>, source: String) throws -> DaemonConfig {
        var config = local
        var present = localPresent.filter { key in
            let parts = key.split(separator: ".", maxSplits: 1).map(String.init)
            return !DaemonConfig.isSiteWide(parts[0], parts.count > 1 ? parts[1] : nil)
        }
        shared.apply(to: &config, present: &present)
        config.rooms = shared.config.rooms
        config.buttons = shared.config.buttons
        config.groups = shared.config.groups
        config.notifications = shared.config.notifications
        present.formUnion(shared.present.filter { key in DaemonConfig.tableOfTablesNames.contains { key.hasPrefix($0 + ".") } })
        let terminal = terminals[local.room.id]
        if let kind = terminal?.kind, let layer = kinds[kind] { layer.apply(to: &config, present: &present) }
        terminal?.layer.apply(to: &config, present: &present)

        config.applyCallDefaults(present: present)
        let issues = config.ruleIssues(present: present).map {
            ConfigIssue(key: $0.path.joined(separator: "."), problem: $0.problem)
        }
        try DaemonConfig.throwIfAny(issues, source: source)
        return config
    }

    private static func nameProblem(_ name: String) -> String? {
        SiteSection.idProblem(name).map { _ in "\(TOMLWrite.string(name)) is not a kind name (1-64 of a-z, 0-9, - and _)" }
    }
}

extension DaemonConfig {
    /// A terminal's file, with the keys it set (to join it with its site document).
    public static func loadTerminalFile(path: String) throws -> (config: DaemonConfig, present: Set<String>) {
        try readTerminalFile(readTextFile(path), source: path)
    }

    /// `parse` that also says which keys the text set.
    public static func parseTerminalFile(_ text: String, source: String = "<config>") throws -> (config: DaemonConfig, present: Set<String>) {
        try readTerminalFile(text, source: source)
    }
}
