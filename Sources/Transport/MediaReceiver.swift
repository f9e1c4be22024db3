import Jitter
import Posix
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

/// Datagram in, jitter buffer out: drops and counts datagrams from sources not routed to us,
/// parses RTP strictly, drops and counts what is malformed or ours, finds (or starts) the sender's
/// stream and queues the payload for the audio thread. Network thread only; allocates nothing per
/// packet or route change.
public final class MediaReceiver: @unchecked Sendable {
    // @unchecked: used by the network thread only; statistics are atomics.
    public let table: StreamTable
    public let statistics = ReceiveStatistics()
    public let payloadType: UInt8
    /// Our own sender's SSRC: packets carrying it are our own coming back.
    public let ownSSRC: UInt32?
    /// Set while the audio thread plays. Packets queued while it does not would all be played
    /// late at once when it (re)starts, and make the jitter buffer believe in a huge jitter.
    private let audioRunning: Flag?
    /// Sources taken: any (until routes say otherwise), or those in `accepted`.
    private var acceptsAny = true
    private let accepted = EndpointList(capacity: MediaRoutes.maxEndpoints)
    /// While protected, only SRTP is heard: each accepted source's packets are checked with its session.
    private var protected = false
    private let sessions = SessionList()

    public init(table: StreamTable, payloadType: UInt8, ownSSRC: UInt32?, audioRunning: Flag? = nil) {
        precondition(RTPParseError.allCases.count == 9, "update statIndex")
        self.table = table
        self.payloadType = payloadType
        self.ownSSRC = ownSSRC
        self.audioRunning = audioRunning
    }

    /// Takes one datagram; a protected one is decrypted in place (so `datagram` is mutable).
    @inline(__always)
    public func handle(_ received: UnsafeMutableRawBufferPointer, from source: IPv4Endpoint, arrival: UInt64) {
        statistics.datagrams.increment()
        let index = acceptsAny ? -1 : accepted.firstMatch(source: source)
        guard acceptsAny || index >= 0 else { statistics.notRouted.increment(); return }
        var datagram = UnsafeRawBufferPointer(received)
        if protected {
            guard let session = sessions[index], received.count > 0 else { statistics.unprotectFailed.increment(); return }
            let n = session.unprotect(received.baseAddress!, length: received.count)
            guard n > 0 else {
                switch Int32(-n) {
                case SRTPError.authenticationFailed: statistics.unauthenticated.increment()
                case SRTPError.replayed, SRTPError.tooOld: statistics.replayed.increment()
                default: statistics.unprotectFailed.increment()
                }
                return
            }
            statistics.authenticated.increment()
            datagram = UnsafeRawBufferPointer(rebasing: received[0..<n])
        }
        let packet: RTPPacket
        switch RTPParser.parse(datagram, expectedPayloadType: payloadType) {
        case .success(let p): packet = p
        case .failure(let reason):
            statistics.malformed[reason.statIndex].increment()
            return
        }
        let h = packet.header
        if h.ssrc == ownSSRC { statistics.ownPackets.increment(); return }
        if let audioRunning, !audioRunning.isSet { statistics.audioStopped.increment(); return }
        guard let stream = table.route(ssrc: h.ssrc, source: source, sequence: h.sequence, now: arrival) else { return }
        let queued = stream.jitter.queue.push(
            payload: packet.payload(in: datagram), sequence: h.sequence, timestamp: h.timestamp,
            marker: h.marker, arrivalNanos: arrival)
        if queued { statistics.accepted.increment() } else { statistics.queueFull.increment() }
    }

    /// Network thread, between packets: takes datagrams from any source, or only from `sources`
    /// (checked by SRTP with the matching entry of `sessions` when `protected`), and evicts at
    /// once the streams of sources no longer taken, so the mixer stops playing them.
    func replaceAccepted(any: Bool, sources: EndpointList, sessions newSessions: SessionList, protected isProtected: Bool) {
        acceptsAny = any
        accepted.replace(with: sources)
        sessions.replace(with: newSessions)
        protected = isProtected
        if !any { table.evict { !accepted.matches(source: $0) } }
    }
}
