import Crypto
import Foundation
import Posix

/// A terminal's own key (Ed25519): made on the box's first start, kept in one file only the
/// service may read, never sent and never logged. Its public half (`PublicIdentity`) is what the
/// site document approves for a room; nothing any other terminal holds can speak as this one.
public struct TerminalIdentity: Sendable {
    let seed: [UInt8]

    /// A new key from the system's randomness.
    public init() { seed = Ed25519.newSeed() }

    public init(seed: [UInt8]) throws(SiteKeyError) {
        guard Ed25519.isSeed(seed) else { throw SiteKeyError("a terminal key is 32 bytes; this one has \(seed.count)") }
        self.seed = seed
    }

    /// Reads the key file; refuses one that group or others may read (a copy speaks as this box).
    public init(path: String) throws(SiteKeyError) {
        let bytes = try KeyFile.read(path, forbiddenModeBits: 0o077, fix: "chmod 0600 it")
        do { try self.init(seed: bytes) } catch { throw SiteKeyError("\(path): \(error.description)") }
    }

    /// The key in `path`, or a new one written there (mode 0600, atomically) when there is none
    /// yet: a terminal's first start. An existing file that cannot be read is an error, never
    /// replaced: a new key would undo the box's approval.
    public static func loadOrCreate(path: String) throws(SiteKeyError) -> (identity: TerminalIdentity, created: Bool) {
        if access(path, F_OK) == 0 { return (try TerminalIdentity(path: path), false) }
        let fresh = TerminalIdentity()
        try KeyFile.create(path, text: Data(fresh.seed).base64EncodedString(), mode: 0o600)
        return (fresh, true)
    }

    /// The key in `path`, or nil when there is none yet (a check must not make one).
    public static func loadIfPresent(path: String) throws(SiteKeyError) -> TerminalIdentity? {
        access(path, F_OK) == 0 ? try TerminalIdentity(path: path) : nil
    }

    public var publicIdentity: PublicIdentity { try! PublicIdentity(key: Ed25519.publicKey(seed: seed)) }  // a checked seed

    public func sign(_ message: [UInt8]) -> [UInt8] { Ed25519.sign(message, seed: seed) }
}

/// A terminal's public key: who a site document approves for a room, and who signed a terminal's
/// announcement. Written as base64 in documents and requests.
public struct PublicIdentity: Sendable, Hashable, CustomStringConvertible {
    public let key: [UInt8]

    public init(key: [UInt8]) throws(SiteKeyError) {
        guard Ed25519.isPublicKey(key) else {
            throw SiteKeyError("a terminal's public key is 32 bytes of a valid key; this one has \(key.count) bytes")
        }
        self.key = key
    }

    /// From its base64 text (a document's or a request's).
    public init(text: String) throws(SiteKeyError) {
        guard let bytes = Data(base64Encoded: text) else { throw SiteKeyError("a terminal's public key is base64; \"\(text.prefix(60))\" is not") }
        try self.init(key: [UInt8](bytes))
    }

    public var text: String { Data(key).base64EncodedString() }

    /// The first 8 bytes of its SHA-256, hex: how logs, status and the tool name a terminal.
    public var fingerprint: String { Ed25519.fingerprint(key) }
    public var description: String { fingerprint }

    public func isValid(signature: [UInt8], for message: [UInt8]) -> Bool {
        Ed25519.isValid(signature, for: message, publicKey: key)
    }

    /// The code an installer reads at the pending terminal and the administrator types to approve
    /// it: made from this key and the site id, so that a box with another key has another code.
    public func enrolmentCode(site: String) -> EnrolmentCode {
        var input = Array("intercomd enrolment code v1\0".utf8)
        let siteBytes = Array(site.utf8)
        input += [UInt8(truncatingIfNeeded: siteBytes.count)] + siteBytes + key
        let digest = Array(SHA256.hash(data: input))
        var value: UInt64 = 0
        for b in digest.prefix(8) { value = value << 8 | UInt64(b) }
        // 2^64 is 1.8e7 times 10^12: the bias of the remainder is below one in ten million.
        return EnrolmentCode(value: value % EnrolmentCode.modulus)
    }
}

/// Twelve decimal digits, written and spoken in four groups of three ("482 193 775 020"). Long
/// enough that making a key with a given code takes about 10^12 key pairs (days of one core);
/// short enough to read out at a wall terminal.
public struct EnrolmentCode: Sendable, Hashable, CustomStringConvertible {
    public static let digits = 12
    static let modulus: UInt64 = 1_000_000_000_000
    let value: UInt64

    init(value: UInt64) { self.value = value }

    /// A code as someone typed it: 12 digits; spaces, dashes and dots between them are ignored.
    public init?(typed: String) {
        let kept = typed.filter { !" -.\t".contains($0) }
        guard kept.count == Self.digits, kept.allSatisfy({ $0.isASCII && $0.isNumber }), let v = UInt64(kept) else { return nil }
        value = v
    }

    public var description: String {
        let d = String(value).leftPadded(to: Self.digits)
        return stride(from: 0, to: Self.digits, by: 3).map { i in
            String(d[d.index(d.startIndex, offsetBy: i)..<d.index(d.startIndex, offsetBy: i + 3)])
        }.joined(separator: " ")
    }

    /// The text a speech synthesizer reads: digit by digit, a pause between the groups.
    public var spoken: String {
        description.split(separator: " ").map { $0.map(String.init).joined(separator: " ") }.joined(separator: ", ")
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
