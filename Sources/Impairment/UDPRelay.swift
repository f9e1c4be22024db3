import Foundation
import Posix

/// A loopback UDP relay that applies an `ImpairmentProfile` in both directions.
///
/// Clients send to `listenEndpoint`; datagrams go to the target from a second socket (ephemeral,
/// or `from`: a relay standing between two parties that each accept only the other's address),
/// and the target's replies come back to the client that spoke last. Each direction has its own
/// `ImpairmentModel` (forward seeded with `seed`, reverse with `seed &+ 1`). One thread polls both
/// sockets and sends from a time-ordered queue; send times are honoured to within ~1 ms (poll()'s
/// resolution), never early.
public final class UDPRelay: @unchecked Sendable {
    /// The endpoint clients send to (with the real port when 0 was asked for).
    public let listenEndpoint: IPv4Endpoint
    /// Where datagrams from clients are forwarded.
    public let target: IPv4Endpoint
    /// The impairment applied in both directions.
    public let profile: ImpairmentProfile

    /// The bound listening port (useful when the relay was created with port 0).
    public var boundPort: UInt16 { listenEndpoint.port }

    // `lock` guards `published` and `state`; everything else is touched by the relay thread only.
    private let lock = NSLock()
    private var published = RelayStatistics()
    private var state = State.idle
    private let loop: RelayLoop
    /// Rung by `stop`: wakes the relay's poll at once.
    private let wake: Doorbell
    private var thread: WorkerThread?

    private enum State { case idle, running, stopped }

    /// Binds the listening and target-side sockets; throws on an invalid profile, a target port of 0 or a socket error.
    public init(listen: IPv4Endpoint, target: IPv4Endpoint, from: IPv4Endpoint = .loopback(port: 0), profile: ImpairmentProfile,
                queueCapacity: Int = 10_000) throws {
        try profile.validate()
        guard target.port != 0 else { throw RelayError.malformedEndpoint("\(target): the target needs a port") }
        var reverseProfile = profile
        reverseProfile.seed = profile.seed &+ 1
        let forwardModel = try ImpairmentModel(profile: profile)
        let reverseModel = try ImpairmentModel(profile: reverseProfile)
        _ = try listen.requireLoopback()
        _ = try target.requireLoopback()
        _ = try from.requireLoopback()
        // Large buffers: a test may fire hundreds of datagrams in one go; the kernel must not drop them before we do.
        let client: UDPSocket, upstream: UDPSocket
        do throws(SystemError) {
            client = try UDPSocket(bind: listen, bufferBytes: 4 << 20)
            upstream = try UDPSocket(bind: from, bufferBytes: 4 << 20)
            wake = try Doorbell()
        } catch {
            throw RelayError.system(error)
        }
        listenEndpoint = client.local
        self.target = target
        self.profile = profile
        loop = RelayLoop(client: client, upstream: upstream, target: target, wake: wake,
                         forward: forwardModel, reverse: reverseModel, queueCapacity: max(1, queueCapacity))
    }

    /// Convenience: listen on 127.0.0.1:`listenPort` (0 = ephemeral) and forward to 127.0.0.1:`targetPort`.
    public convenience init(listenPort: UInt16 = 0, targetPort: UInt16, profile: ImpairmentProfile,
                            queueCapacity: Int = 10_000) throws {
        try self.init(listen: .loopback(port: listenPort), target: .loopback(port: targetPort),
                      profile: profile, queueCapacity: queueCapacity)
    }

    deinit { stop() }

    /// Starts the relay thread; a relay runs once (throws `RelayError.notRestartable` otherwise).
    public func start() throws {
        try lock.withLock {
            guard state == .idle else { throw RelayError.notRestartable }
            state = .running
        }
        let thread = WorkerThread(name: "impairment-relay") { [self] in
            loop.run { statistics in self.lock.withLock { self.published = statistics } }
        }
        do { try thread.start() } catch { throw RelayError.system(error) }
        lock.withLock { self.thread = thread }
    }

    /// Stops the relay thread and waits for it (a few microseconds); pending datagrams are discarded and counted.
    public func stop() {
        let wasRunning = lock.withLock { () -> Bool in
            let running = state == .running
            state = .stopped
            return running
        }
        guard wasRunning else { return }
        wake.ring()
        lock.withLock { thread }?.join()
    }

    /// A snapshot of the counters (updated after every poll() wake-up; final after `stop()`).
    public var statistics: RelayStatistics {
        lock.withLock { published }
    }
}
