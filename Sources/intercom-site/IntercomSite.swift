import ArgumentParser
import Configuration
import Foundation
import Posix
import Site
import SiteSecurity

// The administrator's tool: creates a site (its signing key and a first document), converts the
// per-terminal files a practice ran on, checks and signs each new version. The signing key stays
// in the site folder on the administrator's machine; terminals get only the public key.

@main
struct IntercomSite: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "intercom-site",
        abstract: "Create, check and sign a site's document (docs/site.md).",
        discussion: """
            A site folder holds administrator.key (the signing key, mode 0600: keep it on this machine),
            administrator.pub (copy it to every terminal), site.toml (the document you edit) and
            site.json (the signed document terminals take).
            Exit status: 0 done; 1 the document or a file has problems (each named on stderr); 64 usage.
            """,
        subcommands: [Create.self, Convert.self, Check.self, Sign.self, Show.self, Publish.self])
}

/// Where a site's files live.
struct SiteFolder: ParsableArguments {
    @Option(name: .long, help: "The site folder.")
    var dir: String = "."

    var key: String { dir + "/administrator.key" }
    var publicKey: String { dir + "/administrator.pub" }
    var document: String { dir + "/site.toml" }
    var signed: String { dir + "/site.json" }
}

/// Prints `lines` to stderr and exits 1.
func fail(_ lines: [String]) -> Never {
    for line in lines { FileHandle.standardError.write(Data((line + "\n").utf8)) }
    Foundation.exit(1)
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
func readText(_ path: String) -> String {
    let bytes: [UInt8]?
    do { bytes = try WholeFile.read(path) } catch { fail(["\(path): \(error.cannotText)"]) }
    guard let bytes else { fail(["\(path): no such file"]) }
    return String(decoding: bytes, as: UTF8.self)
}

/// Writes `text` to `path` atomically (mode 0644).
func writeText(_ text: String, to path: String) throws {
    try WholeFile.replace(path, temporary: path + ".tmp-\(getpid())", mode: 0o644, syncDirectory: true) { fd in
        try Array(text.utf8).withUnsafeBytes { try WholeFile.write(fd, $0) }
    }
}

/// Checks `site.toml` and signs it as the version after `previous` (or 1).
func signDocument(_ folder: SiteFolder, site: String, key: AdministratorKey, previous: SignedSiteDocument?) throws -> SignedSiteDocument {
    let text = readText(folder.document)
    do { _ = try SiteDocument.parse(text, source: folder.document) } catch { fail(["\(error)"]) }
    let version = (previous?.version ?? 0) + 1
    let signed = SignedSiteDocument(site: site, version: version, body: Array(text.utf8), signedWith: key)
    try writeText(String(decoding: signed.encoded(), as: UTF8.self), to: folder.signed)
    return signed
}

/// The signed document in the folder, verified with the folder's public key.
func readSigned(_ folder: SiteFolder, verifier: SiteVerifier) -> SignedSiteDocument? {
    guard let bytes = try? WholeFile.read(folder.signed) else { return nil }
    guard let envelope = try? JSONDecoder().decode(SignedSiteDocument.self, from: Data(bytes)) else {
        fail(["\(folder.signed): not a signed site document"])
    }
    switch SignedSiteDocument.open(bytes, site: envelope.site, verifier: verifier) {
    case .success(let document): return document
    case .failure(let reason): fail(["\(folder.signed): refused: \(reason.rawValue)"])
    }
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
        let key: AdministratorKey
        do { key = try AdministratorKey(path: folder.key) } catch { fail(["\(error)"]) }
        guard let previous = readSigned(folder, verifier: key.verifier) else {
            fail(["\(folder.signed): no signed document yet; `intercom-site create` makes the first"])
        }
        let signed = try signDocument(folder, site: previous.site, key: key, previous: previous)
        print("site \(signed.site): version \(signed.version) signed, sha256 \(SignedSiteDocument.digest(of: signed.encoded()).prefix(16))")
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

    @Option(name: .customLong("to"), help: "A terminal, as a.b.c.d:port (its signalling port); repeat for more. Default: every room of the document.")
    var targets: [String] = []

    @Option(help: "Seconds to wait for each terminal.")
    var timeout: Double = 3

    func run() throws {
        let verifier: SiteVerifier
        do { verifier = try SiteVerifier(path: folder.publicKey) } catch { fail(["\(error)"]) }
        guard let signed = readSigned(folder, verifier: verifier) else { fail(["\(folder.signed): no such file"]) }
        guard let bytes = try? WholeFile.read(folder.signed) else { fail(["\(folder.signed): cannot be read"]) }
        var terminals: [(name: String, endpoint: IPv4Endpoint)] = []
        if targets.isEmpty {
            let document: SiteDocument
            do { document = try SiteDocument.parse(String(decoding: signed.body, as: UTF8.self), source: folder.signed) } catch { fail(["\(error)"]) }
            for (id, room) in document.rooms.sorted(by: { $0.key < $1.key }) {
                guard let a = try? IPv4Endpoint.parseAddress(room.address), let port = UInt16(exactly: room.signallingPort) else {
                    fail(["rooms.\(id).address: \(room.address) is not an IPv4 address"])
                }
                terminals.append((id, IPv4Endpoint(address: a, port: port)))
            }
        } else {
            for t in targets {
                do throws(IPv4ParseError) { terminals.append((t, try IPv4Endpoint.parse(t))) } catch { fail(["--to \(error)"]) }
            }
        }
        var took = 0
        for t in terminals {
            let outcome: String
            switch SiteTransfer.exchange(.offer(site: signed.site, document: bytes), with: t.endpoint, timeout: timeout) {
            case .success(.adopted): outcome = "took version \(signed.version)"; took += 1
            case .success(.alreadyHeld): outcome = "already holds version \(signed.version)"; took += 1
            case .success(.refused(let reason)): outcome = "refused it: \(reason)"
            case .success(.otherSite): outcome = "is not a terminal of site \(signed.site)"
            case .success(.busy): outcome = "busy; try again"
            case .success(let other): outcome = "answered \(other)"
            case .failure(let error): outcome = "not reached: \(error)"
            }
            print("\(t.name) (\(t.endpoint)): \(outcome)")
        }
        if took == 0 { fail(["no terminal took version \(signed.version)"]) }
    }
}
