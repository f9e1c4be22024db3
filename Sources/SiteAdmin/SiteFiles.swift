import Foundation
import IntercomConfig
import Posix
import Site
import SiteSecurity

/// A site folder on the administrator's side (docs/site.md): the signing key, the document being
/// edited, the signed version terminals take, the enrolment decisions and the key handovers.
/// The administrator's tool and the site service both keep a site through this one type.
public struct SiteFiles: Sendable {
    public let dir: String

    public init(dir: String) { self.dir = dir }

    public var key: String { dir + "/administrator.key" }
    public var publicKey: String { dir + "/administrator.pub" }
    public var document: String { dir + "/site.toml" }
    public var signed: String { dir + "/site.json" }
    public var enrolment: String { dir + "/enrolment.toml" }
    public var handovers: String { dir + "/handovers.json" }

    /// The administrator's key handovers so far (none before the first `rekey`).
    public func handoverChain() throws(SiteFolderError) -> [KeyHandover] {
        guard FileManager.default.fileExists(atPath: handovers) else { return [] }
        guard let chain = try? JSONDecoder().decode([KeyHandover].self, from: Data(Self.text(of: handovers).utf8)) else {
            throw SiteFolderError("\(handovers): not a list of key handovers")
        }
        return chain
    }

    /// What is signed: `siteText` (site.toml's, unless given), then enrolment.toml when there is one.
    public func documentText(siteText: String? = nil) throws(SiteFolderError) -> String {
        let text: String
        if let siteText { text = siteText } else { text = try Self.text(of: document) }
        guard FileManager.default.fileExists(atPath: enrolment) else { return text }
        return text + "\n" + (try Self.text(of: enrolment))
    }

    /// The signing key.
    public func signingKey() throws(SiteFolderError) -> AdministratorKey {
        do { return try AdministratorKey(path: key) } catch { throw SiteFolderError("\(error)") }
    }

    /// Checks what would be signed and signs it as the version after `previous` (or 1), with the
    /// key's handovers; writes site.json (and, when given, `siteText` to site.toml first).
    public func sign(site: String, key: AdministratorKey, previous: SignedSiteDocument?, siteText: String? = nil) throws(SiteFolderError) -> SignedSiteDocument {
        let text = try documentText(siteText: siteText)
        do { _ = try SiteDocument.parse(text, source: document) } catch { throw SiteFolderError("\(error)") }
        let chain = try handoverChain()
        if let first = chain.first {
            // Terminals follow the chain from the site's first key: it must end at the key that signs.
            let start = try? SiteVerifier(publicKey: [UInt8](first.from))
            guard let start, KeyHandover.follow(chain, site: site, from: start) == key.verifier else {
                throw SiteFolderError("\(handovers) does not lead to \(self.key) (\(key.verifier.fingerprint)): a re-keying was interrupted; "
                                      + "if \(self.key).new exists, it holds the new key: move it over \(self.key)")
            }
        }
        if let siteText { try Self.write(siteText, to: document) }
        let version = (previous?.version ?? 0) + 1
        let signed = SignedSiteDocument(site: site, version: version, body: Array(text.utf8), signedWith: key, handovers: chain)
        try Self.write(String(decoding: signed.encoded(), as: UTF8.self), to: self.signed)
        return signed
    }

    /// The signed document in the folder, verified with `verifier`; nil when there is none.
    public func readSigned(verifier: SiteVerifier) throws(SiteFolderError) -> SignedSiteDocument? {
        guard let bytes = try? WholeFile.read(signed) else { return nil }
        guard let envelope = try? JSONDecoder().decode(SignedSiteDocument.self, from: Data(bytes)) else {
            throw SiteFolderError("\(signed): not a signed site document")
        }
        switch SignedSiteDocument.open(bytes, site: envelope.site, verifier: verifier) {
        case .success(let opened): return opened.document
        case .failure(let reason): throw SiteFolderError("\(signed): refused: \(reason.rawValue)")
        }
    }

    /// The signing key and the last document it signed.
    public func keyAndLastDocument() throws(SiteFolderError) -> (key: AdministratorKey, last: SignedSiteDocument) {
        let key = try signingKey()
        guard let last = try readSigned(verifier: key.verifier) else {
            throw SiteFolderError("\(signed): no signed document yet; `intercom-site create` makes the first")
        }
        return (key, last)
    }

    /// The text of `path`.
    public static func text(of path: String) throws(SiteFolderError) -> String {
        let bytes: [UInt8]?
        do { bytes = try WholeFile.read(path) } catch { throw SiteFolderError("\(path): \(error.cannotText)") }
        guard let bytes else { throw SiteFolderError("\(path): no such file") }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Writes `text` to `path` atomically (mode 0644).
    public static func write(_ text: String, to path: String) throws(SiteFolderError) {
        do {
            try WholeFile.replace(path, mode: 0o644, syncDirectory: true) { fd in
                try Array(text.utf8).withUnsafeBytes { try WholeFile.write(fd, $0) }
            }
        } catch let error as SystemError { throw SiteFolderError("\(path): \(error.cannotText)") } catch {
            throw SiteFolderError("\(path): \(error)")
        }
    }
}

/// A site folder's file is missing, unreadable or refused: the message names the file.
public struct SiteFolderError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// A terminal to hand a document to: its room (or how it was named) and its signalling address.
public struct TerminalAddress: Sendable, Equatable {
    public var name: String
    public var endpoint: IPv4Endpoint

    public init(name: String, endpoint: IPv4Endpoint) {
        self.name = name
        self.endpoint = endpoint
    }

    /// Every room's terminal in `document`.
    public static func all(in document: SiteDocument) throws(SiteFolderError) -> [TerminalAddress] {
        try document.rooms.sorted(by: { $0.key < $1.key }).map { (id, room) throws(SiteFolderError) in
            guard let a = try? IPv4Endpoint.parseAddress(room.address), let port = UInt16(exactly: room.signallingPort) else {
                throw SiteFolderError("rooms.\(id).address: \(room.address) is not an IPv4 address")
            }
            return TerminalAddress(name: id, endpoint: IPv4Endpoint(address: a, port: port))
        }
    }
}

/// What a terminal did with a document it was handed. The one wire type for that answer.
public struct PublishOutcome: Sendable, Equatable, Codable {
    public enum Result: String, Sendable, Codable, CaseIterable {
        case took, alreadyHeld = "already_held", refused, otherSite = "other_site", busy, unreached
    }
    public var room: String
    public var endpoint: String
    public var result: Result
    /// Why it refused or was not reached.
    public var detail: String?

    /// The document counts as handed over: the terminal took it or holds it already.
    public var holdsIt: Bool { result == .took || result == .alreadyHeld }

    /// Hands `document` (a signed envelope's bytes) to `terminal`; blocks up to `timeout` seconds.
    public static func offer(_ document: [UInt8], site: String, to terminal: TerminalAddress, timeout: Double) -> PublishOutcome {
        let (result, detail): (Result, String?) = switch SiteTransfer.exchange(.offer(site: site, document: document), with: terminal.endpoint, timeout: timeout) {
        case .success(.adopted): (.took, nil)
        case .success(.alreadyHeld): (.alreadyHeld, nil)
        case .success(.refused(let reason)): (.refused, reason)
        case .success(.otherSite): (.otherSite, "is not a terminal of site \(site)")
        case .success(.busy): (.busy, "busy; try again")
        case .success(let other): (.refused, "answered \(other)")
        case .failure(let error): (.unreached, "\(error)")
        }
        return PublishOutcome(room: terminal.name, endpoint: "\(terminal.endpoint)", result: result, detail: detail)
    }
}
