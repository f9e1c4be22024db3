import Calls
import Control
import Foundation
import IntercomConfig
import Lights
import Site
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
        /// The lights every terminal shares (`[lights.map]`: state → LED and pattern).
        public var lights: [String: Light]
        /// The document's text as signed, without the enrolment decisions (approve and revoke keep those).
        public var text: String

        public struct Room: Codable, Sendable, Equatable {
            public var id: String
            public var name: String
            /// The rooms it may call (`rooms.<id>.may_call`); nil: every room.
            public var mayCall: [String]?
            /// Its terminal's keys and lights as it runs by them, and whose they are: the site's
            /// shared ones, its kind's, or its own (`[terminals.<room>.keys] map`). A layer's map
            /// replaces the one before whole.
            public var keys: [String: String]
            public var keysFrom: SettingSource
            public var lights: [String: Light]
            public var lightsFrom: SettingSource
        }
        /// What shows a state (`[lights.map]`): an LED and its pattern (docs/calls.md).
        public struct Light: Codable, Sendable, Equatable { public var led: String; public var pattern: String }
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

    /// A room's terminal as the page's terminal list shows it: what it said when asked (its key,
    /// the room it was set up for, its software) and what the document makes of its key.
    public struct Terminal: Codable, Sendable, Equatable {
        public var room: String
        public var endpoint: String
        /// Whether it answered; `detail` says why not.
        public var reached: Bool
        public var detail: String?
        /// Its key's fingerprint, as the terminal shows it.
        public var identity: String?
        public var setUpFor: String?
        public var software: String?
        /// What the document makes of its key; nil when it did not answer.
        public var standing: DaemonStatistics.Site.TerminalStanding?
        /// The key the document approves for this room, if any (it may be another box's).
        public var approved: String?
        /// Whether the service's member hears it now (nil: no member, or it did not answer).
        public var online: Bool?
        /// The site document it holds, and whether that is older than the newest one held.
        public var siteVersion: UInt64?
        public var behind: Bool?
        /// When it was last seen online, Unix time (`LastSeen`); nil: never while the service watched.
        public var lastSeen: Double?
        /// How it is doing, as its newest health message to the service's member said; nil: offline or not heard.
        public var health: TerminalHealth?
    }
    /// An approval: the enrolment code read at the terminal (12 digits; spaces and dashes ignored).
    public struct Approval: Codable, Sendable { public var code: String }

    // MARK: Reading

    private struct Held {
        var site: String
        var signed: SignedSiteDocument
        var document: SiteDocument
        var text: String
    }

    /// The last read, with the bytes of the files it came from: a read of unchanged files
    /// parses nothing again (TOMLKit keeps about 1.6 KB of every parse, LebJe/TOMLKit#26, and
    /// `GET /site` is read often).
    private var lastRead: (files: [Data?], held: Held)?

    private func held() throws -> Held {
        let bytes = [files.signed, files.document, files.enrolment].map { FileManager.default.contents(atPath: $0) }
        if let lastRead, lastRead.files == bytes { return lastRead.held }
        let h = try read()
        lastRead = (bytes, h)
        return h
    }

    private func read() throws -> Held {
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

    /// The last view made, for the text it was made of (each room's settings are joined for it).
    private var lastView: (text: String, version: UInt64, view: View)?

    public func view() throws -> View {
        let h = try held()
        if let last = lastView, last.version == h.signed.version, last.text == h.text { return last.view }
        let shared = h.document.sharedSettings
        func lights(_ map: [LightState: LightRule]) -> [String: View.Light] {
            Dictionary(uniqueKeysWithValues: map.map { ($0.key.rawValue, View.Light(led: $0.value.led, pattern: $0.value.pattern.rawValue)) })
        }
        func room(_ id: String, _ entry: RoomEntry) -> View.Room {
            // The document was checked for every room, so joining cannot fail; were it to, the shared settings.
            let joined = (try? h.document.configuration(room: id)) ?? shared
            return View.Room(id: id, name: entry.name.isEmpty ? id : entry.name, mayCall: entry.mayCall,
                             keys: joined.keys.map, keysFrom: h.document.source(of: "keys.map", room: id),
                             lights: lights(joined.lights.map), lightsFrom: h.document.source(of: "lights.map", room: id))
        }
        let view = View(site: h.site, version: h.signed.version, name: h.document.name,
                    rooms: shared.rooms.sorted { $0.key < $1.key }.map { room($0.key, $0.value) },
                    buttons: shared.buttons.sorted { $0.key < $1.key }.map { View.Button(id: $0.key, label: $0.value.label, rooms: $0.value.rooms, kind: $0.value.kind) },
                    groups: shared.groups,
                    notifications: shared.notifications.sorted { $0.key < $1.key }.map { id, n in
                        View.NotificationType(id: id, label: n.label.isEmpty ? id : n.label, recipients: n.recipients, text: n.text, tone: n.tone, priority: n.priority)
                    },
                    keys: shared.keys.map, lights: lights(shared.lights.map), text: h.text)
        lastView = (h.text, h.signed.version, view)
        return view
    }

    /// The site's `[tones]` and `[speech]`: how its terminals sound.
    public func sounds() throws -> (TonesSection, SpeechSection) {
        let shared = try held().document.sharedSettings
        return (shared.tones, shared.speech)
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
        if let base { try Self.check(base: base, inForce: h.signed.version) }
        if SiteDocument.holdsEnrolment(text) {
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

    // MARK: Terminals

    /// Every room's terminal, asked at once.
    public func terminals() async throws -> [Terminal] {
        let h = try held()
        let approved = h.document.enrolment.approved, revoked = h.document.enrolment.revoked
        let addresses = (try? TerminalAddress.all(in: h.document)) ?? []
        return await TerminalAnswer.ask(addresses, site: h.site, timeout: Self.publishTimeout).map { a in
            var t = Terminal(room: a.terminal.name, endpoint: "\(a.terminal.endpoint)", reached: false, standing: nil,
                             approved: approved[a.terminal.name]?.fingerprint)
            switch a.result {
            case .success(let r):
                t.reached = true
                t.identity = r.identity.fingerprint
                t.setUpFor = r.request.room.isEmpty ? nil : r.request.room
                t.software = r.request.software
                t.standing = switch Enrolment.standing(of: r.identity, approved: approved, revoked: revoked) {
                case .pending: .pending
                case .approved: .approved
                case .revoked: .revoked
                }
            case .failure(let why): t.detail = why.description
            }
            return t
        }
    }

    /// Gives `room`'s terminal the administrator's order `action`, signed here with the site's key
    /// (`SiteOrder`: for that room, fresh, once), and returns its answer in the control socket's words.
    public func order(_ action: SiteOrder.Action, room: String) async throws -> ControlReply {
        let h = try held()
        guard let address = ((try? TerminalAddress.all(in: h.document)) ?? []).first(where: { $0.name == room }) else {
            throw Problem.notFound("no room \(room)")
        }
        let key: AdministratorKey
        do { key = try files.signingKey() } catch {
            throw Problem(.internalServerError, "no-key", "The site's key cannot be read", detail: error.description)
        }
        let signed = SignedSiteOrder.sign(SiteOrder(site: h.site, room: room, action: action, issuedAt: Date().timeIntervalSince1970), with: key)
        let site = h.site, timeout = Self.publishTimeout
        let answer = await onDispatchThread { SiteTransfer.exchange(.order(site: site, signed: signed), with: address.endpoint, timeout: timeout) }
        let command: ControlCommand = action == .loopback ? .loopback(insertMs: 0) : .loopbackResult
        switch answer {
        case .failure(let error):
            // The terminal's state, not the service's fault: switched off, or not on the network.
            throw Problem(.conflict, "terminal-unreachable", "The terminal does not answer", detail: "\(room): \(error)")
        case .success(.orderDone(let bytes)):
            let response: ControlResponse
            do { response = try ControlResponse.read(bytes, to: .command(command)) } catch {
                throw Problem(.badGateway, "terminal-answer", "The terminal's answer is not understood", detail: "\(room): \(error)")
            }
            switch response.outcome {
            case .success(let reply): return reply
            case .failure(let refusal): throw Problem(refusal)
            }
        case .success(.refused(let why)):
            throw Problem(.conflict, "order-refused", "The terminal refused the order", detail: "\(room): \(why)")
        case .success(let other):
            throw Problem(.badGateway, "terminal-answer", "The terminal's answer is not understood", detail: "\(room): \(other)")
        }
    }

    /// The site's history: every room's terminal asked at once for its own (an order each, its
    /// reply sealed to a key made for that order alone), made one (`SiteHistory`).
    public func siteHistory(limit: Int) async throws -> SiteHistory {
        let h = try held()
        let key: AdministratorKey
        do { key = try files.signingKey() } catch {
            throw Problem(.internalServerError, "no-key", "The site's key cannot be read", detail: error.description)
        }
        let site = h.site, timeout = Self.publishTimeout
        let answers = await eachAtOnce((try? TerminalAddress.all(in: h.document)) ?? []) { address -> (room: String, outcome: Result<ControlReply, SiteHistory.Unanswered>) in
            func unanswered(_ detail: String) -> (room: String, outcome: Result<ControlReply, SiteHistory.Unanswered>) {
                (address.name, .failure(SiteHistory.Unanswered(room: address.name, detail: detail)))
            }
            let oneTime = OrderReplySeal.OneTimeKey()
            let order = SiteOrder(site: site, room: address.name, action: .history, issuedAt: Date().timeIntervalSince1970,
                                  replyKey: oneTime.publicKeyBase64)
            switch SiteTransfer.exchange(.order(site: site, signed: SignedSiteOrder.sign(order, with: key)), with: address.endpoint, timeout: timeout) {
            case .failure(let error): return unanswered("not reached: \(error)")
            case .success(.orderDone(let sealed)):
                guard let plain = OrderReplySeal.open(sealed, with: oneTime, for: order) else { return unanswered("its reply does not open") }
                guard let response = try? ControlResponse.read(plain, to: .command(.history(limit: nil))) else { return unanswered("its reply is not understood") }
                switch response.outcome {
                case .success(let reply): return (address.name, .success(reply))
                case .failure(let refusal): return unanswered(refusal.description)
                }
            case .success(.refused(let why)): return unanswered("refused: \(why)")
            case .success(let other): return unanswered("answered \(other)")
            }
        }
        return SiteHistory(answers: answers, limit: limit)
    }

    /// Approves for `room` the terminal whose key has `code` (read at it), then signs and hands
    /// out the next version with it.
    public func approve(room: String, code: String, actor: String) async throws -> Outcome {
        guard let typed = EnrolmentCode(typed: code) else {
            throw Problem.badInput("code", "\"code\" must be the \(EnrolmentCode.digits) digits the terminal shows")
        }
        let h = try held()
        var enrolment = SiteFiles.enrolment(of: h.document, site: h.site)
        for answer in await TerminalAnswer.ask((try? TerminalAddress.all(in: h.document)) ?? [], site: h.site, timeout: Self.publishTimeout) {
            if case .success(let r) = answer.result { _ = enrolment.apply(.heard(r.request, r.identity)) }
        }
        switch enrolment.apply(.approve(room: room, code: typed)) {
        case .approved, .alreadyApproved: break
        case .refused(.unknownRoom): throw Problem.notFound("no room \(room)")
        case .refused(let reason): throw Problem(.unprocessableContent, "not-approved", "Not approved", detail: reason.explanation, field: "code")
        case let other: throw Problem(.unprocessableContent, "not-approved", "Not approved", detail: "\(other)", field: "code")
        }
        return try await decided(enrolment, held: h, actor: actor, action: "terminal.approve")
    }

    /// Revokes the terminal approved for `room` (a lost or stolen box): its key is never approved again.
    public func revoke(room: String, actor: String) async throws -> Outcome {
        let h = try held()
        var enrolment = SiteFiles.enrolment(of: h.document, site: h.site)
        switch enrolment.apply(.revoke(room: room)) {
        case .revoked: break
        case .refused(.unknownRoom): throw Problem.notFound("no room \(room)")
        case .refused(let reason): throw Problem(.conflict, "not-revoked", "Not revoked", detail: "\(room) has no approved terminal (\(reason.rawValue))", field: "room")
        case let other: throw Problem(.conflict, "not-revoked", "Not revoked", detail: "\(other)", field: "room")
        }
        return try await decided(enrolment, held: h, actor: actor, action: "terminal.revoke")
    }

    /// Writes the decisions and makes them the next version (the document's text unchanged).
    /// `h` was read before the terminals were asked: another change may have come meanwhile.
    private func decided(_ enrolment: Enrolment, held h: Held, actor: String, action: String) async throws -> Outcome {
        try Self.check(base: h.signed.version, inForce: try held().signed.version)
        do { try files.writeEnrolment(enrolment) } catch {
            throw Problem(.internalServerError, "not-signed", "The decision was not kept", detail: error.description)
        }
        return try await change(base: h.signed.version, text: h.text, dryRun: false, actor: actor, action: action)
    }

    /// Makes the text of `version` the next version: undo.
    public func restore(version: UInt64, dryRun: Bool, actor: String) async throws -> Outcome {
        try recordFound(try held())
        guard let text = try database.siteText(version: version) else { throw Problem.notFound("the service does not know version \(version)") }
        return try await change(base: nil, text: text, dryRun: dryRun, actor: actor, action: "site.restore")
    }

    /// Hands `signed` to every terminal at once; each answers within `publishTimeout`.
    private static func publish(_ signed: SignedSiteDocument, to terminals: [TerminalAddress]) async -> [PublishOutcome] {
        let bytes = signed.encoded()
        return await eachAtOnce(terminals) { PublishOutcome.offer(bytes, site: signed.site, to: $0, timeout: publishTimeout) }
    }

    private static func check(base: UInt64, inForce: UInt64) throws {
        guard base != inForce else { return }
        throw Problem(.conflict, "stale-version", "The document changed meanwhile",
                      detail: "made on version \(base), but version \(inForce) is in force: reload and make the change again",
                      field: "version")
    }

    /// The problem for a document with problems: each names its key (and line).
    private static func invalid(_ error: ConfigError, field: String) -> Problem {
        let items = error.issues.map { ProblemItem(key: $0.key, problem: $0.problem, line: $0.line) }
        let first = items.first.map { "\($0.key.isEmpty ? "" : $0.key + ": ")\($0.problem)" } ?? "not a site document"
        return Problem(.unprocessableContent, "invalid-site-document", "The site document has problems",
                       detail: items.count == 1 ? first : "\(first) (and \(items.count - 1) more)", field: field, errors: items)
    }
}
