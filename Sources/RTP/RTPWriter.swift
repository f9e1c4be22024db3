// Writes the plain 12-byte header (no CSRCs, no extension, no padding): that is all a terminal
// sending its own microphone needs, and it keeps the sending path free of length bookkeeping.

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
