import ArgumentParser
import Foundation
import SiteAdmin
import SiteService

// The site service: the page and the API over HTTPS (docs/site-service.md), with its database
// and certificate in the site folder's `service` folder.

/// Where the service keeps its files.
struct ServiceFolder: ParsableArguments {
    @Option(name: .long, help: "The site folder (the service keeps its files in its service/ folder).")
    var dir: String = "."

    var folder: String { dir + "/service" }
    var database: String { folder + "/site.sqlite" }
    var tls: String { folder + "/tls" }

    func open() throws -> SiteDatabase {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        return try SiteDatabase(path: database)
    }
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the site service: the practice manager's page and the practice software's API over HTTPS.",
        discussion: """
            Makes the site's certificate authority on first start (service/tls/ca.pem: import it into
            the browsers as an authority, docs/site-service.md). Writes the port it listens on to
            service/listening.json. Stops on SIGTERM or SIGINT.
            """)

    @OptionGroup var folder: ServiceFolder
    @Option(help: "The address to listen on.") var host = "0.0.0.0"
    @Option(help: "The port (0: any free one, written to service/listening.json).") var port = 8443
    @Option(name: .customLong("name"), help: "A host name or IPv4 address the page is reached by; repeat for more (default: this host's name, localhost, 127.0.0.1).")
    var names: [String] = []
    @Option(help: "The site's name in its certificate authority.") var siteId = "practice"
    @Option(help: "The control socket of the terminal the service takes part in signalling through (its notifications, presence, history and events; the API answers 503 for those without one).")
    var member: String?

    func run() async throws {
        let database = try folder.open()
        let host = ProcessInfo.processInfo.hostName
        let names = self.names.isEmpty ? [host, "localhost", "127.0.0.1"] : self.names
        let certificate = try SiteCertificate.prepare(directory: folder.tls, siteID: siteId, names: names)
        let listening = folder.folder + "/listening.json"
        try await SiteService.run(database: database, site: SiteFiles(dir: folder.dir), certificate: certificate,
                                  member: member.map { SiteMember(socket: $0) }, host: self.host, port: port) { port in
            let text = "{\"port\":\(port)}\n"
            _ = FileManager.default.createFile(atPath: listening + ".tmp", contents: Data(text.utf8))
            _ = rename(listening + ".tmp", listening)
            FileHandle.standardError.write(Data("intercom-site: serving https://\(names[0]):\(port)/ (authority: \(certificate.caPath))\n".utf8))
        }
    }
}

struct AccountCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "account", abstract: "Add an account to the site service (the first manager).",
                                                    subcommands: [AccountAdd.self])
}

struct AccountAdd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "add",
                                                    abstract: "Add an account; its password is read from standard input (one line).")
    @OptionGroup var folder: ServiceFolder
    @Argument(help: "The name used to log in.") var name: String
    @Option(help: "manager, technician or viewer.") var role: Role = .manager

    func run() async throws {
        guard let password = readLine(strippingNewline: true) else { throw ValidationError("no password on standard input") }
        do {
            let account = try folder.open().addAccount(name: name, role: role, password: password, by: "intercom-site account add",
                                                       now: Date().timeIntervalSince1970)
            print("account \(account.name) (\(account.role.rawValue)) added")
        } catch let error as SiteServiceError {
            FileHandle.standardError.write(Data("intercom-site: \(error)\n".utf8))
            throw ExitCode(1)
        }
    }
}

extension Role: ExpressibleByArgument {}
