import Calls
import Foundation
import IntercomConfig
import SiteAdmin
import SiteSecurity

/// The site document as the service keeps it: one change at a time, each planned (what it changes
/// at which terminal), then signed as the next version with the administrator's key, recorded for
/// undo and the audit log, and handed to the terminals. The folder is the one `intercom-site`
/// keeps (docs/site.md); its tool and the service may take turns.
public actor SiteEditor {
    public let files: SiteFiles
    private let database: SiteDatabase
    /// How long a terminal may take to answer a handed version (seconds).
    public static let publishTimeout = 2.0
    /// The largest `PUT /site` body: a signed envelope's limit, which a text in JSON cannot exceed
    /// by more than its escapes (a 50-room site is about 40 KB).
    public static let maxText = SignedSiteDocument.maximumBytes

    public init(files: SiteFiles, database: SiteDatabase) {
        self.files = files
        self.database = database
    }

    // MARK: Wire types

    /// The document in force: its text, and what the page shows of it.
    public struct View: Codable, Sendable, Equatable {
        public var site: String
        public var version: UInt64
        public var name: String
        public var rooms: [Room]
        public var buttons: [Button]
        public var groups: [String: [String]]
        public var notifications: [NotificationType]
        /// The keys every terminal shares (`[keys.map]`: key → action); a kind's or a terminal's own come on top.
        public var keys: [String: String]
        /// The document's text as signed, without the enrolment decisions (approve and revoke keep those).
        public var text: String

        public struct Room: Codable, Sendable, Equatable { public var id: String; public var name: String }
        public struct Button: Codable, Sendable, Equatable { public var id: String; public var label: String; public var rooms: [String]; public var kind: String }
        public struct NotificationType: Codable, Sendable, Equatable {
            public var id: String
            public var label: String
            public var recipients: [String]
            public var text: String
            public var tone: String
            public var priority: String
        }
    }
    /// A whole new text, made on `version` (`PUT /site`).
    public struct NewText: Codable, Sendable { public var version: UInt64; public var text: String }
    /// Edits made on `version` (`PATCH /site`).
    public struct Edits: Codable, Sendable { public var version: UInt64; public var edits: [SiteEdit] }
    /// What a change did or, in a dry run, would do.
    public struct Outcome: Codable, Sendable, Equatable {
        public var plan: SiteChangePlan
        /// False in a dry run.
        public var applied: Bool
        /// What each terminal said when handed the new version (empty in a dry run).
        public var published: [PublishOutcome]
    }

    // MARK: Reading

    private struct Held {
        var site: String
        var signed: SignedSiteDocument
        var document: SiteDocument
        var text: String
    }

    private func held() throws -> Held {
        guard FileManager.default.fileExists(atPath: files.signed) else {
            throw Problem.notFound("no site document yet: `intercom-site create --dir \(files.dir)` makes the first")
        }
        let signed: SignedSiteDocument?
        do { signed = try files.readSigned(verifier: files.signingKey().verifier) } catch {
            throw Problem(.serviceUnavailable, "no-site", "The site folder cannot be read", detail: error.description)
        }
        guard let signed else {
            throw Problem.notFound("no site document yet: `intercom-site create --dir \(files.dir)` makes the first")
        }
        let body = String(decoding: signed.body, as: UTF8.self)
        let document: SiteDocument
        do { document = try SiteDocument.parse(body, source: files.signed) } catch {
            throw Problem(.serviceUnavailable, "no-site", "The signed document does not read", detail: "\(error)")
        }
        // site.toml as signed keeps its comments; otherwise the signed document written out.
        var text: String
        if let own = try? SiteFiles.text(of: files.document), (try? files.documentText(siteText: own)) == body {
            text = own
        } else {
            var withoutEnrolment = document
            withoutEnrolment.enrolment = SiteEnrolment()
            text = withoutEnrolment.rendered()
        }
        return Held(site: signed.site, signed: signed, document: document, text: text)
    }

    public func view() throws -> View {
        let h = try held()
        let shared = h.document.sharedSettings
        return View(site: h.site, version: h.signed.version, name: h.document.name,
                    rooms: shared.rooms.sorted { $0.key < $1.key }.map { View.Room(id: $0.key, name: $0.value.name.isEmpty ? $0.key : $0.value.name) },
                    buttons: shared.buttons.sorted { $0.key < $1.key }.map { View.Button(id: $0.key, label: $0.value.label, rooms: $0.value.rooms, kind: $0.value.kind) },
                    groups: shared.groups,
                    notifications: shared.notifications.sorted { $0.key < $1.key }.map { id, n in
                        View.NotificationType(id: id, label: n.label.isEmpty ? id : n.label, recipients: n.recipients, text: n.text, tone: n.tone, priority: n.priority)
                    },
                    keys: shared.keys.map, text: h.text)
    }

    public func versions(limit: Int) throws -> [SiteVersion] {
        try recordFound(try held())
        return try database.siteVersions(limit: limit)
    }

    /// Notes the version in force when the service has not seen it (signed by the tool).
    private func recordFound(_ h: Held) throws {
        guard try database.siteText(version: h.signed.version) == nil else { return }
        try database.recordSiteVersion(SiteVersion(version: h.signed.version, at: Date().timeIntervalSince1970, actor: "intercom-site",
                                                   action: "site.found"),
                                       text: h.text, detail: "version \(h.signed.version), signed outside the service")
    }

    // MARK: Changing

    /// Plans a new text made on version `base`; unless `dryRun`, signs it as the next version,
    /// records it and hands it to every room's terminal.
    public func change(base: UInt64?, text: String, dryRun: Bool, actor: String, action: String, field: String = "text") async throws -> Outcome {
        let h = try held()
        if let base, base != h.signed.version {
            throw Problem(.conflict, "stale-version", "The document changed meanwhile",
                          detail: "made on version \(base), but version \(h.signed.version) is in force: reload and make the change again",
                          field: "version")
        }
        if let own = try? SiteDocument.parse(text, source: "the new document"), own.enrolment != SiteEnrolment() {
            throw Problem.badInput(field, "[enrolment] is kept by approving and revoking terminals, not in the document's text")
        }
        let proposed: SiteDocument
        do {
            proposed = try SiteDocument.parse(try files.documentText(siteText: text), source: "the new document")
        } catch let error as ConfigError {
            throw Self.invalid(error, field: field)
        } catch {
            throw Problem(.serviceUnavailable, "no-site", "The site folder cannot be read", detail: "\(error)")
        }
        let plan = SiteChangePlan.make(held: h.document, version: h.signed.version, proposed: proposed, text: text)
        if dryRun { return Outcome(plan: plan, applied: false, published: []) }

        try recordFound(h)
        let signed: SignedSiteDocument
        do {
            signed = try files.sign(site: h.site, key: files.signingKey(), previous: h.signed, siteText: text)
        } catch {
            throw Problem(.internalServerError, "not-signed", "The new version was not signed", detail: error.description)
        }
        let changed = plan.terminals.map(\.room)
        try database.recordSiteVersion(SiteVersion(version: signed.version, at: Date().timeIntervalSince1970, actor: actor, action: action),
                                       text: text,
                                       detail: "version \(signed.version); terminals changed: \(changed.isEmpty ? "none" : changed.joined(separator: ", "))")
        let published = await Self.publish(signed, to: (try? TerminalAddress.all(in: proposed)) ?? [])
        return Outcome(plan: plan, applied: true, published: published)
    }

    /// `change` with `edits` applied to the text in force.
    public func edit(base: UInt64, edits: [SiteEdit], dryRun: Bool, actor: String) async throws -> Outcome {
        let h = try held()
        if let n = edits.firstIndex(where: { $0.path.first == "enrolment" }) {
            throw Problem.badInput("edits.\(n).path", "[enrolment] is kept by approving and revoking terminals")
        }
        let text: String
        do { text = try SiteDocument.edited(h.text, edits, source: "the edited document").text } catch let error as ConfigError {
            throw Self.invalid(error, field: "edits")
        }
        return try await change(base: base, text: text, dryRun: dryRun, actor: actor, action: "site.edit", field: "edits")
    }

    /// Makes the text of `version` the next version: undo.
    public func restore(version: UInt64, dryRun: Bool, actor: String) async throws -> Outcome {
        try recordFound(try held())
        guard let text = try database.siteText(version: version) else { throw Problem.notFound("the service does not know version \(version)") }
        return try await change(base: nil, text: text, dryRun: dryRun, actor: actor, action: "site.restore")
    }

    /// Hands `signed` to every terminal at once; each answers within `publishTimeout`. Blocking
    /// exchanges run on Dispatch's threads, never on the server's.
    private static func publish(_ signed: SignedSiteDocument, to terminals: [TerminalAddress]) async -> [PublishOutcome] {
        let bytes = signed.encoded()
        return await withTaskGroup(of: PublishOutcome.self) { group in
            for terminal in terminals {
                group.addTask {
                    await withCheckedContinuation { done in
                        DispatchQueue.global().async {
                            done.resume(returning: PublishOutcome.offer(bytes, site: signed.site, to: terminal, timeout: publishTimeout))
                        }
                    }
                }
            }
            var outcomes: [PublishOutcome] = []
            for await outcome in group { outcomes.append(outcome) }
            return outcomes.sorted { $0.room < $1.room }
        }
    }

    /// The problem for a document with problems: each names its key (and line).
    private static func invalid(_ error: ConfigError, field: String) -> Problem {
        let items = error.issues.map { ProblemItem(key: $0.key, problem: $0.problem, line: $0.line) }
        let first = items.first.map { "\($0.key.isEmpty ? "" : $0.key + ": ")\($0.problem)" } ?? "not a site document"
        return Problem(.unprocessableContent, "invalid-site-document", "The site document has problems",
                       detail: items.count == 1 ? first : "\(first) (and \(items.count - 1) more)", field: field, errors: items)
    }
}
