import TOMLKit

// A terminal of a site: its file keeps what belongs to the box (devices, its room, paths) and
// says where its site comes from; everything the terminals share comes in the signed site
// document (SiteDocument.swift, docs/site.md). Which keys are the site's is written here, once.

/// `[site]`: where this terminal's site document comes from.
public struct SiteSection: Sendable, Equatable {
    /// The site's id; "" = no site: this file holds the whole configuration, as before sites.
    public var id: String = ""
    /// The administrator's public key file: the only key a site document is accepted under.
    public var administratorKey: String = "/etc/intercomd/administrator.pub"
    /// Where the last good site document is kept (written atomically).
    public var document: String = "/var/lib/intercomd/site.json"
    /// This terminal's own key (docs/identity.md): made on its first start, mode 0600.
    public var identityKey: String = "/var/lib/intercomd/terminal.key"

    public init() {}

    /// Site ids are written where room ids are: 1-64 of a-z, 0-9, - and _.
    public static func idProblem(_ id: String) -> String? {
        let ok = (1...64).contains(id.utf8.count)
            && id.utf8.allSatisfy { ($0 >= 97 && $0 <= 122) || ($0 >= 48 && $0 <= 57) || $0 == 45 || $0 == 95 }
        return ok ? nil : "\(TOMLWrite.string(id)) is not a site id (1-64 of a-z, 0-9, - and _)"
    }
}

extension DaemonConfig {
    /// The keys a site document sets, for every terminal, a kind of terminal, or one terminal;
    /// `nil` = every key of the section. The rooms, buttons, groups and notification types are the
    /// site's too. Everything else belongs to the box.
    static let siteWideKeys: [String: Set<String>?] = [
        "calls": ["auto_answer", "ring_ms", "answer_timeout_ms", "do_not_disturb", "caller_voice", "multicast_group",
                  "history_limit", "history_max_age_days", "missed_reminder_s", "notification_reminder_s", "read_aloud"],
        "keys": ["debounce_ms", "long_press_ms", "map", "long_map"],
        "lights": ["map"],
        "tones": nil,
        "speech": nil,
    ]

    /// Whether the site document sets `section.key` (`key` nil: the whole table, e.g. rooms).
    static func isSiteWide(_ section: String, _ key: String?) -> Bool {
        if tableOfTablesNames.contains(section) { return true }
        guard let keys = siteWideKeys[section] else { return false }
        guard let key else { return true }
        return keys.map { $0.contains(key) } ?? true
    }

    static let siteSection = SchemaSection(name: "site", comment: "The site this terminal belongs to (docs/site.md). With id set, the rooms, buttons, groups, notification types and the shared call, key, light, tone and speech settings come from the site document the administrator signed; this file keeps only the terminal's own settings.", keys: [
        .string("id", \.site.id, "The site's id, as the administrator created it; \"\" = no site: this file holds the whole configuration",
                Rule(allowed: "\"\" or 1-64 of a-z, 0-9, - and _") { $0.isEmpty ? nil : SiteSection.idProblem($0) }),
        .string("administrator_key", \.site.administratorKey, "The administrator's public key file (intercom-site creates it): a site document is applied only when this key signed it. Not secret, but writable by root only"),
        .string("document", \.site.document, "Where the last good site document is kept, so that the terminal starts with it"),
        .string("identity_key", \.site.identityKey, "This terminal's own key (docs/identity.md), made on its first start with mode 0600 and never sent: the site document approves the terminal by its public half. Keep it with the box; a new key needs a new approval"),
    ])
}
