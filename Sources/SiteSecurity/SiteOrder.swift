import Crypto
import Posix
import Foundation

/// An order from the site's administrator to one terminal, carried over the terminal's site
/// transfer port (`SiteTransfer.Request.order`): run the device loopback test, give its result,
/// give the room's history (sealed to `replyKey`: `OrderReplySeal`).
/// Signed with the administrator key (who may sign site documents may give one), for one site and
/// one room (it is good at that terminal only), fresh (`SiteOrderGuard`: issued within
/// `maximumAge` of the terminal's clock) and taken once (its nonce is remembered while it is fresh).
public struct SiteOrder: Codable, Sendable, Equatable {
    public enum Action: String, Codable, Sendable, CaseIterable {
        /// Start the device round-trip test (a chirp from the speaker, heard by the microphone).
        case loopback
        /// The test's state, and its result once done.
        case loopbackResult = "loopback_result"
        /// The room's history of calls and notifications, sealed to `replyKey`.
        case history
    }

    public var site: String
    public var room: String
    public var action: Action
    /// Unix time, seconds.
    public var issuedAt: Double
    /// 16 random bytes, hex: two orders issued in the same second are still two.
    public var nonce: String
    /// The one-time X25519 public key (base64) the reply is sealed to; nil: a reply anyone on the
    /// network may read (the loopback test's).
    public var replyKey: String?

    public init(site: String, room: String, action: Action, issuedAt: Double, nonce: String = SiteOrder.newNonce(), replyKey: String? = nil) {
        self.site = site
        self.room = room
        self.action = action
        self.issuedAt = issuedAt
        self.nonce = nonce
        self.replyKey = replyKey
    }

    public static func newNonce() -> String { SymmetricKey(size: .bits128).withUnsafeBytes { Array($0) }.hexDigits }
}

/// A `SiteOrder` as it travels: its JSON exactly as signed, then the 64-byte Ed25519 signature
/// over a domain label and that JSON.
public enum SignedSiteOrder {
    static let domain = Array("intercomd site order v1\0".utf8)
    static let signatureBytes = 64
    /// An order's JSON is a few hundred bytes; anything much larger is not one.
    public static let maximumBytes = 2048

    public static func sign(_ order: SiteOrder, with key: AdministratorKey) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let body = [UInt8](try! encoder.encode(order))  // plain fields: encoding cannot fail
        return body + key.sign(domain + body)
    }

    /// The order `bytes` carry, if the administrator key `verifier` names signed it.
    public static func open(_ bytes: [UInt8], verifier: SiteVerifier) -> Result<SiteOrder, SiteOrderRefusal> {
        guard bytes.count > signatureBytes, bytes.count <= maximumBytes else { return .failure(.malformed) }
        let body = Array(bytes.dropLast(signatureBytes)), signature = Array(bytes.suffix(signatureBytes))
        guard verifier.isValid(signature: signature, for: domain + body) else { return .failure(.badSignature) }
        guard let order = try? JSONDecoder().decode(SiteOrder.self, from: Data(body)) else { return .failure(.malformed) }
        return .success(order)
    }
}

/// Why a terminal refused an order (counted, and said in the reply).
public enum SiteOrderRefusal: String, Sendable, Error, CaseIterable {
    case malformed
    case badSignature = "bad-signature"
    case otherSite = "other-site"
    case otherRoom = "other-room"
    /// Issued more than `SiteOrderGuard.maximumAge` before or after the terminal's clock.
    case stale
    /// Its nonce was taken already.
    case replayed
}

/// What a terminal checks of an order besides its signature: its site and room, that it is fresh,
/// and that its nonce was not taken before. Deterministic (the time comes in): tests drive it.
public struct SiteOrderGuard: Sendable {
    /// How far an order's time may be from the terminal's clock, seconds: the service signs it
    /// just before sending, and a practice's boxes keep time by NTP.
    public static let maximumAge = 120.0
    /// Nonces are remembered while their orders are fresh (at most this many: an order flood
    /// cannot grow memory; the oldest are forgotten first, and they are stale by then).
    public static let capacity = 256

    public let site: String
    public let room: String
    private var seen: [(nonce: String, issuedAt: Double)] = []

    public init(site: String, room: String) {
        self.site = site
        self.room = room
    }

    /// Takes `order` at wall-clock time `now`, or says why not. A taken order's nonce is never
    /// taken again.
    public mutating func take(_ order: SiteOrder, now: Double) -> Result<SiteOrder, SiteOrderRefusal> {
        guard order.site == site else { return .failure(.otherSite) }
        guard order.room == room else { return .failure(.otherRoom) }
        guard abs(now - order.issuedAt) <= Self.maximumAge else { return .failure(.stale) }
        seen.removeAll { abs(now - $0.issuedAt) > Self.maximumAge }
        guard !seen.contains(where: { $0.nonce == order.nonce }) else { return .failure(.replayed) }
        if seen.count >= Self.capacity { seen.removeFirst() }
        seen.append((order.nonce, order.issuedAt))
        return .success(order)
    }
}
