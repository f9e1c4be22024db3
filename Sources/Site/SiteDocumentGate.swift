import Calls
import SiteSecurity

/// Which site document a terminal holds, and whether an offered one replaces it. Commands in,
/// decisions out, no I/O: the caller keeps the file, applies the site and passes it on, so that
/// seeded simulations can drive many gates at once.
///
/// A document is adopted only when it is whole, signed by the site's administrator, for this site,
/// newer than the one held, and its body reads as a site; anything else is refused, counted by
/// reason, and described once (the first time that exact document is refused).
public struct SiteDocumentGate<Site: Sendable>: Sendable {
    /// The document a terminal runs by.
    public struct Held: Sendable {
        public let document: SignedSiteDocument
        /// The envelope's bytes as received: what is stored and passed on, unchanged.
        public let encoded: [UInt8]
        /// `SignedSiteDocument.digest(of: encoded)`.
        public let digest: String
        public let site: Site
        public var version: UInt64 { document.version }
        /// What the terminal's hellos say of it.
        public var stamp: SiteStamp {
            SiteStamp(version: version, digest: UInt64(digest.prefix(16), radix: 16) ?? 0, length: UInt32(encoded.count))
        }
    }

    public enum Decision: Sendable {
        /// A newer document: store it, apply it, announce it.
        case adopt(Held)
        /// The document held, offered again: nothing to do.
        case alreadyHeld
        /// Refused and counted; `describe` is the log line, set only the first time this exact
        /// document is refused (a peer repeating it must not flood the log).
        case refuse(SiteDocumentRefusal, describe: String?)
    }

    public let siteID: String
    /// The administrator's key trusted now: the configured one, then the newest a document
    /// adopted handed over to (`KeyHandover`). A retired key signs nothing this gate takes.
    public private(set) var verifier: SiteVerifier
    private let read: @Sendable ([UInt8]) -> Result<Site, SiteReadError>
    public private(set) var held: Held?
    public private(set) var refusals: [SiteDocumentRefusal: Int] = [:]
    // Digests already described, oldest first; bounded so that a stream of distinct bad
    // documents costs memory no more than it costs log lines.
    private var described: [String] = []
    static var describedLimit: Int { 64 }

    /// `read` turns a verified body into the typed site (or says why it cannot).
    public init(siteID: String, verifier: SiteVerifier, read: @escaping @Sendable ([UInt8]) -> Result<Site, SiteReadError>) {
        self.siteID = siteID
        self.verifier = verifier
        self.read = read
    }

    public var refusedTotal: Int { refusals.values.reduce(0, +) }

    /// Judges `bytes`, an encoded envelope from `source` (a terminal's id, a file, the
    /// administrator's tool). `announcedLength`, when the bytes were fetched after an announcement,
    /// is how many there should be.
    public mutating func offer(_ bytes: [UInt8], from source: String, announcedLength: Int? = nil) -> Decision {
        if let announcedLength, bytes.count < announcedLength {
            return refuse(.truncated, bytes, from: source, detail: "\(bytes.count) of \(announcedLength) bytes")
        }
        let document: SignedSiteDocument, signer: SiteVerifier
        switch SignedSiteDocument.open(bytes, site: siteID, verifier: verifier) {
        case .failure(let reason): return refuse(reason, bytes, from: source, detail: nil)
        case .success(let opened): (document, signer) = opened
        }
        let digest = SignedSiteDocument.digest(of: bytes)
        if let held {
            if document.version < held.version {
                return refuse(.older, bytes, from: source, detail: "version \(document.version), holding \(held.version)")
            }
            if document.version == held.version {
                if document == held.document { return .alreadyHeld }
                // Two documents signed under one version: every terminal keeps the same one
                // (the greater digest), so that the site still converges.
                if digest < held.digest {
                    return refuse(.conflicting, bytes, from: source, detail: "version \(document.version) with other contents than the one held")
                }
            }
        }
        switch read([UInt8](document.body)) {
        case .failure(let problem):
            return refuse(.unreadable, bytes, from: source, detail: "version \(document.version): \(problem.message)")
        case .success(let site):
            let adopted = Held(document: document, encoded: bytes, digest: digest, site: site)
            held = adopted
            verifier = signer
            return .adopt(adopted)
        }
    }

    private mutating func refuse(_ reason: SiteDocumentRefusal, _ bytes: [UInt8], from source: String, detail: String?) -> Decision {
        refusals[reason, default: 0] += 1
        let digest = SignedSiteDocument.digest(of: bytes)
        guard !described.contains(digest) else { return .refuse(reason, describe: nil) }
        described.append(digest)
        if described.count > Self.describedLimit { described.removeFirst() }
        let what = detail.map { " (\($0))" } ?? ""
        return .refuse(reason, describe: "site document from \(source) refused: \(reason.rawValue)\(what), sha256 \(digest.prefix(16))")
    }
}

/// Why a verified document's body does not read as a site: the reader's message, naming the key.
public struct SiteReadError: Error, Sendable, Equatable {
    public let message: String
    public init(_ message: String) { self.message = message }
}
