import ArgumentParser
import IntercomConfig
import Foundation
import Posix
import Site
import SiteAdmin
import SiteSecurity

// The administrator's tool: creates a site (its signing key and a first document), converts the
// per-terminal files a practice ran on, checks and signs each new version. The signing key stays
// in the site folder on the administrator's machine; terminals get only the public key.

@main
struct IntercomSite: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "intercom-site",
        abstract: "Create, check and sign a site's document (docs/site.md).",
        discussion: """
            A site folder holds administrator.key (the signing key, mode 0600: keep it on this machine),
            administrator.pub (copy it to every terminal), site.toml (the document you edit) and
            site.json (the signed document terminals take), enrolment.toml (which terminal each
            room has, kept by approve and revoke, signed with site.toml: docs/identity.md), and
            handovers.json once the administrator's key was replaced (rekey: docs/site.md).
            Exit status: 0 done; 1 the document or a file has problems (each named on stderr); 64 usage.
            """,
        subcommands: [Create.self, Convert.self, Check.self, Sign.self, Show.self, Publish.self, Pending.self, Approve.self, Revoke.self,
                      Rekey.self, Serve.self, AccountCommand.self])
}

/// Which terminals a command asks, and how long it waits for each.
struct TerminalTargets: ParsableArguments {
    @Option(name: .customLong("to"), help: "A terminal, as a.b.c.d:port (its signalling port); repeat for more. Default: every room of the document.")
    var targets: [String] = []

    @Option(help: "Seconds to wait for each terminal.")
    var timeout: Double = 3
}

/// Where a site's files live.
struct SiteFolder: ParsableArguments {
    @Option(name: .long, help: "The site folder.")
    var dir: String = "."

    var files: SiteFiles { SiteFiles(dir: dir) }
    var key: String { files.key }
    var publicKey: String { files.publicKey }
    var document: String { files.document }
    var signed: String { files.signed }
    var enrolment: String { files.enrolment }
    var handovers: String { files.handovers }

    /// The administrator's key handovers so far (none before the first `rekey`).
    func handoverChain() -> [KeyHandover] { orFail { () throws(SiteFolderError) in try files.handoverChain() } }

    /// What is signed: site.toml, then enrolment.toml when there is one.
    func documentText() -> String { orFail { () throws(SiteFolderError) in try files.documentText() } }
}

/// Prints `lines` to stderr and exits 1.
func fail(_ lines: [String]) -> Never {
    for line in lines { FileHandle.standardError.write(Data((line + "\n").utf8)) }
    Foundation.exit(1)
}

/// `body`'s value, or exit 1 naming the problem.
func orFail<T>(_ body: () throws(SiteFolderError) -> T) -> T {
    do { return try body() } catch { fail([error.description]) }
}

/// Reads each terminal file (a whole configuration) or fails naming every problem.
func readTerminalFiles(_ paths: [String]) -> [(source: String, config: DaemonConfig)] {
    var files: [(source: String, config: DaemonConfig)] = []
    var problems: [String] = []
    for path in paths {
        do { files.append((path, try DaemonConfig.load(path: path))) } catch { problems.append("\(error)") }
    }
    if !problems.isEmpty { fail(problems) }
    return files
}

/// The text of `path`, or exit 1 naming the problem.
func readText(_ path: String) -> String { orFail { () throws(SiteFolderError) in try SiteFiles.text(of: path) } }

/// Writes `text` to `path` atomically (mode 0644).
func writeText(_ text: String, to path: String) throws { try SiteFiles.write(text, to: path) }

/// Checks `site.toml` and signs it as the version after `previous` (or 1), with the key's handovers.
func signDocument(_ folder: SiteFolder, site: String, key: AdministratorKey, previous: SignedSiteDocument?) throws -> SignedSiteDocument {
    orFail { () throws(SiteFolderError) in try folder.files.sign(site: site, key: key, previous: previous) }
}

/// The folder's signing key and the last document it signed, or exit 1 naming what is missing.
func keyAndLastDocument(_ folder: SiteFolder) -> (key: AdministratorKey, last: SignedSiteDocument) {
    orFail { () throws(SiteFolderError) in try folder.files.keyAndLastDocument() }
}

/// The signed document in the folder, verified with the folder's public key.
func readSigned(_ folder: SiteFolder, verifier: SiteVerifier) -> SignedSiteDocument? {
    orFail { () throws(SiteFolderError) in try folder.files.readSigned(verifier: verifier) }
}

