import Jitter
import RealTime

/// Remote streams told apart by SSRC and source address, in a fixed number of slots.
///
/// Network thread only. A packet of an unknown stream takes a free slot (reset, then handed to
/// the audio thread); with every slot taken it is refused and counted, so hostile SSRC floods
/// cost neither memory nor other streams' slots. A stream silent for `idleTimeoutNanos` is
/// evicted: the audio thread is asked to let go, and the slot is free again once it has.
public final class StreamTable: @unchecked Sendable {
    // @unchecked: used by the network thread only; statistics are atomics.
    public let streams: [RemoteStream]
    public let idleTimeoutNanos: UInt64
    /// Streams started, evicted, and packets of new streams refused for want of a slot.
    public let started = Counter()
    public let evicted = Counter()
    public let refused = Counter()
    public let active = Counter()

    // The streams again as a plain buffer: Array iteration may allocate in debug builds.
    private let slots: UnsafeMutableBufferPointer<RemoteStream>

    public init(streams: [RemoteStream], idleTimeoutNanos: UInt64) {
        self.streams = streams
        self.idleTimeoutNanos = idleTimeoutNanos
        slots = .allocate(capacity: streams.count)
        _ = slots.initialize(from: streams)
    }

    deinit { slots.deinitialize().deallocate() }

    /// The slot of the stream (`ssrc`, `source`), started if new; nil when refused.
    @inline(__always)
    public func route(ssrc: UInt32, source: UDPEndpoint, now: UInt64) -> RemoteStream? {
        for i in 0..<slots.count {
            let s = slots[i]
            if s.phase == .active && s.ssrc == ssrc && s.source == source {
                s.lastArrival = now
                return s
            }
        }
        reclaimReleased()
        for i in 0..<slots.count where slots[i].phase == .free {
            let s = slots[i]
            // The slot is ours: nobody reads the buffer, so it may be reset for the new stream.
            s.reset()
            s.ssrc = ssrc
            s.source = source
            s.lastArrival = now
            s.currentSSRC.store(Int(ssrc))
            s.currentSource.store(Int(source.address) << 16 | Int(source.port))
            s.phase = .active
            s.handOff.activate()
            started.increment()
            active.increment()
            return s
        }
        refused.increment()
        return nil
    }

    /// Asks the audio thread to release streams idle for longer than the timeout; frees released ones.
    public func evictIdle(now: UInt64) {
        for i in 0..<slots.count where slots[i].phase == .active && now &- slots[i].lastArrival > idleTimeoutNanos {
            release(slots[i])
        }
        reclaimReleased()
    }

    /// Evicts every stream (e.g. when the peers change).
    public func evictAll() {
        for i in 0..<slots.count where slots[i].phase == .active { release(slots[i]) }
        reclaimReleased()
    }

    private func release(_ s: RemoteStream) {
        s.phase = .draining
        s.handOff.requestRelease()
        evicted.increment()
        active.increment(by: -1)
    }

    private func reclaimReleased() {
        for i in 0..<slots.count where slots[i].phase == .draining && slots[i].handOff.isFree {
            slots[i].phase = .free
            slots[i].currentSSRC.store(0)
            slots[i].currentSource.store(0)
        }
    }
}
