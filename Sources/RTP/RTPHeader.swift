// The fixed RTP header (RFC 3550 section 5.1): twelve bytes in front of every packet.

/// The fields of the fixed 12-byte RTP header; the version is always 2 (`RTPHeader.version`).
public struct RTPHeader: Sendable, Equatable {
    /// The only RTP version this module reads or writes.
    public static let version: UInt8 = 2
    /// Length of the fixed header in bytes, without CSRCs or extension.
    public static let fixedLength = 12

    /// P bit: the packet ends with padding whose last byte counts the padding bytes.
    public var padding: Bool
    /// X bit: one header extension follows the CSRC list.
    public var hasExtension: Bool
    /// CC field: number of 32-bit CSRC identifiers after the fixed header (0-15).
    public var csrcCount: UInt8
    /// M bit: for audio, the first packet of a talk spurt.
    public var marker: Bool
    /// PT field (7 bits): Opus uses a dynamic type, 96-127.
    public var payloadType: UInt8
    /// Sequence number: +1 per packet, wrapping.
    public var sequence: UInt16
    /// Media timestamp in clock-rate units (48 kHz for Opus), wrapping.
    public var timestamp: UInt32
    /// Synchronization source identifier of the sender.
    public var ssrc: UInt32

    /// Creates a header; flags and CSRC count default to the plain 12-byte form the writer emits.
    public init(
        padding: Bool = false, hasExtension: Bool = false, csrcCount: UInt8 = 0, marker: Bool = false,
        payloadType: UInt8, sequence: UInt16, timestamp: UInt32, ssrc: UInt32
    ) {
        self.padding = padding
        self.hasExtension = hasExtension
        self.csrcCount = csrcCount
        self.marker = marker
        self.payloadType = payloadType
        self.sequence = sequence
        self.timestamp = timestamp
        self.ssrc = ssrc
    }
}
