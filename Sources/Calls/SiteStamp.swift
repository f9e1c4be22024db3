/// What a terminal says of its site document in each hello: enough for another to tell that it is
/// behind, to fetch the document and to check that all of it came.
public struct SiteStamp: Sendable, Equatable, Hashable, Comparable {
    public var version: UInt64
    /// The first 8 bytes of the envelope's SHA-256, big-endian: tells two documents of one version apart.
    public var digest: UInt64
    /// The envelope's size in bytes.
    public var length: UInt32

    public init(version: UInt64, digest: UInt64, length: UInt32) {
        self.version = version
        self.digest = digest
        self.length = length
    }

    /// Newer version first; of one version, the greater digest (as `SiteDocumentGate` keeps it).
    public static func < (a: SiteStamp, b: SiteStamp) -> Bool {
        (a.version, a.digest) < (b.version, b.digest)
    }
}
