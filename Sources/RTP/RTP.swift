// RTP (RFC 3550) as a terminal speaking Opus needs it: the fixed header, writing it, strictly
// parsing what the network delivers, and numbering one stream. Nothing here allocates, so the
// network and audio threads call it directly.

// MARK: The fixed header (RFC 3550 5.1): twelve bytes in front of every packet.

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

// MARK: Writing. Only the plain 12-byte header (no CSRCs, no extension, no padding): that is all a
// terminal sending its own microphone needs, and it keeps the sending path free of length bookkeeping.

/// Why `RTPWriter` could not write a packet.
public enum RTPWriteError: Error, CaseIterable, Sendable, Equatable, CustomStringConvertible {
    /// The destination is smaller than header plus payload.
    case bufferTooSmall
    /// The header asks for CSRCs, an extension or padding, which the writer does not emit.
    case unsupportedHeader
    /// The payload type does not fit in 7 bits.
    case invalidPayloadType
    /// The payload is empty; a zero-length Opus payload is invalid.
    case emptyPayload

    /// A short, static text for logs.
    public var description: String {
        switch self {
        case .bufferTooSmall: "destination buffer too small"
        case .unsupportedHeader: "CSRCs, extension or padding are not written"
        case .invalidPayloadType: "payload type does not fit in 7 bits"
        case .emptyPayload: "empty payload"
        }
    }
}

/// Builds RTP packets into caller-provided buffers without allocating.
public enum RTPWriter {
    /// Writes the 12-byte header at the start of `buffer`; returns the header length (12).
    /// Lets an encoder write its payload in place at offset 12 without a copy.
    public static func writeHeader(
        _ header: RTPHeader, into buffer: UnsafeMutableRawBufferPointer
    ) -> Result<Int, RTPWriteError> {
        guard !header.padding, !header.hasExtension, header.csrcCount == 0 else {
            return .failure(.unsupportedHeader)
        }
        guard header.payloadType <= 0x7F else { return .failure(.invalidPayloadType) }
        guard buffer.count >= RTPHeader.fixedLength else { return .failure(.bufferTooSmall) }
        buffer[0] = RTPHeader.version << 6
        buffer[1] = (header.marker ? 0x80 : 0) | header.payloadType
        buffer.writeUInt16BE(header.sequence, at: 2)
        buffer.writeUInt32BE(header.timestamp, at: 4)
        buffer.writeUInt32BE(header.ssrc, at: 8)
        return .success(RTPHeader.fixedLength)
    }

    /// Writes header and payload into `buffer`; returns the packet length.
    public static func write(
        _ header: RTPHeader, payload: UnsafeRawBufferPointer, into buffer: UnsafeMutableRawBufferPointer
    ) -> Result<Int, RTPWriteError> {
        guard payload.count > 0 else { return .failure(.emptyPayload) }
        guard buffer.count >= RTPHeader.fixedLength + payload.count else { return .failure(.bufferTooSmall) }
        switch writeHeader(header, into: buffer) {
        case .failure(let error):
            return .failure(error)
        case .success(let headerLength):
            UnsafeMutableRawBufferPointer(rebasing: buffer[headerLength...]).copyMemory(from: payload)
            return .success(headerLength + payload.count)
        }
    }
}

// MARK: Parsing (RFC 3550 5). Every length field is checked against the datagram before it is
// used: datagrams come from the network and may be hostile or truncated. A parsed packet names
// where things are in the caller's buffer instead of copying them.

