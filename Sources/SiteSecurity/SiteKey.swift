import Crypto
import Foundation

/// The one secret of a site: every terminal has the same file, readable only by the service.
/// Keys for each purpose are derived from it (HKDF-SHA256), never used directly, so that a key
/// for one purpose says nothing about another.
public struct SiteKey: Sendable {
    // Bytes, not a SymmetricKey: swift-crypto's key type is not Sendable on Linux.
    let material: [UInt8]

    /// At least 32 bytes of randomness; the file holds them base64-encoded (one line, as
    /// `head -c 32 /dev/urandom | base64` writes it).
    public static let minimumBytes = 32

    public init(bytes: [UInt8]) throws(SiteKeyError) {
        guard bytes.count >= Self.minimumBytes else {
            throw SiteKeyError("the site key has \(bytes.count) bytes; it needs at least \(Self.minimumBytes)")
        }
        material = bytes
    }

    /// Reads a key file. Refuses one that others than its owner and group may read: a key any
    /// user of the terminal could copy protects nothing.
    public init(path: String) throws(SiteKeyError) {
        var st = stat()
        guard stat(path, &st) == 0 else {
            throw SiteKeyError("\(path): \(String(cString: strerror(errno)))")
        }
        guard st.st_mode & 0o007 == 0 else {
            throw SiteKeyError("\(path): readable by every user (mode \(String(st.st_mode & 0o777, radix: 8))); chmod 0640 it")
        }
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw SiteKeyError("\(path): cannot be read as text")
        }
        guard let data = Data(base64Encoded: text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw SiteKeyError("\(path): not base64 (make one with: head -c 32 /dev/urandom | base64)")
        }
        try self.init(bytes: [UInt8](data))
    }

    /// A 32-byte key for one purpose, e.g. "signalling v1 from empfang".
    public func derive(_ purpose: String) -> [UInt8] {
        let key = HKDF<SHA256>.deriveKey(inputKeyMaterial: SymmetricKey(data: material), salt: Data("intercomd site key".utf8),
                                         info: Data(purpose.utf8), outputByteCount: 32)
        return key.withUnsafeBytes { [UInt8]($0) }
    }
}

public struct SiteKeyError: Error, CustomStringConvertible, Equatable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
