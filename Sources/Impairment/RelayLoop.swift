import Glibc
import Posix

/// The relay thread's state and loop: receive, decide, queue, send when due.
///
/// `@unchecked Sendable` because it is handed to the relay thread once and from then on touched by
/// that thread only (the owner closes it after the thread has finished).
final class RelayLoop: @unchecked Sendable {
    private let client: UDPSocket
    private let upstream: UDPSocket
    private let target: IPv4Endpoint
    private let wake: Doorbell
    private var forward: ImpairmentModel
    private var reverse: ImpairmentModel
    private var queue: SendQueue
    private var statistics = RelayStatistics()
    private var lastClient: IPv4Endpoint?
    private var order: UInt64 = 0
    private var buffer = [UInt8](repeating: 0, count: 65_536)

    init(client: UDPSocket, upstream: UDPSocket, target: IPv4Endpoint, wake: Doorbell,
         forward: ImpairmentModel, reverse: ImpairmentModel, queueCapacity: Int) {
        self.client = client
        self.upstream = upstream
        self.target = target
        self.wake = wake
        self.forward = forward
        self.reverse = reverse
        queue = SendQueue(capacity: queueCapacity)
    }

    /// Runs until the wake pipe becomes readable; `publish` gets a snapshot after every wake-up.
    func run(publish: (RelayStatistics) -> Void) {
        var poller = Poller(capacity: 3)
        let fromClient = poller.add(client.descriptor, read: true)
        let fromUpstream = poller.add(upstream.descriptor, read: true)
        let woken = poller.add(wake.descriptor, read: true)
        while true {
            sendDue(now: MonotonicClock.nanoseconds())
            publish(statistics)
            var timeoutMs: Int32 = -1
            if let next = queue.first {
                let now = MonotonicClock.nanoseconds()
                // Round up: poll() has millisecond resolution and a datagram must never leave early.
                timeoutMs = next.dueNs <= now ? 0 : Int32(min((next.dueNs - now + 999_999) / 1_000_000, 1_000))
            }
            do { try poller.wait(timeoutMs: timeoutMs) } catch { break }
            if poller.events(at: woken).any { break }
            if poller.events(at: fromClient).any { drainClient() }
            if poller.events(at: fromUpstream).any { drainUpstream() }
        }
        statistics.forward.discardedAtStop += UInt64(queue.count(of: .forward))
        statistics.reverse.discardedAtStop += UInt64(queue.count(of: .reverse))
        queue.removeAll()
        publish(statistics)
    }

    private func drainClient() {
        while let (count, source) = receive(client) {
            lastClient = source
            let times = forward.sendTimes(arrivalNs: MonotonicClock.nanoseconds())
            statistics.forward.model = forward.counters
            schedule(times, direction: .forward, payload: Array(buffer[0..<count]))
        }
    }

    private func drainUpstream() {
        while let (count, source) = receive(upstream) {
            // Only the target may talk back, and only once a client is known to receive it.
            guard source == target, lastClient != nil else {
                statistics.ignored += 1
                continue
            }
            let times = reverse.sendTimes(arrivalNs: MonotonicClock.nanoseconds())
            statistics.reverse.model = reverse.counters
            schedule(times, direction: .reverse, payload: Array(buffer[0..<count]))
        }
    }

    private func schedule(_ times: [UInt64], direction: RelayDirection, payload: [UInt8]) {
        for due in times {
            order += 1
            if !queue.push(PendingSend(dueNs: due, order: order, direction: direction, payload: payload)) {
                switch direction {
                case .forward: statistics.forward.queueOverflow += 1
                case .reverse: statistics.reverse.queueOverflow += 1
                }
            }
        }
    }

    private func sendDue(now: UInt64) {
        while let next = queue.first, next.dueNs <= now {
            _ = queue.popFirst()
            switch next.direction {
            case .forward:
                if send(next.payload, from: upstream, to: target) {
                    statistics.forward.delivered += 1
                } else {
                    statistics.forward.sendErrors += 1
                }
            case .reverse:
                // The reply goes to whoever spoke last at send time (the client may have moved ports).
                if let destination = lastClient, send(next.payload, from: client, to: destination) {
                    statistics.reverse.delivered += 1
                } else {
                    statistics.reverse.sendErrors += 1
                }
            }
        }
    }

    private func receive(_ socket: UDPSocket) -> (count: Int, from: IPv4Endpoint)? {
        buffer.withUnsafeMutableBytes { socket.receive(into: $0) }
    }

    /// True when the whole datagram was handed to the kernel.
    private func send(_ payload: [UInt8], from socket: UDPSocket, to destination: IPv4Endpoint) -> Bool {
        payload.withUnsafeBytes { socket.send($0, to: destination) } == .success(payload.count)
    }
}
