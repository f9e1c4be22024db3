import TOMLKit

// A site document written out (the administrator's tool signs the text), and one made from the
// per-terminal files a practice ran on before sites: deterministic, no I/O.

extension SiteDocument {
    /// The document as TOML: `[site]`, the tables, the shared keys, each kind's, each terminal's.
    /// `SiteDocument.parse(rendered())` gives back `self`.
    public func rendered() -> String {
        var out = "# Site document (docs/site.md): signed by `intercom-site sign`, applied by every terminal.\n"
        out += "\n[site]\nname = \(TOMLWrite.string(name))\n"
        out += shared.config.renderedTables()
        out += Self.renderedKeys(of: shared, under: [])
        for (kind, layer) in kinds.sorted(by: { $0.key < $1.key }) {
            let keys = Self.renderedKeys(of: layer, under: ["kinds", kind])
            out += keys.isEmpty ? "\n[kinds.\(TOMLWrite.key(kind))]\n" : keys
        }
        for (room, terminal) in terminals.sorted(by: { $0.key < $1.key }) {
            out += "\n[terminals.\(TOMLWrite.key(room))]\n"
            if let kind = terminal.kind { out += "kind = \(TOMLWrite.string(kind))\n" }
            out += Self.renderedKeys(of: terminal.layer, under: ["terminals", room])
        }
        if enrolment != SiteEnrolment() { out += enrolment.rendered() }
        return out
    }

    /// The keys a layer set, section by section in schema order.
    private static func renderedKeys(of layer: Layer, under path: [String]) -> String {
        var out = ""
        for section in DaemonConfig.sections {
            let keys = section.keys.filter { layer.present.contains("\(section.name).\($0.name)") }
            guard !keys.isEmpty else { continue }
            out += "\n[" + (path + [section.name]).map(TOMLWrite.key).joined(separator: ".") + "]\n"
            for key in keys { out += "\(key.name) = \(key.render(layer.config))\n" }
        }
        return out
    }

    /// One document from the files each terminal had (a full configuration each, `[room] id` set):
    /// the tables merged, each site key at the value most terminals had (the first file's on a tie),
    /// the others kept as that terminal's own entry. `report` says what differed: a table entry
    /// two files disagree on (the most common version is kept), and each terminal's own values.
    public static func converting(_ files: [(source: String, config: DaemonConfig)]) -> (document: SiteDocument, report: [String]) {
        var document = SiteDocument()
        var report: [String] = []
        guard !files.isEmpty else { return (document, ["no files given"]) }

        func merge<Entry: Equatable>(_ table: String, _ entries: (DaemonConfig) -> [String: Entry]) -> [String: Entry] {
            var ids: [String] = []
            for file in files { for id in entries(file.config).keys.sorted() where !ids.contains(id) { ids.append(id) } }
            var merged: [String: Entry] = [:]
            for id in ids {
                let versions = files.compactMap { file in entries(file.config)[id].map { (file.source, $0) } }
                let kept = mostCommon(versions.map { $0.1 })
                merged[id] = kept
                let differing = versions.filter { $0.1 != kept }.map(\.0)
                if !differing.isEmpty {
                    let agreeing = versions.filter { $0.1 == kept }.map(\.0)
                    report.append("\(table).\(id): \(differing.joined(separator: ", ")) disagree with \(agreeing.joined(separator: ", ")); kept the version of \(agreeing.joined(separator: ", "))")
                }
            }
            return merged
        }
        document.shared.config.rooms = merge("rooms") { $0.rooms }
        document.shared.config.buttons = merge("buttons") { $0.buttons }
        document.shared.config.notifications = merge("notifications") { $0.notifications }
        document.shared.config.groups = merge("groups") { $0.groups }
        for file in files where file.config.room.id.isEmpty {
            report.append("\(file.source): has no [room] id; its site settings count, but no terminal entry is made for it")
        }

        for section in DaemonConfig.sections {
            for key in section.keys where DaemonConfig.isSiteWide(section.name, key.name) {
                let values = files.map { key.render($0.config) }
                let kept = mostCommon(values)
                guard let keeper = files.first(where: { key.render($0.config) == kept }) else { continue }
                let dotted = "\(section.name).\(key.name)"
                if kept != key.render(.default) {
                    key.adopt(&document.shared.config, keeper.config)
                    document.shared.present.insert(dotted)
                }
                for file in files where key.render(file.config) != kept && !file.config.room.id.isEmpty {
                    let room = file.config.room.id
                    var terminal = document.terminals[room] ?? Terminal(kind: nil, layer: Layer())
                    key.adopt(&terminal.layer.config, file.config)
                    terminal.layer.present.insert(dotted)
                    document.terminals[room] = terminal
                    report.append("\(dotted): \(file.source) (room \(room)) has \(key.render(file.config)), most have \(kept); kept as [terminals.\(room).\(section.name)]")
                }
            }
        }
        return (document, report)
    }

    /// The value most often in `values`; on a tie, the one that comes first.
    private static func mostCommon<Value: Equatable>(_ values: [Value]) -> Value {
        var best = values[0], bestCount = 0
        for value in values {
            let count = values.count(where: { $0 == value })
            if count > bestCount { best = value; bestCount = count }
        }
        return best
    }
}
