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