struct Create: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create a site: its signing key, and a first document from the terminals' files (or one room).")

    @OptionGroup var folder: SiteFolder

    @Option(help: "The site's id (1-64 of a-z, 0-9, - and _): every terminal's [site] id.")
    var id: String

    @Option(help: "The practice's name.")
    var name: String = ""

    @Option(help: "With no terminal files: the first room, as id=address (e.g. empfang=192.168.10.11).")
    var room: String?

    @Argument(help: "Configuration files of the terminals the practice runs today (each with [room] id).")
    var terminalFiles: [String] = []

    func run() throws {
        if let problem = SiteSection.idProblem(id) { throw ValidationError("--id: \(problem)") }
        var document: SiteDocument
        if terminalFiles.isEmpty {
            guard let room, let eq = room.firstIndex(of: "=") else {
                throw ValidationError("give the terminals' configuration files, or --room id=address for a first room")
            }
            document = SiteDocument(rooms: [String(room[..<eq]): RoomEntry(address: String(room[room.index(after: eq)...]))])
        } else {
            let converted = SiteDocument.converting(readTerminalFiles(terminalFiles))
            document = converted.document
            for line in converted.report { print("differed: \(line)") }
        }
        document.name = name
        do { _ = try SiteDocument.parse(document.rendered(), source: "the new document") } catch { fail(["\(error)"]) }
        try FileManager.default.createDirectory(atPath: folder.dir, withIntermediateDirectories: true)
        let key = AdministratorKey()
        do {
            try key.write(to: folder.key)
            try key.verifier.write(to: folder.publicKey)
        } catch { fail(["\(error)"]) }
        try writeText(document.rendered(), to: folder.document)
        let signed = try signDocument(folder, site: id, key: key, previous: nil)
        print("site \(id): version \(signed.version) signed, \(document.rooms.count) rooms; administrator key \(key.verifier.fingerprint)")
        print("copy \(folder.publicKey) to each terminal (its [site] administrator_key); keep \(folder.key) here")
    }
}

struct Convert: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print one site document made from the terminals' files, and what differed between them.")

    @Argument(help: "Configuration files of the terminals (each with [room] id).")
    var terminalFiles: [String]

    func run() throws {
        let (document, report) = SiteDocument.converting(readTerminalFiles(terminalFiles))
        for line in report { FileHandle.standardError.write(Data("differed: \(line)\n".utf8)) }
        print(document.rendered(), terminator: "")
    }
}

struct Check: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Check a site document for every room it lists.")

    @Argument(help: "The document (TOML).")
    var file: String

    func run() throws {
        let text = readText(file)
        do {
            let document = try SiteDocument.parse(text, source: file)
            print("\(file): ok, \(document.rooms.count) rooms, kinds: \(document.kindNames.joined(separator: ", "))")
        } catch { fail(["\(error)"]) }
    }
}

struct Sign: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check site.toml and sign it as the next version (site.json).")

    @OptionGroup var folder: SiteFolder

    func run() throws {
        let (key, previous) = keyAndLastDocument(folder)
        let signed = try signDocument(folder, site: previous.site, key: key, previous: previous)
        print("site \(signed.site): version \(signed.version) signed, sha256 \(SignedSiteDocument.digest(of: signed.encoded()).prefix(16))")
        // Under terminal keys a room without an approved terminal is silent: say which, before it is published.
        if let document = try? SiteDocument.parse(folder.documentText(), source: folder.document), !document.enrolment.approved.isEmpty {
            let enrolment = document.enrolment
            let keyed = Set(enrolment.approved.filter { !enrolment.revoked.contains($0.value) }.keys)
            let silent = document.rooms.keys.filter { !keyed.contains($0) }.sorted()
            print("signalling sealed by terminal keys: \(keyed.count) of \(document.rooms.count) rooms have an approved terminal"
                  + (silent.isEmpty ? "" : "; silent until approved: " + silent.joined(separator: ", ")))
        }
    }
}

struct Show: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Verify the signed document and say what it is.")

    @OptionGroup var folder: SiteFolder

    func run() throws {
        let verifier: SiteVerifier
        do { verifier = try SiteVerifier(path: folder.publicKey) } catch { fail(["\(error)"]) }
        guard let signed = readSigned(folder, verifier: verifier) else { fail(["\(folder.signed): no such file"]) }
        let document: SiteDocument
        do { document = try SiteDocument.parse(String(decoding: signed.body, as: UTF8.self), source: folder.signed) } catch { fail(["\(error)"]) }
        print("site \(signed.site) \"\(document.name)\": version \(signed.version), \(document.rooms.count) rooms, signed by \(verifier.fingerprint)")
    }
}