/// Parses RTP datagrams without copying or allocating.
public enum RTPParser {
    /// Parses `buffer`; when `expectedPayloadType` is given, any other payload type is rejected.
    public static func parse(
        _ buffer: UnsafeRawBufferPointer, expectedPayloadType: UInt8? = nil
    ) -> Result<RTPPacket, RTPParseError> {
        let count = buffer.count
        guard count >= RTPHeader.fixedLength else { return .failure(.truncatedHeader) }

        let b0 = buffer[0]
        let b1 = buffer[1]
        guard b0 >> 6 == RTPHeader.version else { return .failure(.unsupportedVersion) }
        let header = RTPHeader(
            padding: b0 & 0x20 != 0,
            hasExtension: b0 & 0x10 != 0,
            csrcCount: b0 & 0x0F,
            marker: b1 & 0x80 != 0,
            payloadType: b1 & 0x7F,
            sequence: buffer.readUInt16BE(at: 2),
            timestamp: buffer.readUInt32BE(at: 4),
            ssrc: buffer.readUInt32BE(at: 8))

        // Offsets stay small (at most 12 + 60 + 4 + 4 * 65535), so Int arithmetic cannot overflow.
        var offset = RTPHeader.fixedLength + 4 * Int(header.csrcCount)
        guard offset <= count else { return .failure(.csrcPastEnd) }

        var extensionProfile: UInt16 = 0
        var extensionWords: UInt16 = 0
        if header.hasExtension {
            guard offset + 4 <= count else { return .failure(.extensionHeaderPastEnd) }
            extensionProfile = buffer.readUInt16BE(at: offset)
            extensionWords = buffer.readUInt16BE(at: offset + 2)
            offset += 4
            guard offset + 4 * Int(extensionWords) <= count else { return .failure(.extensionPastEnd) }
        }
        let extensionDataOffset = offset
        offset += 4 * Int(extensionWords)

        // The last byte counts the padding, itself included (RFC 3550 5.1).
        var paddingLength = 0
        if header.padding {
            guard offset < count else { return .failure(.emptyPayload) }
            paddingLength = Int(buffer[count - 1])
            guard paddingLength != 0 else { return .failure(.zeroPadding) }
            guard paddingLength <= count - offset else { return .failure(.paddingTooLarge) }
        }
        let payloadLength = count - offset - paddingLength
        guard payloadLength > 0 else { return .failure(.emptyPayload) }

        if let expected = expectedPayloadType, expected != header.payloadType {
            return .failure(.unexpectedPayloadType)
        }
        return .success(RTPPacket(
            header: header,
            extensionProfile: extensionProfile,
            extensionLengthWords: extensionWords,
            extensionDataOffset: extensionDataOffset,
            payloadOffset: offset,
            payloadLength: payloadLength,
            paddingLength: paddingLength))
    }
}

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

// One case per rejection reason, so that callers can keep one counter per reason (`allCases`).

/// Why `RTPParser` rejected a datagram.
public enum RTPParseError: Error, CaseIterable, Sendable, Equatable, CustomStringConvertible {
    /// Fewer than 12 bytes: not even a fixed header.
    case truncatedHeader
    /// The version field is not 2.
    case unsupportedVersion
    /// The CSRC count runs past the end of the datagram.
    case csrcPastEnd
    /// The X bit is set but the 4-byte extension preamble runs past the end.
    case extensionHeaderPastEnd
    /// The extension length runs past the end of the datagram.
    case extensionPastEnd
    /// The P bit is set but the padding count byte is 0.
    case zeroPadding
    /// The padding count is larger than what follows the header.
    case paddingTooLarge
    /// Nothing is left for the payload; a zero-length Opus payload is invalid (RFC 7587 4.2).
    case emptyPayload
    /// The payload type is not the one the caller expects.
    case unexpectedPayloadType

    /// A short, static text for logs and statistics.
    public var description: String {
        switch self {
        case .truncatedHeader: "shorter than the 12-byte RTP header"
        case .unsupportedVersion: "RTP version is not 2"
        case .csrcPastEnd: "CSRC list runs past the end"
        case .extensionHeaderPastEnd: "header extension preamble runs past the end"
        case .extensionPastEnd: "header extension length runs past the end"
        case .zeroPadding: "padding bit set with padding count 0"
        case .paddingTooLarge: "padding count larger than the rest of the packet"
        case .emptyPayload: "empty payload"
        case .unexpectedPayloadType: "unexpected payload type"
        }
    }
}

// MARK: Numbering one stream. The sender's SSRC, first sequence number and first timestamp are
// random (RFC 3550 5.1, 8.1) so that streams from restarted terminals are not confused with old
// ones. Sequence numbers wrap after 65535 and timestamps after 2^32, so "newer" means "ahead by
// less than half the range" (serial-number arithmetic, RFC 1982).

/// Why an `RTPSender` could not be created.
public enum RTPSenderError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The payload type is outside the dynamic range 96-127.
    case payloadTypeNotDynamic(UInt8)

    /// A short text for logs.
    public var description: String {
        switch self {
        case .payloadTypeNotDynamic(let pt): "payload type \(pt) is not dynamic (96-127)"
        }
    }
}

/// Sequence number, timestamp and SSRC of one outgoing stream at the 48 kHz Opus clock.
public struct RTPSender: Sendable {
    /// RTP clock rate of Opus (RFC 7587 4.1): always 48 kHz, whatever the codec's internal rate.
    public static let clockRate: UInt32 = 48_000
    /// Dynamic payload types that may be negotiated for Opus.
    public static let dynamicPayloadTypes: ClosedRange<UInt8> = 96...127

