import Foundation

/// The administrator's key passing to a new one: the new public key signed by the old
/// (`intercom-site rekey`). Each signed site document carries the chain of handovers since the
/// site's first key, so a terminal that trusts any key of the chain follows it to the newest
/// without anyone touching the box, and from then on refuses what a retired key signs
/// (docs/site.md, "Re-keying"). The one wire type of a handover: a field of `SignedSiteDocument`.
public struct KeyHandover: Codable, Sendable, Equatable {
    /// The key handing over, and the key it hands over to (32 bytes each).
    public var from: Data
    public var to: Data
    /// Ed25519 by `from` over `signedMessage` (domain, site, from, to).
    public var signature: Data

    /// Longer chains are refused: a handover a year for decades. A site that reaches it gives its
    /// terminals the newest `administrator.pub` and starts a new chain.
    public static let maximumChain = 32

    /// `old` hands `site` over to `new`.
    public init(site: String, from old: AdministratorKey, to new: SiteVerifier) {
        from = Data(old.verifier.publicKey)
        to = Data(new.publicKey)
        signature = Data(old.sign(Self.signedMessage(site: site, from: old.verifier.publicKey, to: new.publicKey)))
    }

    static func signedMessage(site: String, from: [UInt8], to: [UInt8]) -> [UInt8] {
        let siteBytes = Array(site.utf8)
        return Array("intercomd administrator key handover v1\0".utf8)
            + SignedSiteDocument.bigEndianBytes(UInt64(siteBytes.count)) + siteBytes + from + to
    }

    /// The key a document must be signed by, for a terminal of `site` that trusts `trusted`:
    /// the chain followed from the handover `trusted` made, each link signed by the key before
    /// it; `trusted` itself when it made none. nil: the chain is too long, or a link from there
    /// on is not the key before it handing over (forged, or a fork made with a retired key).
    public static func follow(_ chain: [KeyHandover], site: String, from trusted: SiteVerifier) -> SiteVerifier? {
        guard chain.count <= maximumChain else { return nil }
        guard let start = chain.firstIndex(where: { [UInt8]($0.from) == trusted.publicKey }) else { return trusted }
        var current = trusted
        for link in chain[start...] {
            let to = [UInt8](link.to)
            guard [UInt8](link.from) == current.publicKey,
                  current.isValid(signature: [UInt8](link.signature), for: signedMessage(site: site, from: current.publicKey, to: to)),
                  let next = try? SiteVerifier(publicKey: to)
            else { return nil }
            current = next
        }
        return current
    }
}
