import Glibc
import Posix
import RealTime

/// The network thread's body: one `poll` over the microphone doorbell, the routes doorbell and
/// the media socket. A rung microphone doorbell means frames are waiting: each is encoded and sent
/// at once. A readable socket is drained, every datagram stamped with its arrival time and handed
/// to the receiver. Routes posted by another thread are applied between packets; idle streams are
/// evicted on the way. Nothing here allocates per frame, packet or route change.
public final class NetworkLoop: @unchecked Sendable {
    // @unchecked: all state belongs to the network thread; `stopRequest`, the counters and the
    // mailbox are made for other threads.
    public let sender: MediaSender?
    public let receiver: MediaReceiver?
    public let stopRequest = Flag(false)
    /// Microphone frames read but not sent (no peers, or sending off).
    public let framesNotSent = Counter()
    /// Multicast joins and leaves the system refused while applying routes.
    public let membershipErrors = Counter()
    /// Route sets the network thread has applied (`post`).
    public var appliedRoutes: Int { routesApplied.load }

    private let socket: UDPSocket
    private let microphone: SampleRing
    private let doorbell: Doorbell
    private let routes = RoutesMailbox()
    private let routesDoorbell: Doorbell
    private let routesApplied = Counter()
    /// Multicast groups joined for routes (not those joined on the socket before).
    private let joined = EndpointList(capacity: MediaRoutes.maxEndpoints)
    /// Gets a copy of every microphone frame when set (local-mode recording).
    private let tee: SampleRing?
    private let frameSize: Int
    /// The audio engine's count of capture frames lost at restarts (`EngineStats.captureGapFrames`).
    private let captureGaps: Counter?
    private var captureGapsSent = 0
    private let frame: UnsafeMutablePointer<Int16>
    private let datagram: UnsafeMutableRawBufferPointer

    /// Sends to `sender`'s peers and takes datagrams from any source until routes are posted.
    public init(socket: UDPSocket, sender: MediaSender?, receiver: MediaReceiver?, microphone: SampleRing,
                doorbell: Doorbell, frameSize: Int, tee: SampleRing? = nil, captureGaps: Counter? = nil) throws(SystemError) {
        routesDoorbell = try Doorbell()
        self.captureGaps = captureGaps
        self.socket = socket
        self.sender = sender
        self.receiver = receiver
        self.microphone = microphone
        self.doorbell = doorbell
        self.frameSize = frameSize
        self.tee = tee
        frame = .allocate(capacity: frameSize)
        frame.initialize(repeating: 0, count: frameSize)
        // Larger than any packet we accept; a bigger datagram is cut and then rejected by size.
        datagram = .allocate(byteCount: 4096, alignment: 8)
    }

    deinit {
        frame.deallocate()
        datagram.deallocate()
    }

    /// Any thread but the audio thread: from the next packet on, the microphone goes to
    /// `newRoutes.sendTo`, only `acceptFrom` is heard (nil: anyone; the streams of other sources
    /// are evicted) and the socket is a member of `joinGroups`. The newest routes always win: a
    /// set posted before the network thread took the previous one replaces it. Returns false,
    /// posting nothing, once the loop was asked to stop. Watch `appliedRoutes` to know when applied.
    @discardableResult
    public func post(_ newRoutes: MediaRoutes) -> Bool {
        let limit = MediaRoutes.maxEndpoints
        precondition(newRoutes.sendTo.count <= limit && (newRoutes.acceptFrom?.count ?? 0) <= limit
                     && newRoutes.joinGroups.count <= limit, "at most \(limit) endpoints per route list")
        precondition(newRoutes.protection == nil || newRoutes.acceptFrom != nil, "protected routes name their sources")
        guard !stopRequest.isSet else { return false }
        routes.post(newRoutes)
        routesDoorbell.ring()
        return true
    }

    /// Runs until `stopRequest` is set (checked at least every 100 ms).
    public func run() {
        var fds = (pollfd(fd: doorbell.descriptor, events: Int16(POLLIN), revents: 0),
                   pollfd(fd: routesDoorbell.descriptor, events: Int16(POLLIN), revents: 0),
                   pollfd(fd: socket.descriptor, events: Int16(POLLIN), revents: 0))
        var lastEviction = MonotonicClock.nanoseconds()
        applyPostedRoutes()  // posted before the thread started
        while !stopRequest.isSet {
            fds.0.revents = 0
            fds.1.revents = 0
            fds.2.revents = 0
            let ready = withUnsafeMutablePointer(to: &fds) {
                $0.withMemoryRebound(to: pollfd.self, capacity: 3) { poll($0, 3, 100) }
            }
            if ready < 0 && SystemError.currentErrno != .interrupted { usleep(10_000); continue }
            // Routes first: frames and datagrams that woke us with them already follow them.
            if fds.1.revents != 0 {
                routesDoorbell.drain()
                applyPostedRoutes()
            }
            if fds.0.revents != 0 {
                doorbell.drain()
                sendWaitingFrames()
            }
            if fds.2.revents != 0 { receiveWaitingDatagrams() }
            let now = MonotonicClock.nanoseconds()
            if now - lastEviction > 100_000_000, let receiver {
                receiver.table.evictIdle(now: now)
                lastEviction = now
            }
        }
    }

    /// Every whole microphone frame waiting in the ring goes out as one packet.
    private func sendWaitingFrames() {
        // Lost capture time is skipped before the frames now waiting: they were captured after
        // the restart, unless this thread fell behind by more than a batch (then the jump lands
        // a few frames early, which a receiver hears as the same gap).
        if let captureGaps, captureGaps.load != captureGapsSent {
            let lost = captureGaps.load
            sender?.skipLostFrames(lost - captureGapsSent)
            captureGapsSent = lost
        }
        while microphone.read(into: frame, count: frameSize) {
            tee?.write(frame, count: frameSize)
            if let sender, sender.hasPeers {
                sender.send(frame)
            } else {
                // The timestamp keeps pace with capture, so a later send starts after a gap.
                sender?.skipLostFrames(1)
                framesNotSent.increment()
            }
        }
    }

    private func applyPostedRoutes() {
        guard let r = routes.take() else { return }
        sender?.replacePeers(with: r.sendTo, protection: r.outbound)
        receiver?.replaceAccepted(any: r.acceptsAny, sources: r.acceptFrom, sessions: r.inbound, protected: r.outbound != nil)
        updateMemberships(r.joinGroups)
        routesApplied.increment()
    }

    /// Leaves the groups joined for earlier routes that `groups` lacks, then joins the new ones.
    private func updateMemberships(_ groups: EndpointList) {
        let interface = socket.multicastInterface
        var i = 0
        while i < joined.count {
            if groups.contains(address: joined[i].address) {
                i += 1
            } else {
                if case .failure = socket.setMembership(false, group: joined[i].address, interface: interface) { membershipErrors.increment() }
                joined.remove(at: i)
            }
        }
        for k in 0..<groups.count where !joined.contains(address: groups[k].address) {
            switch socket.setMembership(true, group: groups[k].address, interface: interface) {
            case .success: joined.append(groups[k])
            case .failure(.addressInUse): break  // joined on the socket before the routes: not ours to leave
            default: membershipErrors.increment()
            }
        }
    }

    private func receiveWaitingDatagrams() {
        let buffer = UnsafeMutableRawBufferPointer(datagram)
        while let (count, from) = socket.receive(into: buffer) {
            guard let receiver else { continue }
            receiver.handle(UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count]), from: from, arrival: MonotonicClock.nanoseconds())
        }
    }
}
