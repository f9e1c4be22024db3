import Crypto
import Foundation
import Posix

/// The site administrator's signing key (Ed25519, swift-crypto). It signs site documents and lives
/// only on the administrator's machine; terminals hold its public half (`SiteVerifier`), so a
/// stolen terminal can read its site but never change it.
public struct AdministratorKey: Sendable {
    // The 32-byte seed, not swift-crypto's key type: that is not Sendable on Linux.
    let seed: [UInt8]

    /// A new key from the system's randomness.
    public init() { seed = Ed25519.newSeed() }

    public init(seed: [UInt8]) throws(SiteKeyError) {
        guard Ed25519.isSeed(seed) else {
            throw SiteKeyError("an administrator key is 32 bytes; this one has \(seed.count)")
        }
        self.seed = seed
    }

    /// Reads a key file (one line, base64). Refuses a file group or others may read: whoever
    /// copies it can rewrite the whole site.
    public init(path: String) throws(SiteKeyError) {
        let bytes = try KeyFile.read(path, forbiddenModeBits: 0o077, fix: "chmod 0600 it")
        do { try self.init(seed: bytes) } catch { throw SiteKeyError("\(path): \(error.description)") }
    }

    /// Writes the key to `path` (mode 0600, atomically); an existing file is never replaced.
    public func write(to path: String) throws(SiteKeyError) {
        try KeyFile.create(path, text: Data(seed).base64EncodedString(), mode: 0o600)
    }

    /// What terminals check signatures with.
    public var verifier: SiteVerifier { try! SiteVerifier(publicKey: Ed25519.publicKey(seed: seed)) }  // a checked seed

    /// An Ed25519 signature of `message`.
    public func sign(_ message: [UInt8]) -> [UInt8] { Ed25519.sign(message, seed: seed) }
}

/// The administrator's public key, as each terminal holds it: it accepts a site document only
/// when this key signed it.
public struct SiteVerifier: Sendable, Equatable {
    public let publicKey: [UInt8]

    public init(publicKey: [UInt8]) throws(SiteKeyError) {
        guard Ed25519.isPublicKey(publicKey) else {
            throw SiteKeyError("an administrator public key is 32 bytes; this one has \(publicKey.count)")
        }
        self.publicKey = publicKey
    }

    /// Reads a public key file (one line, base64). It is no secret, but whoever may replace it
    /// decides which documents the terminal trusts: a file others may write is refused.
    public init(path: String) throws(SiteKeyError) {
        let bytes = try KeyFile.read(path, forbiddenModeBits: 0o022, fix: "chmod 0644 it")
        do { try self.init(publicKey: bytes) } catch { throw SiteKeyError("\(path): \(error.description)") }
    }

    /// Writes the public key to `path` (mode 0644, atomically); an existing file is never replaced.
    public func write(to path: String) throws(SiteKeyError) {
        try KeyFile.create(path, text: Data(publicKey).base64EncodedString(), mode: 0o644)
    }

    /// A short name for the key (the first 8 bytes of its SHA-256, hex): what status shows so that
    /// an administrator can compare terminals without reading keys.
    public var fingerprint: String { Ed25519.fingerprint(publicKey) }

    public func isValid(signature: [UInt8], for message: [UInt8]) -> Bool {
        Ed25519.isValid(signature, for: message, publicKey: publicKey)
    }
}

/// Key files: one line of base64, mode checked on read, created atomically and never overwritten.
enum KeyFile {
    /// The key's bytes; refused when the file's mode has any of `forbiddenModeBits`.
    static func read(_ path: String, forbiddenModeBits: mode_t, fix: String) throws(SiteKeyError) -> [UInt8] {
        var st = stat()
        guard stat(path, &st) == 0 else {
            throw SiteKeyError("\(path): \(String(cString: strerror(errno)))")
        }
        guard st.st_mode & forbiddenModeBits == 0 else {
            throw SiteKeyError("\(path): mode \(String(st.st_mode & 0o777, radix: 8)) is too open; \(fix)")
        }
        let bytes: [UInt8]?
        do { bytes = try WholeFile.read(path) } catch { throw SiteKeyError("\(path): \(error.cannotText)") }
        guard let bytes, let text = String(validating: bytes, as: UTF8.self) else {
            throw SiteKeyError("\(path): cannot be read as text")
        }
        guard let key = Data(base64Encoded: text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw SiteKeyError("\(path): not base64")
        }
        return [UInt8](key)
    }

    static func create(_ path: String, text: String, mode: mode_t) throws(SiteKeyError) {
        guard access(path, F_OK) != 0 else {
            throw SiteKeyError("\(path): exists already; a key file is never replaced (remove it first if you mean to)")
        }
        do {
            try WholeFile.replace(path, mode: mode, syncDirectory: true) { fd in
                try Array((text + "\n").utf8).withUnsafeBytes { try WholeFile.write(fd, $0) }
            }
        } catch let error as SystemError {
            throw SiteKeyError("\(path): \(error.cannotText)")
        } catch {
            throw SiteKeyError("\(path): \(error)")
        }
    }
}
