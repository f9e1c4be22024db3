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
        /// A peer that answered `busy` (as many transfers under way as it takes) is asked again
        /// this soon: it is there and answering, only full.
        public var busyRetry = 0.25
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

        var startsFetches: Bool {
            switch self {
            case .tick, .fetchEnded: true
            case .heard, .holding: false
            }
        }
    }

    public enum FetchOutcome: Sendable, Equatable {
        case adopted
        /// The gate refused the document (counted there): that exact document is not asked for again.
        case refused
        /// The peer had as many transfers under way as it takes.
        case busy
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
    /// its name's hash points at, so that the terminals that hear of a version at once spread
    /// their fetches over its holders rather than all asking one.
    public let me: String
    private let pick: UInt64

    public init(me: String, settings: Settings = Settings(), holding: SiteStamp? = nil) {
        self.me = me
        pick = Self.hash(me)
        self.settings = settings
        held = holding
    }

    /// Something may happen without a new hello: a fetch under way (its timeout), or a peer that
    /// holds a newer document (to be asked again, or it was refused). Otherwise only a hello
    /// naming another document starts anything, and nobody need look.
    public var awaitsTicks: Bool {
        fetching != nil || peers.values.contains { p in p.stamp.map { s in held.map { $0 < s } ?? true } ?? false }
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
            case .busy:
                retryAt[peer] = now + settings.busyRetry
            case .failed:
                retryAt[peer] = now + settings.retryAfter
            }
        case .tick:
            if let f = fetching, now >= f.deadline {
                fetching = nil
                retryAt[f.peer] = now + settings.retryAfter
            }
        }
        // A fetch starts at a tick or when one ends, not at each hello: the hellos of one look are
        // all in before a holder is picked among them.
        if fetching == nil, command.startsFetches, let next = nextFetch(now: now) {
            fetching = (next.peer, next.stamp, now + settings.fetchTimeout)
            out.append(.fetch(peer: next.peer, stamp: next.stamp))
        }
        return out
    }

    /// The newest document a peer heard lately holds, newer than this one's and not refused; from
    /// one such peer not waiting to be tried again, chosen by `me`'s hash among them in name order.
    private func nextFetch(now: Double) -> (peer: String, stamp: SiteStamp)? {
        let candidates = peers.filter { now - $0.value.lastHeard <= settings.peerSilence }
            .compactMap { entry in entry.value.stamp.map { (peer: entry.key, stamp: $0) } }
            .filter { c in (held.map { $0 < c.stamp } ?? true) && !refused.contains(c.stamp) }
        guard let newest = candidates.map(\.stamp).max() else { return nil }
        let ready = candidates.filter { $0.stamp == newest && (retryAt[$0.peer] ?? -.infinity) <= now }
            .sorted { $0.peer < $1.peer }
        guard !ready.isEmpty else { return nil }
        return ready[Int(pick % UInt64(ready.count))]
    }

    /// FNV-1a with a final mix (so that the low bits differ between "t01" and "t02"): the same on
    /// every machine and run, as Swift's `Hasher`, seeded per process, is not.
    static func hash(_ text: String) -> UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 { h = (h ^ UInt64(byte)) &* 0x100_0000_01b3 }
        h ^= h >> 33
        h &*= 0xff51_afd7_ed55_8ccd
        return h ^ h >> 33
    }
}
