import Crypto
import Foundation
import Posix

/// A site document as it travels between terminals and as each keeps it on disk: the document's
/// bytes exactly as the administrator signed them, with the site they belong to, their version and
/// the signature (JSON; `body` and `signature` base64). The one wire type for a site document.
public struct SignedSiteDocument: Codable, Sendable, Equatable {
    /// The envelope's format; a terminal refuses formats it does not know.
    public var format: Int
    /// The site's id: a document for another practice is refused even when well signed.
    public var site: String
    /// Grows with every change the administrator signs; a terminal never goes back.
    public var version: UInt64
    /// The document itself (TOML text), untouched since it was signed.
    public var body: Data
    /// Ed25519 over `signedMessage` (domain, site, version, body).
    public var signature: Data
    /// The administrator's key handovers since the site's first key, oldest first; nil: none
    /// (and absent from the JSON, as in documents from before re-keying).
    public var handovers: [KeyHandover]?

    public static let currentFormat = 1
    /// Larger envelopes are refused before they are decoded. A 50-room site is about 40 KB.
    public static let maximumBytes = 512 * 1024

    /// Signs `body` as version `version` of `site`, carrying the key's `handovers`.
    public init(site: String, version: UInt64, body: [UInt8], signedWith key: AdministratorKey, handovers: [KeyHandover] = []) {
        format = Self.currentFormat
        self.site = site
        self.version = version
        self.body = Data(body)
        signature = Data(key.sign(Self.signedMessage(site: site, version: version, body: body)))
        self.handovers = handovers.isEmpty ? nil : handovers
    }

    /// What the signature covers: a domain label, then each field with its length, so that no
    /// two different (site, version, body) triples sign the same bytes.
    static func signedMessage(site: String, version: UInt64, body: [UInt8]) -> [UInt8] {
        var message = Array("intercomd site document v1\0".utf8)
        let siteBytes = Array(site.utf8)
        message += bigEndianBytes(UInt64(siteBytes.count)) + siteBytes
        message += bigEndianBytes(version)
        message += bigEndianBytes(UInt64(body.count)) + body
        return message
    }

    static func bigEndianBytes(_ value: UInt64) -> [UInt8] {
        (0..<8).map { UInt8(truncatingIfNeeded: value >> (56 - 8 * $0)) }
    }

    /// The envelope as it is sent and stored.
    public func encoded() -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return [UInt8](try! encoder.encode(self))  // plain fields: encoding cannot fail
    }

    /// SHA-256 of the encoded envelope, hex: names one exact document in announcements and logs.
    public static func digest(of encoded: [UInt8]) -> String {
        SHA256.hash(data: encoded).hexDigits
    }

    /// Reads and checks an envelope whole: size, JSON, format, site, key handovers, signature.
    /// `verifier` is the key the holder trusts; the document's handovers may lead from it to a
    /// newer one, which must have signed it and is returned as `signer`. The version is the
    /// holder's to judge (`SiteDocumentGate`).
    public static func open(_ bytes: [UInt8], site: String, verifier: SiteVerifier)
        -> Result<(document: SignedSiteDocument, signer: SiteVerifier), SiteDocumentRefusal> {
        guard bytes.count <= maximumBytes else { return .failure(.oversized) }
        guard let document = try? JSONDecoder().decode(SignedSiteDocument.self, from: Data(bytes)) else {
            return .failure(.malformed)
        }
        guard document.format == currentFormat else { return .failure(.unknownFormat) }
        guard document.site == site else { return .failure(.otherSite) }
        guard !document.signature.isEmpty else { return .failure(.unsigned) }
        guard let signer = KeyHandover.follow(document.handovers ?? [], site: site, from: verifier) else {
            return .failure(.badHandover)
        }
        let message = signedMessage(site: document.site, version: document.version, body: [UInt8](document.body))
        guard signer.isValid(signature: [UInt8](document.signature), for: message) else { return .failure(.badSignature) }
        return .success((document, signer))
    }
}

/// Why a terminal refused a site document. Each is counted; none replaces the last good document.
public enum SiteDocumentRefusal: String, Error, Sendable, CaseIterable, Codable {
    /// Larger than `SignedSiteDocument.maximumBytes`.
    case oversized
    /// Fewer bytes arrived than the announcement said.
    case truncated
    /// Not an envelope (not JSON, fields missing or of the wrong type).
    case malformed
    /// An envelope format this terminal does not know.
    case unknownFormat
    /// Signed for another site.
    case otherSite
    /// No signature.
    case unsigned
    /// A signature the administrator's key did not make (a retired one's included), or a body
    /// changed after signing.
    case badSignature
    /// A key handover not signed by the key before it, a fork made with a retired key, or a
    /// chain longer than `KeyHandover.maximumChain`.
    case badHandover
    /// Older than the document held.
    case older
    /// The same version as the one held, with other contents: two documents signed under one
    /// version (an administrator's tool restored from a backup). Every terminal keeps the one
    /// with the greater digest, so that the site converges all the same.
    case conflicting
    /// Well signed, but the document inside does not read as a site (the reader's message is logged).
    case unreadable
}
