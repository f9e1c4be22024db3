// A call's media keys, agreed in its signalling (docs/identity.md): each terminal draws a fresh
// key for the stream it sends in a call and gives it, inside the sealed invite or accept, to the
// rooms that hear that stream, and to no one else. Signalling sealed per pair of terminals
// rides on session keys that are erased within the hour, so a terminal's long-term key taken
// later opens neither the signalling nor, through it, the call.

/// The SRTP master key and salt of one sender's stream in one call.
public struct MediaKey: Hashable, Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// 16 bytes of AES-128 master key, 14 of salt (SRTP's default profile).
    public static let length = 30

    public let bytes: [UInt8]

    /// nil unless `bytes` is `length` long.
    public init?(bytes: [UInt8]) {
        guard bytes.count == Self.length else { return nil }
        self.bytes = bytes
    }

    /// A new key from the system's cryptographic generator.
    public static func random() -> MediaKey {
        var generator = SystemRandomNumberGenerator()
        return MediaKey(bytes: (0..<length).map { _ in UInt8.random(in: .min ... .max, using: &generator) })!
    }

    // A key is never logged: every way of printing it prints this.
    public var description: String { "MediaKey(secret)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}

/// Where the engine gets a key for each stream it starts: the daemon draws a fresh one while
/// signalling is sealed per pair of terminals, and none before (site key: keys derived from it;
/// no key at all: media in the clear).
public protocol MediaKeySource: Sendable {
    func newKey() -> MediaKey?
}
