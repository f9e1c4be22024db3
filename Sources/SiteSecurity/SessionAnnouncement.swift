/// A terminal's signed word about its current session key (docs/identity.md): its room, an order
/// that only grows (its boot count, kept on disk, then one per announcement) and the X25519
/// public key its peers agree their pairwise keys with, signed by its identity key. Sent in the
/// clear: it holds nothing secret, and a peer takes it only under the key the site document
/// approves for that room. No clock enters: a higher order is newer. It also names the site
/// document the sender holds (as its hellos do), opaque here: a terminal that cannot open the
/// sender's hellos (still on the site key, or pending) learns from it that a version is there to
/// fetch; the document itself is the administrator's to vouch for.
///
/// Wire: "IA", version 2, room length n (1-64), the room id (n bytes), boot (8 bytes, big
/// endian), count (8), the site document's stamp (20; zeros: none), the session key (32), the
/// signature (64) over a domain label and all before it.
public struct SessionAnnouncement: Sendable, Equatable {
    public let room: String
    public let boot: UInt64
    public let count: UInt64
    /// The sender's site document stamp, `siteBytes` long (zeros: none).
    public let site: [UInt8]
    public let sessionKey: [UInt8]
    public let signature: [UInt8]

    static let magic: [UInt8] = [0x49, 0x41]  // "IA"
    static let version: UInt8 = 2
    public static let siteBytes = 20
    public static let noSite = [UInt8](repeating: 0, count: siteBytes)

    init(room: String, boot: UInt64, count: UInt64, site: [UInt8], sessionKey: [UInt8], signedWith identity: TerminalIdentity) {
        precondition(site.count == Self.siteBytes, "a site stamp is \(Self.siteBytes) bytes")
        self.room = room
        self.boot = boot
        self.count = count
        self.site = site
        self.sessionKey = sessionKey
        signature = identity.sign(Self.signedMessage(Self.body(room: room, boot: boot, count: count, site: site, sessionKey: sessionKey)))
    }

    private init(room: String, boot: UInt64, count: UInt64, site: [UInt8], sessionKey: [UInt8], signature: [UInt8]) {
        self.room = room
        self.boot = boot
        self.count = count
        self.site = site
        self.sessionKey = sessionKey
        self.signature = signature
    }

    /// Which of two announcements of one terminal is newer.
    var order: Order { Order(boot: boot, count: count) }

    struct Order: Comparable, Sendable {
        var boot: UInt64, count: UInt64
        static func < (a: Order, b: Order) -> Bool { (a.boot, a.count) < (b.boot, b.count) }
        static let none = Order(boot: 0, count: 0)
    }

    public func encoded() -> [UInt8] { Self.body(room: room, boot: boot, count: count, site: site, sessionKey: sessionKey) + signature }

    /// Whether `bytes` start as an announcement does (then `decode` judges the rest).
    public static func looksLikeOne(_ bytes: [UInt8]) -> Bool { bytes.count >= 2 && bytes[0] == magic[0] && bytes[1] == magic[1] }

    /// The announcement in `bytes`; nil when it is not one whole (its signature is judged apart).
    public static func decode(_ bytes: [UInt8]) -> SessionAnnouncement? {
        guard looksLikeOne(bytes), bytes.count >= 4, bytes[2] == version else { return nil }
        let n = Int(bytes[3])
        guard (1...64).contains(n), bytes.count == 4 + n + 16 + siteBytes + 32 + 64,
              let room = String(validating: bytes[4..<(4 + n)], as: UTF8.self) else { return nil }
        func u64(_ at: Int) -> UInt64 { bytes[at..<(at + 8)].reduce(0) { $0 << 8 | UInt64($1) } }
        let siteAt = 4 + n + 16, keyAt = siteAt + siteBytes
        return SessionAnnouncement(room: room, boot: u64(4 + n), count: u64(4 + n + 8), site: Array(bytes[siteAt..<keyAt]),
                                   sessionKey: Array(bytes[keyAt..<(keyAt + 32)]), signature: Array(bytes[(keyAt + 32)...]))
    }

    func isSigned(by identity: PublicIdentity) -> Bool {
        identity.isValid(signature: signature, for: Self.signedMessage(Self.body(room: room, boot: boot, count: count, site: site, sessionKey: sessionKey)))
    }

    private static func body(room: String, boot: UInt64, count: UInt64, site: [UInt8], sessionKey: [UInt8]) -> [UInt8] {
        let id = Array(room.utf8)
        var out = magic + [version, UInt8(truncatingIfNeeded: id.count)] + id
        for value in [boot, count] { for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: value >> UInt64(shift))) } }
        return out + site + sessionKey
    }

    private static func signedMessage(_ body: [UInt8]) -> [UInt8] { Array("intercomd session announcement v2\0".utf8) + body }
}
