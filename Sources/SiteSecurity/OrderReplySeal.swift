import Crypto
import Foundation

/// An order's reply that only the service may read (the history of a room: who called whom,
/// when): HPKE (RFC 9180: X25519, HKDF-SHA256, ChaCha20-Poly1305, swift-crypto) to the one-time
/// key the signed order names (`SiteOrder.replyKey`), bound to the order's nonce. The terminal
/// cannot be made to seal to anyone else: the key is in what the administrator signed.
public enum OrderReplySeal {
    static let encapsulatedBytes = 32

    static func info(_ order: SiteOrder) -> Data { Data(Array("intercomd site order reply v1\0".utf8) + Array(order.nonce.utf8)) }

    /// A key pair for one order; the private half never leaves the service's memory.
    public struct OneTimeKey: Sendable {
        let privateKey: [UInt8]

        public init() { privateKey = X25519.newPrivateKey() }

        /// For `SiteOrder.replyKey`.
        public var publicKeyBase64: String { Data(X25519.publicKey(privateKey)).base64EncodedString() }
    }

    /// `plaintext` sealed to the order's reply key; nil when the order names none (or not a key).
    public static func seal(_ plaintext: [UInt8], for order: SiteOrder) -> [UInt8]? {
        guard let text = order.replyKey, let raw = Data(base64Encoded: text), raw.count == 32,
              let recipient = try? Curve25519.KeyAgreement.PublicKey(rawRepresentation: raw),
              var sender = try? HPKE.Sender(recipientKey: recipient, ciphersuite: .Curve25519_SHA256_ChachaPoly, info: info(order)),
              let sealed = try? sender.seal(plaintext) else { return nil }
        return Array(sender.encapsulatedKey) + Array(sealed)
    }

    /// What `seal` sealed for `order` to `key`'s public half; nil if anything else.
    public static func open(_ bytes: [UInt8], with key: OneTimeKey, for order: SiteOrder) -> [UInt8]? {
        guard bytes.count > encapsulatedBytes,
              let privateKey = try? Curve25519.KeyAgreement.PrivateKey(rawRepresentation: key.privateKey),
              var recipient = try? HPKE.Recipient(privateKey: privateKey, ciphersuite: .Curve25519_SHA256_ChachaPoly, info: info(order),
                                                  encapsulatedKey: Data(bytes.prefix(encapsulatedBytes))),
              let plain = try? recipient.open(Data(bytes.dropFirst(encapsulatedBytes))) else { return nil }
        return Array(plain)
    }
}
