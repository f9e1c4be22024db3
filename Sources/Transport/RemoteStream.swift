import Codec
import Frames
import Jitter
import Posix
import RealTime

/// One slot for a remote talker: its jitter buffer (with its own Opus decoder) and its place in
/// the mixer. Slots are created once, at start-up; the `StreamTable` hands them to streams as
/// they appear and takes them back when they go idle, so a flood of new streams costs no memory.
public final class RemoteStream: @unchecked Sendable {
    // @unchecked: identity fields are the network thread's; the jitter buffer belongs to whoever
    // owns the slot (see SlotHandOff); statistics are atomics.
    public let jitter: JitterBuffer
    public let input: MixerInput

    /// For the statistics reader: SSRC, source address and port of the current stream (0 when free).
    public let currentSSRC = Counter()
    public let currentSource = Counter()
    /// The jitter buffer's cumulative counters when the current stream took the slot: the
    /// stream's own counts are the differences.
    public let receivedAtStart = Counter()
    public let playedAtStart = Counter()

    // Network thread only.
    enum Phase { case free, active, draining }
    var phase = Phase.free
    var ssrc: UInt32 = 0
    var source = IPv4Endpoint(address: 0, port: 0)
    var lastArrival: UInt64 = 0

    private let resetSource: @Sendable () -> Void

    /// - Parameters:
    ///   - source: what the mixer reads: the jitter buffer, or a drift corrector around it.
    ///   - reset: returns `source` (and the jitter buffer) to the state of a new stream; called by
    ///     the network thread while it owns the slot.
    public init(jitter: JitterBuffer, source: any FrameSource, reset: @escaping @Sendable () -> Void) {
        self.jitter = jitter
        input = MixerInput(source: source, handOff: SlotHandOff())
        resetSource = reset
    }

    /// Network thread, while the slot is free: ready for a new stream.
    func reset() { resetSource() }

    var handOff: SlotHandOff { input.handOff! }

    /// The stream's source as "a.b.c.d:port", for logs.
    public var sourceDescription: String {
        let v = currentSource.load
        return IPv4Endpoint(address: UInt32(truncatingIfNeeded: v >> 16), port: UInt16(truncatingIfNeeded: v)).description
    }
}