    /// Synchronization source identifier of this stream.
    public let ssrc: UInt32
    /// Payload type written into every header.
    public let payloadType: UInt8
    /// Sequence number of the next packet.
    public private(set) var sequence: UInt16
    /// Timestamp of the next packet.
    public private(set) var timestamp: UInt32

    /// Creates a sender with SSRC, sequence and timestamp drawn from the system's random generator.
    public init(payloadType: UInt8 = 96) throws(RTPSenderError) {
        var generator = SystemRandomNumberGenerator()
        try self.init(payloadType: payloadType, using: &generator)
    }

    /// Creates a sender drawing SSRC, sequence and timestamp from `generator` (seeded in tests).
    public init(payloadType: UInt8 = 96, using generator: inout some RandomNumberGenerator) throws(RTPSenderError) {
        guard Self.dynamicPayloadTypes.contains(payloadType) else {
            throw .payloadTypeNotDynamic(payloadType)
        }
        self.payloadType = payloadType
        self.ssrc = UInt32.random(in: .min ... .max, using: &generator)
        self.sequence = UInt16.random(in: .min ... .max, using: &generator)
        self.timestamp = UInt32.random(in: .min ... .max, using: &generator)
    }

    /// Returns the header for the next packet, then advances sequence by 1 and timestamp by `frameSamples` (wrapping).
    /// `marker` should be true for the first packet of a talk spurt; deciding that is the caller's job.
    public mutating func next(frameSamples: UInt32, marker: Bool) -> RTPHeader {
        let header = RTPHeader(
            marker: marker, payloadType: payloadType, sequence: sequence, timestamp: timestamp, ssrc: ssrc)
        sequence &+= 1
        timestamp &+= frameSamples
        return header
    }

    /// A frame that is not sent (DTX silence): time advances, the sequence does not, so the
    /// receiver sees a timestamp gap (silence) rather than a sequence gap (loss).
    public mutating func skip(frameSamples: UInt32) {
        timestamp &+= frameSamples
    }
}

/// Comparisons of 16-bit RTP sequence numbers across wrap-around.
public enum RTPSequence {
    /// Signed steps from `a` to `b` (positive when `b` is ahead), in -32768...32767.
    @inline(__always)
    public static func distance(from a: UInt16, to b: UInt16) -> Int16 {
        Int16(bitPattern: b &- a)
    }

    /// True when `a` is ahead of `b` by 1...32767; exactly half the range apart counts as not newer either way.
    @inline(__always)
    public static func isNewer(_ a: UInt16, than b: UInt16) -> Bool {
        distance(from: b, to: a) > 0
    }
}

/// Comparisons of 32-bit RTP timestamps across wrap-around.
public enum RTPTimestamp {
    /// Signed clock ticks from `a` to `b` (positive when `b` is later).
    @inline(__always)
    public static func distance(from a: UInt32, to b: UInt32) -> Int32 {
        Int32(bitPattern: b &- a)
    }

    /// True when `a` is later than `b` by less than half the 32-bit range.
    @inline(__always)
    public static func isNewer(_ a: UInt32, than b: UInt32) -> Bool {
        distance(from: b, to: a) > 0
    }
}

// MARK: Big-endian (network order) field access, byte by byte: no alignment assumptions, no
// allocation. Callers check bounds first; the subscripts still trap on a mistake in debug builds.

extension UnsafeRawBufferPointer {
    @inline(__always)
    func readUInt16BE(at offset: Int) -> UInt16 {
        UInt16(self[offset]) << 8 | UInt16(self[offset + 1])
    }

    @inline(__always)
    func readUInt32BE(at offset: Int) -> UInt32 {
        UInt32(self[offset]) << 24 | UInt32(self[offset + 1]) << 16
            | UInt32(self[offset + 2]) << 8 | UInt32(self[offset + 3])
    }
}

extension UnsafeMutableRawBufferPointer {
    @inline(__always)
    func writeUInt16BE(_ value: UInt16, at offset: Int) {
        self[offset] = UInt8(truncatingIfNeeded: value >> 8)
        self[offset + 1] = UInt8(truncatingIfNeeded: value)
    }

    @inline(__always)
    func writeUInt32BE(_ value: UInt32, at offset: Int) {
        self[offset] = UInt8(truncatingIfNeeded: value >> 24)
        self[offset + 1] = UInt8(truncatingIfNeeded: value >> 16)
        self[offset + 2] = UInt8(truncatingIfNeeded: value >> 8)
        self[offset + 3] = UInt8(truncatingIfNeeded: value)
    }
}
