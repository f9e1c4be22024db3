import Posix
/// Where the network thread sends the microphone and whose datagrams it takes, changed at run
/// time for calls (`NetworkLoop.post`). Each list holds at most `maxEndpoints` entries.
public struct MediaRoutes: Sendable, Equatable {
    /// Unicast peers or multicast groups the microphone goes to.
    public var sendTo: [IPv4Endpoint]
    /// Sources whose datagrams are taken: nil takes any; otherwise a datagram's address and port
    /// must match an entry, or only its address when the entry's port is 0.
    public var acceptFrom: [IPv4Endpoint]?
    /// Multicast groups to be a member of (ports ignored).
    public var joinGroups: [IPv4Endpoint]
    /// SRTP: when set, what is sent is protected and only authentic packets are heard.
    public var protection: MediaProtection?

    /// The bound of each list: the network thread's copies are allocated once, this large. A
    /// call's media goes to and comes from at most its participants (`SignalCodec.maxParticipants`,
    /// 64; Transport does not see Calls: `ConfigCallsTests` checks the two agree).
    public static let maxEndpoints = 64

    public init(sendTo: [IPv4Endpoint], acceptFrom: [IPv4Endpoint]?, joinGroups: [IPv4Endpoint],
                protection: MediaProtection? = nil) {
        precondition(protection == nil || protection!.inbound.count == acceptFrom?.count,
                     "protected routes name a session for each accepted source")
        self.sendTo = sendTo
        self.acceptFrom = acceptFrom
        self.joinGroups = joinGroups
        self.protection = protection
    }
}

/// The SRTP sessions of one call: ours, and one per accepted source (in `acceptFrom`'s order).
/// The poster keeps them alive until the network thread has moved on to other routes: a session
/// must be freed on the thread that made it, never on the network thread.
public struct MediaProtection: Sendable, Equatable {
    public var outbound: SRTPSession
    public var inbound: [SRTPSession]

    public init(outbound: SRTPSession, inbound: [SRTPSession]) {
        self.outbound = outbound
        self.inbound = inbound
    }

    public static func == (a: MediaProtection, b: MediaProtection) -> Bool {
        a.outbound === b.outbound && a.inbound.count == b.inbound.count && zip(a.inbound, b.inbound).allSatisfy { $0 === $1 }
    }
}

/// Sessions in storage allocated once (as `EndpointList`), so the network thread replaces them
/// without allocating; assigning a reference only counts it.
final class SessionList: @unchecked Sendable {
    // @unchecked: each list is used by one thread at a time (see RoutesMailbox).
    private var storage = [SRTPSession?](repeating: nil, count: MediaRoutes.maxEndpoints)

    @inline(__always)
    subscript(i: Int) -> SRTPSession? { storage[i] }

    func replace(with sessions: [SRTPSession]?) {
        for i in 0..<storage.count { storage[i] = i < (sessions?.count ?? 0) ? sessions![i] : nil }
    }

    func replace(with other: SessionList) {
        for i in 0..<storage.count { storage[i] = other[i] }
    }
}

/// A list of endpoints in storage allocated once, so the network thread can replace its contents
/// without allocating.
final class EndpointList: @unchecked Sendable {
    // @unchecked: each list is used by one thread at a time (see RoutesMailbox).
    let capacity: Int
    private(set) var count = 0
    private let storage: UnsafeMutablePointer<IPv4Endpoint>

    init(capacity: Int) {
        self.capacity = capacity
        storage = .allocate(capacity: capacity)
        storage.initialize(repeating: IPv4Endpoint(address: 0, port: 0), count: capacity)
    }

    convenience init(_ endpoints: [IPv4Endpoint], capacity: Int) {
        self.init(capacity: capacity)
        replace(with: endpoints)
    }

    deinit { storage.deallocate() }

    @inline(__always)
    subscript(i: Int) -> IPv4Endpoint { storage[i] }

    func replace(with endpoints: [IPv4Endpoint]) {
        precondition(endpoints.count <= capacity, "\(endpoints.count) endpoints, at most \(capacity)")
        for (i, e) in endpoints.enumerated() { storage[i] = e }
        count = endpoints.count
    }

    func replace(with other: EndpointList) {
        precondition(other.count <= capacity)
        for i in 0..<other.count { storage[i] = other[i] }
        count = other.count
    }

    func append(_ e: IPv4Endpoint) {
        precondition(count < capacity)
        storage[count] = e
        count += 1
    }

    /// Order is not kept: the last entry takes the removed one's place.
    func remove(at i: Int) {
        count -= 1
        storage[i] = storage[count]
    }

    func removeAll() { count = 0 }

    /// True when an entry has `address` (ports ignored, as for multicast groups).
    func contains(address: UInt32) -> Bool {
        for i in 0..<count where storage[i].address == address { return true }
        return false
    }

    /// True when an entry matches `source`: same address, and the same port unless the entry's is 0.
    @inline(__always)
    func matches(source: IPv4Endpoint) -> Bool { firstMatch(source: source) >= 0 }

    /// The index of the first entry that matches `source` (as `matches`), or -1.
    @inline(__always)
    func firstMatch(source: IPv4Endpoint) -> Int {
        for i in 0..<count where storage[i].address == source.address && (storage[i].port == 0 || storage[i].port == source.port) {
            return i
        }
        return -1
    }
}
