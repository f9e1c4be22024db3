import Calls

/// How a terminal gets the newest site document any other terminal announces: commands in
/// (hellos heard, fetches done, time), effects out (fetch from whom), no I/O. Every terminal
/// passes on what it holds, so the site converges without the administrator's machine; a
/// terminal that was off catches up from the first hello it hears.
public struct SiteSpread: Sendable {
    public struct Settings: Sendable, Equatable {
        /// A fetch not done by then is given up, and the peer tried again only after `retryAfter`.
        public var fetchTimeout = 3.0
        public var retryAfter = 2.0
        /// A peer not heard for this long is not asked.
        public var peerSilence = 10.0
        public init() {}
    }

    public enum Command: Sendable {
        /// A hello from `peer` (a room id) saying what it holds (nil: no document).
        case heard(peer: String, stamp: SiteStamp?)
        /// This terminal now holds `stamp` (at start, or the gate adopted a document).
        case holding(SiteStamp)
        /// The fetch from `peer` ended: the gate adopted what came (`holding` follows), refused it,
        /// or nothing whole came (a connection error, a timeout, a short read).
        case fetchEnded(peer: String, outcome: FetchOutcome)
        case tick
    }

    public enum FetchOutcome: Sendable, Equatable {
        case adopted
        /// The gate refused the document (counted there): that exact document is not asked for again.
        case refused
        case failed
    }

    public enum Effect: Sendable, Equatable {
        /// Fetch the document `stamp` names from `peer`.
        case fetch(peer: String, stamp: SiteStamp)
        /// Tell every room now what this terminal holds (a hello), rather than at the next one.
        case announce(SiteStamp)
    }

    public struct Peer: Sendable, Equatable {
        public var stamp: SiteStamp?
        public var lastHeard: Double
    }

    public let settings: Settings
    public private(set) var held: SiteStamp?
    public private(set) var peers: [String: Peer] = [:]
    /// The fetch under way: from whom, what, and when it is given up.
    public private(set) var fetching: (peer: String, stamp: SiteStamp, deadline: Double)?
    private var retryAt: [String: Double] = [:]
    // Documents a gate refused: never fetched again (bounded, oldest forgotten first).
    private var refused: [SiteStamp] = []
    static var refusedLimit: Int { 32 }

    /// This terminal's own room id: of several peers holding the newest document, it asks the one
    /// after itself in name order, so that a site's terminals do not all ask the same one.
    public let me: String

    public init(me: String, settings: Settings = Settings(), holding: SiteStamp? = nil) {
        self.me = me
        self.settings = settings
        held = holding
    }

    /// The peers heard lately whose document is older than this one's, or who have none: behind.
    public func behind(now: Double) -> [String] {
        guard let held else { return [] }
        return peers.filter { now - $0.value.lastHeard <= settings.peerSilence && ($0.value.stamp.map { $0 < held } ?? true) }
            .keys.sorted()
    }

    public mutating func handle(_ command: Command, now: Double) -> [Effect] {
        var out: [Effect] = []
        switch command {
        case .heard(let peer, let stamp):
            peers[peer] = Peer(stamp: stamp, lastHeard: now)
        case .holding(let stamp):
            guard held.map({ $0 < stamp }) ?? true else { break }
            held = stamp
            if let f = fetching, !(held! < f.stamp) { fetching = nil }
            out.append(.announce(stamp))
        case .fetchEnded(let peer, let outcome):
            guard let f = fetching, f.peer == peer else { break }
            fetching = nil
            switch outcome {
            case .adopted: break
            case .refused:
                refused.append(f.stamp)
                if refused.count > Self.refusedLimit { refused.removeFirst() }
            case .failed:
                retryAt[peer] = now + settings.retryAfter
            }
        case .tick:
            if let f = fetching, now >= f.deadline {
                fetching = nil
                retryAt[f.peer] = now + settings.retryAfter
            }
        }
        if fetching == nil, let next = nextFetch(now: now) {
            fetching = (next.peer, next.stamp, now + settings.fetchTimeout)
            out.append(.fetch(peer: next.peer, stamp: next.stamp))
        }
        return out
    }

    /// The newest document a peer heard lately holds, newer than this one's and not refused; from
    /// the first such peer after `me` in name order (wrapping) not waiting to be tried again.
    private func nextFetch(now: Double) -> (peer: String, stamp: SiteStamp)? {
        let candidates = peers.filter { now - $0.value.lastHeard <= settings.peerSilence }
            .compactMap { entry in entry.value.stamp.map { (peer: entry.key, stamp: $0) } }
            .filter { c in (held.map { $0 < c.stamp } ?? true) && !refused.contains(c.stamp) }
        guard let newest = candidates.map(\.stamp).max() else { return nil }
        let ready = candidates.filter { $0.stamp == newest && (retryAt[$0.peer] ?? -.infinity) <= now }
            .sorted { $0.peer < $1.peer }
        return ready.first { $0.peer > me } ?? ready.first
    }
}
