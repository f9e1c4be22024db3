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