struct Publish: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Hand site.json to the terminals; those that take it pass it on to the rest.",
        discussion: """
            Each terminal checks the document whole (signature, site, version) before it takes it.
            One terminal that takes it is enough: the others fetch it from it within seconds. Exit
            status 0 when at least one terminal took it or already held it.
            """)

    @OptionGroup var folder: SiteFolder

    @OptionGroup var terminals: TerminalTargets

    func run() throws {
        let verifier: SiteVerifier
        do { verifier = try SiteVerifier(path: folder.publicKey) } catch { fail(["\(error)"]) }
        guard let signed = readSigned(folder, verifier: verifier) else { fail(["\(folder.signed): no such file"]) }
        guard let bytes = try? WholeFile.read(folder.signed) else { fail(["\(folder.signed): cannot be read"]) }
        let document: SiteDocument
        do { document = try SiteDocument.parse(String(decoding: signed.body, as: UTF8.self), source: folder.signed) } catch { fail(["\(error)"]) }
        var took = 0
        for t in terminalEndpoints(terminals.targets, document: document) {
            let outcome = PublishOutcome.offer(bytes, site: signed.site, to: t, timeout: terminals.timeout)
            if outcome.holdsIt { took += 1 }
            let words = switch outcome.result {
            case .took: "took version \(signed.version)"
            case .alreadyHeld: "already holds version \(signed.version)"
            case .refused: "refused it: \(outcome.detail ?? "")"
            case .unreached: "not reached: \(outcome.detail ?? "")"
            case .otherSite, .busy: outcome.detail ?? outcome.result.rawValue
            }
            print("\(t.name) (\(t.endpoint)): \(words)")
        }
        if took == 0 { fail(["no terminal took version \(signed.version)"]) }
    }
}

/// The terminals to ask: those given with --to, or every room's address in the document.
func terminalEndpoints(_ targets: [String], document: SiteDocument) -> [TerminalAddress] {
    guard !targets.isEmpty else { return orFail { () throws(SiteFolderError) in try TerminalAddress.all(in: document) } }
    return targets.map { t in
        do throws(IPv4ParseError) { return TerminalAddress(name: t, endpoint: try IPv4Endpoint.parse(t)) } catch { fail(["--to \(error)"]) }
    }
}

/// The folder's site as the enrolment tools need it: its id (from the signed document), the
/// document as it would be signed now, and the enrolment decisions it holds.
struct EnrolmentFolder {
    let folder: SiteFolder
    let site: String
    let document: SiteDocument

    init(_ folder: SiteFolder) {
        self.folder = folder
        let verifier: SiteVerifier
        do { verifier = try SiteVerifier(path: folder.publicKey) } catch { fail(["\(error)"]) }
        guard let signed = readSigned(folder, verifier: verifier) else {
            fail(["\(folder.signed): no signed document yet; `intercom-site create` makes the first"])
        }
        site = signed.site
        do { document = try SiteDocument.parse(folder.documentText(), source: folder.document) } catch { fail(["\(error)"]) }
    }

    var enrolment: Enrolment { SiteFiles.enrolment(of: document, site: site) }

    /// Each terminal's request, or why there is none.
    func requests(from terminals: TerminalTargets) -> [(name: String, endpoint: IPv4Endpoint, request: Result<(request: EnrolmentRequest, identity: PublicIdentity), SiteTransferError>)] {
        terminalEndpoints(terminals.targets, document: document).map { t in
            (t.name, t.endpoint, TerminalAnswer.ask(t, site: site, timeout: terminals.timeout).result)
        }
    }

    /// Writes the decisions to enrolment.toml; `sign` puts them in the next version.
    func write(_ enrolment: Enrolment) throws { try folder.files.writeEnrolment(enrolment) }
}

struct Pending: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Ask the terminals which key each has and whether the document approves it.",
        discussion: """
            Prints each terminal's key (its fingerprint), the room it was set up for and its standing.
            The enrolment code is not printed: read it at the terminal (`intercomctl stats` prints it
            there), so that only the box in the room can be approved.
            """)

    @OptionGroup var folder: SiteFolder

    @OptionGroup var terminals: TerminalTargets

    func run() throws {
        let site = EnrolmentFolder(folder)
        let enrolment = site.enrolment
        for t in site.requests(from: terminals) {
            switch t.request {
            case .success(let r):
                let standing = switch Enrolment.standing(of: r.identity, approved: enrolment.approved, revoked: enrolment.revoked) {
                case .pending: "pending"
                case .approved(let room): "approved for \(room)"
                case .revoked: "REVOKED"
                }
                let room = r.request.room.isEmpty ? "no room" : "room \(r.request.room)"
                print("\(t.name) (\(t.endpoint)): terminal \(r.identity), set up for \(room), software \(r.request.software): \(standing)")
            case .failure(let why):
                print("\(t.name) (\(t.endpoint)): \(why)")
            }
        }
    }
}

