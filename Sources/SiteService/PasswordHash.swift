import Crypto
import _CryptoExtras
import Foundation

/// A password kept as its scrypt hash (memory-hard: a stolen database costs an attacker 32 MiB and
/// about a tenth of a second per guess): `scrypt$<log2 N>$<r>$<p>$<salt>$<hash>`, base64.
public enum PasswordHash {
    /// scrypt's cost: N = 2^15, r = 8, p = 1 (32 MiB), RFC 7914's interactive-login figure.
    public struct Cost: Sendable, Equatable {
        public var logN: Int
        public var r: Int
        public var p: Int
        public static let standard = Cost(logN: 15, r: 8, p: 1)
    }

    /// Passwords shorter than this are refused when set.
    public static let minimumLength = 10

    public static func make(_ password: String, cost: Cost = .standard) throws -> String {
        let salt = SymmetricKey(size: .bits128).withUnsafeBytes { Data($0) }
        let hash = try derive(password, salt: salt, cost: cost)
        return "scrypt$\(cost.logN)$\(cost.r)$\(cost.p)$\(salt.base64EncodedString())$\(hash.base64EncodedString())"
    }

    /// Whether `password` is the one `stored` was made from; false for anything not a hash of ours.
    public static func verify(_ password: String, against stored: String) -> Bool {
        let parts = stored.split(separator: "$", omittingEmptySubsequences: false)
        guard parts.count == 6, parts[0] == "scrypt", let logN = Int(parts[1]), let r = Int(parts[2]), let p = Int(parts[3]),
              (10...20).contains(logN), (1...16).contains(r), (1...4).contains(p),
              let salt = Data(base64Encoded: String(parts[4])), let expected = Data(base64Encoded: String(parts[5])), expected.count == 32,
              let actual = try? derive(password, salt: salt, cost: Cost(logN: logN, r: r, p: p))
        else { return false }
        // Every byte compared, whatever the first difference: the time says nothing of where it is.
        var difference: UInt8 = 0
        for (a, b) in zip(actual, expected) { difference |= a ^ b }
        return difference == 0
    }

    private static func derive(_ password: String, salt: Data, cost: Cost) throws -> Data {
        let key = try KDF.Scrypt.deriveKey(from: Array(password.utf8), salt: salt, outputByteCount: 32, rounds: 1 << cost.logN,
                                           blockSize: cost.r, parallelism: cost.p, maxMemory: 64 << 20)
        return key.withUnsafeBytes { Data($0) }
    }
}
