import Crypto
import Posix

/// Ed25519 as the site's keys use it (swift-crypto), on plain bytes: swift-crypto's key types are
/// not Sendable on Linux, so the keys keep their 32-byte seeds and public halves and make the
/// library's types for each use. The one place that touches `Curve25519.Signing`.
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
