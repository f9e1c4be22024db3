import RealTime
import RTP

/// Counters of the receiving side, readable from any thread.
public final class ReceiveStatistics: Sendable {
    /// Datagrams read from the socket.
    public let datagrams = Counter()
    /// Packets handed to a stream's jitter buffer.
    public let accepted = Counter()
    /// Datagrams dropped as malformed, one counter per `RTPParseError` (in `allCases` order).
    public let malformed: [Counter] = RTPParseError.allCases.map { _ in Counter() }
    /// Our own packets coming back (multicast loopback, or a routing loop).
    public let ownPackets = Counter()
    /// Packets of a stream whose jitter-buffer queue was full (the audio thread fell behind).
    public let queueFull = Counter()
    /// Packets dropped because the audio engine was not running (no one would play them).
    public let audioStopped = Counter()
    /// Datagrams from a source the current routes do not accept (`MediaRoutes.acceptFrom`).
    public let notRouted = Counter()
    /// SRTP packets that failed authentication (forged, damaged, or under another key).
    public let unauthenticated = Counter()
    /// SRTP packets seen before (a replay or a duplicate) or older than the replay window.
    public let replayed = Counter()
    /// SRTP packets refused for another reason (too short, unparsable header).
    public let unprotectFailed = Counter()
    /// Packets taken after SRTP checked them.
    public let authenticated = Counter()

    public init() {}

    /// All malformed datagrams.
    public var malformedTotal: Int { malformed.reduce(0) { $0 + $1.load } }

    /// "reason=count" for each reason seen, for logs.
    public var malformedSummary: String {
        zip(RTPParseError.allCases, malformed).filter { $0.1.load > 0 }
            .map { "\($0.0.statName)=\($0.1.load)" }.joined(separator: ",")
    }
}

extension RTPParseError {
    /// Position in `allCases`, without the generic search (this runs per packet).
    var statIndex: Int {
        switch self {
        case .truncatedHeader: 0
        case .unsupportedVersion: 1
        case .csrcPastEnd: 2
        case .extensionHeaderPastEnd: 3
        case .extensionPastEnd: 4
        case .zeroPadding: 5
        case .paddingTooLarge: 6
        case .emptyPayload: 7
        case .unexpectedPayloadType: 8
        }
    }

    var statName: String {
        switch self {
        case .truncatedHeader: "truncated"
        case .unsupportedVersion: "version"
        case .csrcPastEnd: "csrc"
        case .extensionHeaderPastEnd, .extensionPastEnd: "extension"
        case .zeroPadding, .paddingTooLarge: "padding"
        case .emptyPayload: "empty"
        case .unexpectedPayloadType: "payload_type"
        }
    }
}
