import Frames
import Jitter
import Posix
import RealTime

/// Remote streams told apart by SSRC and source address, in a fixed number of slots.
///
/// Network thread only. An unknown stream is on probation until two packets with consecutive
/// sequence numbers arrived (RFC 3550 A.1), so stray or forged one-off packets (an SSRC flood)
/// never reach the speaker; probation entries are few and recycled oldest first. A stream that
/// passes takes a free slot (reset, then handed to the audio thread); with every slot taken it is
/// refused and counted. So floods cost neither memory nor other streams' slots. A stream silent
/// for `idleTimeoutNanos` is evicted: the audio thread is asked to let go, and the slot is free
/// again once it has.
public final class StreamTable: @unchecked Sendable {
    // @unchecked: used by the network thread only; statistics are atomics.
    public let streams: [RemoteStream]
    public let idleTimeoutNanos: UInt64
    /// Streams started, evicted, and packets of new streams refused for want of a slot.
    public let started = Counter()
    public let evicted = Counter()
    public let refused = Counter()
    public let active = Counter()
    /// Packets of streams still on probation (dropped).
    public let probation = Counter()

    // The streams again as a plain buffer: Array iteration may allocate in debug builds.
    private let slots: UnsafeMutableBufferPointer<RemoteStream>
    private let candidates: UnsafeMutableBufferPointer<Candidate>

    /// A stream on probation: its last sequence number and when it was last seen.
    private struct Candidate {
        var ssrc: UInt32 = 0
        var source = IPv4Endpoint(address: 0, port: 0)
        var sequence: UInt16 = 0
        var seen: UInt64 = 0
        var used = false
    }

    public init(streams: [RemoteStream], idleTimeoutNanos: UInt64, probationEntries: Int = 16) {
        self.streams = streams
        self.idleTimeoutNanos = idleTimeoutNanos
        slots = .allocate(capacity: streams.count)
        _ = slots.initialize(from: streams)
        candidates = .allocate(capacity: probationEntries)
        candidates.initialize(repeating: Candidate())
    }

    deinit {
        slots.deinitialize().deallocate()
        candidates.deallocate()
    }

    /// The slot of the stream (`ssrc`, `source`); nil while it is on probation or when refused.
    @inline(__always)
    public func route(ssrc: UInt32, source: IPv4Endpoint, sequence: UInt16, now: UInt64) -> RemoteStream? {
        for i in 0..<slots.count {
            let s = slots[i]
            if s.phase == .active && s.ssrc == ssrc && s.source == source {
                s.lastArrival = now
                return s
            }
        }
        guard passesProbation(ssrc: ssrc, source: source, sequence: sequence, now: now) else {
            probation.increment()
            return nil
        }
        return start(ssrc: ssrc, source: source, now: now)
    }

    /// True when this packet follows the candidate's previous one; records it otherwise.
    private func passesProbation(ssrc: UInt32, source: IPv4Endpoint, sequence: UInt16, now: UInt64) -> Bool {
        var oldest = 0
        for i in 0..<candidates.count {
            if candidates[i].used && candidates[i].ssrc == ssrc && candidates[i].source == source {
                if sequence == candidates[i].sequence &+ 1 {
                    candidates[i].used = false
                    return true
                }
                candidates[i].sequence = sequence
                candidates[i].seen = now
                return false
            }
            if !candidates[i].used || (candidates[oldest].used && candidates[i].seen < candidates[oldest].seen) { oldest = i }
        }
        candidates[oldest] = Candidate(ssrc: ssrc, source: source, sequence: sequence, seen: now, used: true)
        return false
    }

    private func start(ssrc: UInt32, source: IPv4Endpoint, now: UInt64) -> RemoteStream? {
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
            s.receivedAtStart.store(s.jitter.statistics.received.load)
            s.playedAtStart.store(s.jitter.statistics.played.load)
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

    /// Evicts the streams whose source `rejected` returns true for (the routes changed).
    func evict(where rejected: (IPv4Endpoint) -> Bool) {
        for i in 0..<slots.count where slots[i].phase == .active && rejected(slots[i].source) { release(slots[i]) }
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
