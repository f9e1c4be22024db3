// Strict RTP parsing (RFC 3550 section 5): every length field is checked against the datagram
// before it is used, because datagrams come from the network and may be hostile or truncated.

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
