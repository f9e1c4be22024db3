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

    /// Its size on the wire.
    public static let byteCount = 20

    /// Its bytes as hellos and session announcements carry it (big endian: version, digest, length).
    public var bytes: [UInt8] {
        var out: [UInt8] = []
        for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: version >> UInt64(shift))) }
        for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: digest >> UInt64(shift))) }
        for shift in stride(from: 24, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: length >> UInt32(shift))) }
        return out
    }

    /// The stamp in those 20 bytes; nil for another length or version 0 (none).
    public init?(bytes: [UInt8]) {
        guard bytes.count == Self.byteCount else { return nil }
        func be(_ range: Range<Int>) -> UInt64 { bytes[range].reduce(0) { $0 << 8 | UInt64($1) } }
        guard be(0..<8) != 0 else { return nil }
        self.init(version: be(0..<8), digest: be(8..<16), length: UInt32(be(16..<20)))
    }

    /// Newer version first; of one version, the greater digest (as `SiteDocumentGate` keeps it).
    public static func < (a: SiteStamp, b: SiteStamp) -> Bool {
        (a.version, a.digest) < (b.version, b.digest)
    }
}

/// What a terminal says of itself in each directory-wide hello besides its presence: the software
/// it runs and the site document it holds, since when. Another terminal shows it (`intercomctl
/// site`) and tells from it who is behind.
public struct SiteAnnouncement: Sendable, Equatable, Hashable {
    /// The bound of `software` on the wire, UTF-8 bytes.
    public static let maxSoftwareBytes = 32
    public var software: String
    /// The site document held; nil: none (a terminal without a site).
    public var site: SiteStamp?
    /// When `site` was applied, seconds since 1970 (carried in milliseconds, 0 for nil); nil with
    /// no site, or while the document held waits to be applied.
    public var appliedAt: Double?

    public init(software: String, site: SiteStamp?, appliedAt: Double?) {
        self.software = software
        self.site = site
        self.appliedAt = site == nil ? nil : appliedAt
    }
}
