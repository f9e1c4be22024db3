import RealTime
import Synchronization

// Where a received packet waits until it is played: the lock-free `PacketQueue` that hands it
// from the network thread to the audio thread, then the jitter buffer's `ReorderStore`, which
// holds it by sequence number.

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

// MARK: - By sequence number (audio thread)

/// What a slot of the reorder store holds for its sequence number.
public enum SlotState: UInt8, Sendable {
    case empty
    /// A packet waiting to be played.
    case filled
    /// Played (or skipped): a copy arriving now is a duplicate, not a late packet.
    case played
}

/// The packets of one stream by sequence number, in preallocated slots (`sequence & mask`), with
/// the oldest and newest sequence stored. Audio thread only; nothing here allocates after `init`.
public struct ReorderStore: ~Copyable {
    /// Slots (a power of two).
    public let capacity: Int
    private let mask: Int
    private let maxPayload: Int
    private let payloads: UnsafeMutableRawPointer
    private let lengths: UnsafeMutablePointer<Int>
    private let states: UnsafeMutablePointer<SlotState>
    private let sequences: UnsafeMutablePointer<UInt16>
    /// Extended (64-bit) RTP timestamps.
    private let timestamps: UnsafeMutablePointer<Int64>
    private let markers: UnsafeMutablePointer<Bool>

    /// Whether any packet is stored (then `lowest` and `highest` are valid).
    public private(set) var haveAny = false
    /// Oldest sequence stored since the store was last cleared (the start of playout).
    public private(set) var lowest: UInt16 = 0
    /// Newest sequence stored.
    public private(set) var highest: UInt16 = 0

    public init(capacity: Int, maxPayloadBytes: Int) {
        precondition(capacity > 0 && capacity & (capacity - 1) == 0 && capacity <= 16_384,
                     "a power of two within 16-bit sequence arithmetic")
        self.capacity = capacity
        mask = capacity - 1
        maxPayload = maxPayloadBytes
        payloads = .allocate(byteCount: capacity * maxPayloadBytes, alignment: 16)
        payloads.initializeMemory(as: UInt8.self, repeating: 0, count: capacity * maxPayloadBytes)
        lengths = .allocate(capacity: capacity); lengths.initialize(repeating: 0, count: capacity)
        states = .allocate(capacity: capacity); states.initialize(repeating: .empty, count: capacity)
        sequences = .allocate(capacity: capacity); sequences.initialize(repeating: 0, count: capacity)
        timestamps = .allocate(capacity: capacity); timestamps.initialize(repeating: 0, count: capacity)
        markers = .allocate(capacity: capacity); markers.initialize(repeating: false, count: capacity)
    }

    deinit {
        payloads.deallocate(); lengths.deallocate(); states.deallocate()
        sequences.deallocate(); timestamps.deallocate(); markers.deallocate()
    }

    /// Signed distance `a - b` in sequence space.
    @inline(__always)
    public static func distance(_ a: UInt16, _ b: UInt16) -> Int { Int(Int16(bitPattern: a &- b)) }

    /// Empties every slot.
    public mutating func clear() {
        states.update(repeating: .empty, count: capacity)
        haveAny = false
    }

    /// Empties every slot and forgets their sequence numbers (a new stream).
    public mutating func reset() {
        clear()
        sequences.update(repeating: 0, count: capacity)
        lowest = 0
        highest = 0
    }

    /// The state of `sequence`'s slot if that slot holds `sequence`, else nil.
    @inline(__always)
    public func state(of sequence: UInt16) -> SlotState? {
        let slot = Int(sequence) & mask
        return sequences[slot] == sequence ? states[slot] : nil
    }

    @inline(__always)
    public func isFilled(_ sequence: UInt16) -> Bool { state(of: sequence) == .filled }

    /// Whether a payload of `count` bytes fits a slot.
    public func fits(_ count: Int) -> Bool { count <= maxPayload }

    /// Stores a packet in its slot. The caller has checked `fits` and the distance to playout.
    public mutating func store(sequence: UInt16, timestamp: Int64, marker: Bool, payload: UnsafeRawBufferPointer) {
        let slot = Int(sequence) & mask
        if let base = payload.baseAddress, payload.count > 0 {
            (payloads + slot * maxPayload).copyMemory(from: base, byteCount: payload.count)
        }
        lengths[slot] = payload.count
        sequences[slot] = sequence
        timestamps[slot] = timestamp
        markers[slot] = marker
        states[slot] = .filled
        if !haveAny {
            lowest = sequence; highest = sequence; haveAny = true
        } else {
            if Self.distance(sequence, lowest) < 0 { lowest = sequence }
            if Self.distance(sequence, highest) > 0 { highest = sequence }
        }
    }

    /// Marks a filled slot played.
    @inline(__always)
    public func markPlayed(_ sequence: UInt16) { states[Int(sequence) & mask] = .played }

    /// The extended timestamp stored for `sequence` (valid while it is filled).
    @inline(__always)
    public func timestamp(_ sequence: UInt16) -> Int64 { timestamps[Int(sequence) & mask] }

    @inline(__always)
    public func marker(_ sequence: UInt16) -> Bool { markers[Int(sequence) & mask] }

    @inline(__always)
    public func payload(_ sequence: UInt16) -> UnsafeRawBufferPointer {
        let slot = Int(sequence) & mask
        return UnsafeRawBufferPointer(start: payloads + slot * maxPayload, count: lengths[slot])
    }
}
