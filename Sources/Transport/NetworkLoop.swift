import Glibc
import RealTime

/// The network thread's body: one `poll` over the microphone doorbell and the media socket.
/// A rung doorbell means microphone frames are waiting: each is encoded and sent at once. A
/// readable socket is drained, every datagram stamped with its arrival time and handed to the
/// receiver. Idle streams are evicted on the way. Nothing here allocates per frame or packet.
public final class NetworkLoop: @unchecked Sendable {
    // @unchecked: all state belongs to the network thread; `stopRequest` is atomic.
    public let sender: MediaSender?
    public let receiver: MediaReceiver?
    public let stopRequest = Flag(false)
    /// Microphone frames read but not sent (no peers, or sending off).
    public let framesNotSent = Counter()

    private let socket: UDPSocket
    private let microphone: SampleRing
    private let doorbell: Doorbell
    /// Gets a copy of every microphone frame when set (local-mode recording).
    private let tee: SampleRing?
    private let frameSize: Int
    /// The audio engine's count of capture frames lost at restarts (`EngineStats.captureGapFrames`).
    private let captureGaps: Counter?
    private var captureGapsSent = 0
    private let frame: UnsafeMutablePointer<Int16>
    private let datagram: UnsafeMutableRawBufferPointer

    public init(socket: UDPSocket, sender: MediaSender?, receiver: MediaReceiver?, microphone: SampleRing,
                doorbell: Doorbell, frameSize: Int, tee: SampleRing? = nil, captureGaps: Counter? = nil) {
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

    /// Runs until `stopRequest` is set (checked at least every 100 ms).
    public func run() {
        var fds = (pollfd(fd: doorbell.descriptor, events: Int16(POLLIN), revents: 0),
                   pollfd(fd: socket.descriptor, events: Int16(POLLIN), revents: 0))
        var lastEviction = monotonicNanos()
        while !stopRequest.isSet {
            fds.0.revents = 0
            fds.1.revents = 0
            let ready = withUnsafeMutablePointer(to: &fds) {
                $0.withMemoryRebound(to: pollfd.self, capacity: 2) { poll($0, 2, 100) }
            }
            if ready < 0 && errno != EINTR { usleep(10_000); continue }
            if fds.0.revents != 0 {
                doorbell.drain()
                sendWaitingFrames()
            }
            if fds.1.revents != 0 { receiveWaitingDatagrams() }
            let now = monotonicNanos()
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
            if let sender, sender.hasPeers { sender.send(frame) } else { framesNotSent.increment() }
        }
    }

    private func receiveWaitingDatagrams() {
        let buffer = UnsafeMutableRawBufferPointer(datagram)
        while let (count, from) = socket.receive(into: buffer) {
            guard let receiver else { continue }
            receiver.handle(UnsafeRawBufferPointer(rebasing: buffer[0..<count]), from: from, arrival: monotonicNanos())
        }
    }
}
