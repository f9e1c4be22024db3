import Synchronization

/// Lock-free single-producer single-consumer ring of 16-bit samples.
///
/// The audio thread is on one side, a non-real-time thread on the other. Neither side ever waits:
/// a full ring makes `write` return false (the caller counts a drop), an empty one makes `read`
/// return false (the caller plays silence). Storage is allocated once, in `init`.
public final class SampleRing: @unchecked Sendable {
    // @unchecked: `storage` is shared, but the head/tail protocol gives each slot to one side at a time.
    public let capacity: Int
    private let mask: Int
    private let storage: UnsafeMutablePointer<Int16>
    /// Total samples ever written / read; only the producer stores `written`, only the consumer `read`.
    private let written = Atomic<Int>(0)
    private let consumed = Atomic<Int>(0)

    /// - Parameter minimumCapacity: rounded up to a power of two.
    public init(minimumCapacity: Int) {
        precondition(minimumCapacity > 0)
        var size = 1
        while size < minimumCapacity { size <<= 1 }
        capacity = size
        mask = size - 1
        storage = .allocate(capacity: size)
        storage.initialize(repeating: 0, count: size)
    }

    deinit { storage.deallocate() }

    /// Samples ready to be read.
    public var availableToRead: Int {
        written.load(ordering: .acquiring) - consumed.load(ordering: .acquiring)
    }

    /// Free space for the producer.
    public var availableToWrite: Int { capacity - availableToRead }

    /// Producer side: copies all of `samples` or nothing.
    @discardableResult
    public func write(_ samples: UnsafePointer<Int16>, count: Int) -> Bool {
        let w = written.load(ordering: .relaxed)
        let r = consumed.load(ordering: .acquiring)
        guard capacity - (w - r) >= count else { return false }
        copyIn(samples, count: count, at: w)
        written.store(w + count, ordering: .releasing)
        return true
    }

    /// Consumer side: fills all of `into` or nothing.
    @discardableResult
    public func read(into out: UnsafeMutablePointer<Int16>, count: Int) -> Bool {
        let r = consumed.load(ordering: .relaxed)
        let w = written.load(ordering: .acquiring)
        guard w - r >= count else { return false }
        copyOut(out, count: count, at: r)
        consumed.store(r + count, ordering: .releasing)
        return true
    }

    /// Consumer side: throws away everything buffered (e.g. to cut latency after a stall).
    public func discardAll() {
        consumed.store(written.load(ordering: .acquiring), ordering: .releasing)
    }

    private func copyIn(_ src: UnsafePointer<Int16>, count: Int, at position: Int) {
        let start = position & mask
        let first = min(count, capacity - start)
        (storage + start).update(from: src, count: first)
        if first < count { storage.update(from: src + first, count: count - first) }
    }

    private func copyOut(_ dst: UnsafeMutablePointer<Int16>, count: Int, at position: Int) {
        let start = position & mask
        let first = min(count, capacity - start)
        dst.update(from: storage + start, count: first)
        if first < count { (dst + first).update(from: storage, count: count - first) }
    }
}
