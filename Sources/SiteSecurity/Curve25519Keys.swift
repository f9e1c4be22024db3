import Crypto
import Posix

// swift-crypto's Curve25519 as the site's keys use it, on plain bytes: its key types are not
// Sendable on Linux, so the keys keep their 32-byte raw forms and make the library's types for
// each use. The one file that touches `Curve25519`.

/// Ed25519: the administrator's and each terminal's signing keys.
enum Ed25519 {
    static func newSeed() -> [UInt8] { [UInt8](Curve25519.Signing.PrivateKey().rawRepresentation) }

    static func isSeed(_ seed: [UInt8]) -> Bool {
        seed.count == 32 && (try? Curve25519.Signing.PrivateKey(rawRepresentation: seed)) != nil
    }

    static func isPublicKey(_ key: [UInt8]) -> Bool {
        key.count == 32 && (try? Curve25519.Signing.PublicKey(rawRepresentation: key)) != nil
    }

    /// The public half of a seed `isSeed` accepted.
    static func publicKey(seed: [UInt8]) -> [UInt8] {
        [UInt8](try! Curve25519.Signing.PrivateKey(rawRepresentation: seed).publicKey.rawRepresentation)
    }

    /// Signing fails only for a malformed seed, which the keys refuse when they are made.
    static func sign(_ message: [UInt8], seed: [UInt8]) -> [UInt8] {
        [UInt8](try! Curve25519.Signing.PrivateKey(rawRepresentation: seed).signature(for: message))
    }

    static func isValid(_ signature: [UInt8], for message: [UInt8], publicKey: [UInt8]) -> Bool {
        guard let key = try? Curve25519.Signing.PublicKey(rawRepresentation: publicKey) else { return false }
        return key.isValidSignature(signature, for: message)
    }

    /// A short name for a public key (the first 8 bytes of its SHA-256, hex), for status and logs.
    static func fingerprint(_ publicKey: [UInt8]) -> String { SHA256.hash(data: publicKey).prefix(8).hexDigits }
}

/// X25519: a terminal's session keys, from which it agrees a key with each peer (`TerminalSeal`).
enum X25519 {
    static func newPrivateKey() -> [UInt8] { [UInt8](Curve25519.KeyAgreement.PrivateKey().rawRepresentation) }

    static func isPrivateKey(_ key: [UInt8]) -> Bool {
        key.count == 32 && (try? Curve25519.KeyAgreement.PrivateKey(rawRepresentation: key)) != nil
    }

    /// The public half of a key `isPrivateKey` accepted.
    static func publicKey(_ privateKey: [UInt8]) -> [UInt8] {
        [UInt8](try! Curve25519.KeyAgreement.PrivateKey(rawRepresentation: privateKey).publicKey.rawRepresentation)
    }

    /// The shared secret of `privateKey` and a peer's `publicKey`; nil for a public key that is
    /// not one (or one of the few that agree on nothing).
    static func sharedSecret(_ privateKey: [UInt8], _ publicKey: [UInt8]) -> SharedSecret? {
        guard publicKey.count == 32, let peer = try? Curve25519.KeyAgreement.PublicKey(rawRepresentation: publicKey) else { return nil }
        return try? Curve25519.KeyAgreement.PrivateKey(rawRepresentation: privateKey).sharedSecretFromKeyAgreement(with: peer)
    }
}