struct Approve: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Approve the terminal whose enrolment code was read at it, for a room (into enrolment.toml).",
        discussion: """
            Asks the terminals (--to, or every room's address) for their requests and approves the one
            whose key has the code. Refused when no terminal or two have it. Then `sign` and
            `publish` put the approval in force.
            """)

    @OptionGroup var folder: SiteFolder

    @Option(help: "The room the terminal serves.")
    var room: String

    @Option(help: "The enrolment code read at the terminal (12 digits; spaces and dashes are ignored).")
    var code: String

    @OptionGroup var terminals: TerminalTargets

    func run() throws {
        guard let typed = EnrolmentCode(typed: code) else { throw ValidationError("--code: \(EnrolmentCode.digits) digits, e.g. \"482 193 775 020\"") }
        let site = EnrolmentFolder(folder)
        var enrolment = site.enrolment
        for t in site.requests(from: terminals) {
            switch t.request {
            case .success(let r): _ = enrolment.apply(.heard(r.request, r.identity))
            case .failure(let why): print("\(t.name) (\(t.endpoint)): \(why)")
            }
        }
        switch enrolment.apply(.approve(room: room, code: typed)) {
        case .approved(let identity, let room, let replaced, let movedFrom):
            try site.write(enrolment)
            print("approved terminal \(identity) for \(room)" + (replaced.map { ", replacing terminal \($0)" } ?? "")
                  + (movedFrom.map { ", moved from \($0)" } ?? "") + "; `intercom-site sign` and `publish` put it in force")
        case .alreadyApproved(let room):
            print("that terminal is already approved for \(room)")
        case .refused(let reason):
            fail(["not approved: \(reason.rawValue) (\(reason.explanation))"])
        case let other:
            fail(["not approved: \(other)"])
        }
    }
}

struct Revoke: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Revoke a room's terminal (a lost or stolen box): its key is never approved again.",
        discussion: "Then `sign` and `publish`: every terminal refuses the revoked one as soon as it applies the version.")

    @OptionGroup var folder: SiteFolder

    @Option(help: "The room whose terminal is revoked.")
    var room: String

    func run() throws {
        let site = EnrolmentFolder(folder)
        var enrolment = site.enrolment
        switch enrolment.apply(.revoke(room: room)) {
        case .revoked(let identity, let room):
            try site.write(enrolment)
            print("revoked terminal \(identity) of \(room); `intercom-site sign` and `publish` put it in force")
        case .refused(let reason):
            fail(["not revoked: \(reason.rawValue)" + (reason == .notApproved ? " (\(room) has no approved terminal)" : "")])
        case let other:
            fail(["not revoked: \(other)"])
        }
    }
}

struct Rekey: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Replace the administrator's key with a new one that the old one hands over to; no terminal is touched.",
        discussion: """
            Makes a new administrator.key, signs the handover to it with the old key (kept in
            handovers.json, carried by every document signed from now on), replaces
            administrator.pub (for terminals installed from now on) and signs site.toml as the next
            version. Publish it: each terminal moves to the new key when it takes that version, and
            from then on refuses whatever the old key signs. The old key file is removed; keep no copy.
            """)

    @OptionGroup var folder: SiteFolder

    func run() throws {
        let (old, previous) = keyAndLastDocument(folder)
        let new = AdministratorKey()
        let chain = folder.handoverChain() + [KeyHandover(site: previous.site, from: old, to: new.verifier)]
        guard chain.count <= KeyHandover.maximumChain else {
            fail(["\(folder.handovers): \(KeyHandover.maximumChain) handovers already; give every terminal the newest "
                  + "administrator.pub and remove \(folder.handovers) to start a new chain"])
        }
        // The new key first (a file of its own), then the chain, then the swap: an interruption
        // leaves either the old state or one `sign` names (the new key waiting in .new).
        let waiting = folder.key + ".new"
        do { try new.write(to: waiting) } catch { fail(["\(error)"]) }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try writeText(String(decoding: try encoder.encode(chain), as: UTF8.self) + "\n", to: folder.handovers)
        guard rename(waiting, folder.key) == 0 else { fail(["\(waiting): \(String(cString: strerror(errno)))"]) }
        let publicWaiting = folder.publicKey + ".new"
        unlink(publicWaiting)
        do { try new.verifier.write(to: publicWaiting) } catch { fail(["\(error)"]) }
        guard rename(publicWaiting, folder.publicKey) == 0 else { fail(["\(publicWaiting): \(String(cString: strerror(errno)))"]) }
        let signed = try signDocument(folder, site: previous.site, key: new, previous: previous)
        print("site \(signed.site): administrator key \(old.verifier.fingerprint) handed over to \(new.verifier.fingerprint); "
              + "version \(signed.version) signed with the handover")
        print("publish it (intercom-site publish): each terminal trusts the new key once it takes that version; "
              + "copy the new \(folder.publicKey) to terminals installed from now on")
    }
}
