// A parsed packet describes where things are in the caller's buffer instead of copying them,
// so parsing never allocates and the audio thread can call it.

/// The result of a successful parse: header fields plus offsets into the parsed buffer.
public struct RTPPacket: Sendable, Equatable {
    /// The fixed header fields.
    public var header: RTPHeader
    /// Header extension profile (RFC 3550 5.3.1), 0 when `header.hasExtension` is false.
    public var extensionProfile: UInt16
    /// Header extension length in 32-bit words, excluding its 4-byte preamble; 0 without extension.
    public var extensionLengthWords: UInt16
    /// Byte offset of the extension data (after its 4-byte preamble); equals the end of the CSRCs without extension.
    public var extensionDataOffset: Int
    /// Byte offset of the payload within the parsed buffer.
    public var payloadOffset: Int
    /// Payload length in bytes, padding excluded; always at least 1.
    public var payloadLength: Int
    /// Number of padding bytes at the end of the packet (including the count byte), 0 without padding.
    public var paddingLength: Int

    /// The payload as a range of byte offsets within the parsed buffer.
    public var payloadRange: Range<Int> { payloadOffset..<(payloadOffset + payloadLength) }

    /// Number of CSRC identifiers in the packet.
    public var csrcCount: Int { Int(header.csrcCount) }

    /// Reads CSRC number `index` (0 ..< csrcCount) from the buffer this packet was parsed from.
    public func csrc(at index: Int, in buffer: UnsafeRawBufferPointer) -> UInt32 {
        precondition(index >= 0 && index < csrcCount, "CSRC index out of range")
        return buffer.readUInt32BE(at: RTPHeader.fixedLength + 4 * index)
    }

    /// The payload bytes as a view of the buffer this packet was parsed from (no copy).
    public func payload(in buffer: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: buffer[payloadRange])
    }
}
