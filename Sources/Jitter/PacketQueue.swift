import RealTime
import Synchronization

/// One received packet as seen by the consumer of a `PacketQueue`.
/// `payload` points into the queue's slot and is valid only until `PacketQueue.pop()`.
public struct QueuedPacket {
    public let sequence: UInt16
    public let timestamp: UInt32
    public let marker: Bool
    public let arrivalNanos: UInt64
    public let payload: UnsafeRawBufferPointer
}

/// Lock-free single-producer single-consumer hand-off of received RTP payloads
/// from the network thread (producer) to the audio thread (consumer).
///
/// A fixed number of slots of `maxPayloadBytes` each, allocated once in `init`; neither side ever
/// waits or allocates. A full queue (or an oversized payload) makes `push` return false and is counted.
public final class PacketQueue: @unchecked Sendable {
    // @unchecked: slots are shared, but the written/consumed protocol hands each slot to one side at a time.
    public let slotCount: Int
    public let maxPayloadBytes: Int
    /// Packets refused because every slot was in use.
    public let full = Counter()
    /// Packets refused because their payload exceeded `maxPayloadBytes`.
    public let oversize = Counter()

    private let mask: Int
    private let bytes: UnsafeMutableRawPointer
    private let lengths: UnsafeMutablePointer<Int>
    private let sequences: UnsafeMutablePointer<UInt16>
    private let timestamps: UnsafeMutablePointer<UInt32>
    private let markers: UnsafeMutablePointer<Bool>
    private let arrivals: UnsafeMutablePointer<UInt64>
    /// Total packets ever pushed / popped; only the producer stores `written`, only the consumer `consumed`.
    private let written = Atomic<Int>(0)
    private let consumed = Atomic<Int>(0)

    /// - Parameter slots: rounded up to a power of two.
    public init(slots: Int = 64, maxPayloadBytes: Int = 1500) {
        precondition(slots > 0 && maxPayloadBytes > 0)
        var n = 1
        while n < slots { n <<= 1 }
        slotCount = n
        mask = n - 1
        self.maxPayloadBytes = maxPayloadBytes
        bytes = .allocate(byteCount: n * maxPayloadBytes, alignment: 16)
        bytes.initializeMemory(as: UInt8.self, repeating: 0, count: n * maxPayloadBytes)
        lengths = .allocate(capacity: n); lengths.initialize(repeating: 0, count: n)
        sequences = .allocate(capacity: n); sequences.initialize(repeating: 0, count: n)
        timestamps = .allocate(capacity: n); timestamps.initialize(repeating: 0, count: n)
        markers = .allocate(capacity: n); markers.initialize(repeating: false, count: n)
        arrivals = .allocate(capacity: n); arrivals.initialize(repeating: 0, count: n)
    }

    deinit {
        bytes.deallocate(); lengths.deallocate(); sequences.deallocate()
        timestamps.deallocate(); markers.deallocate(); arrivals.deallocate()
    }

    /// Packets waiting for the consumer (approximate when read from a third thread).
    public var count: Int { written.load(ordering: .acquiring) - consumed.load(ordering: .acquiring) }

    /// Producer side (network thread): copies the payload and metadata into a free slot.
    @discardableResult
    public func push(payload: UnsafeRawBufferPointer, sequence: UInt16, timestamp: UInt32,
                     marker: Bool, arrivalNanos: UInt64) -> Bool {
        guard payload.count <= maxPayloadBytes else { oversize.increment(); return false }
        let w = written.load(ordering: .relaxed)
        let r = consumed.load(ordering: .acquiring)
        guard w - r < slotCount else { full.increment(); return false }
        let i = w & mask
        if let base = payload.baseAddress, payload.count > 0 {
            (bytes + i * maxPayloadBytes).copyMemory(from: base, byteCount: payload.count)
        }
        lengths[i] = payload.count
        sequences[i] = sequence
        timestamps[i] = timestamp
        markers[i] = marker
        arrivals[i] = arrivalNanos
        written.store(w + 1, ordering: .releasing)
        return true
    }

    /// Consumer side: the oldest packet, or nil when empty. Valid until `pop()`.
    @inline(__always)
    public func peek() -> QueuedPacket? {
        let r = consumed.load(ordering: .relaxed)
        guard written.load(ordering: .acquiring) != r else { return nil }
        let i = r & mask
        return QueuedPacket(
            sequence: sequences[i], timestamp: timestamps[i], marker: markers[i], arrivalNanos: arrivals[i],
            payload: UnsafeRawBufferPointer(start: bytes + i * maxPayloadBytes, count: lengths[i]))
    }

    /// Empties the queue (a new stream reuses the slot); `full`/`oversize` keep counting.
    /// Precondition: neither producer nor consumer runs during the call; the caller hands the
    /// queue over with its own atomics before and after.
    public func reset() {
        written.store(0, ordering: .releasing)
        consumed.store(0, ordering: .releasing)
    }

    /// Consumer side: releases the slot returned by the last `peek()`.
    @inline(__always)
    public func pop() {
        let r = consumed.load(ordering: .relaxed)
        guard written.load(ordering: .acquiring) != r else { return }
        consumed.store(r + 1, ordering: .releasing)
    }
}
