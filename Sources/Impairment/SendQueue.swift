/// Which way a pending datagram goes.
enum RelayDirection: Sendable {
    /// Client → target.
    case forward
    /// Target → last client.
    case reverse
}

/// A datagram waiting for its send time.
struct PendingSend {
    let dueNs: UInt64
    /// Arrival order: breaks ties so equal send times keep arrival order (deterministic, FIFO).
    let order: UInt64
    let direction: RelayDirection
    let payload: [UInt8]

    func precedes(_ other: PendingSend) -> Bool {
        dueNs != other.dueNs ? dueNs < other.dueNs : order < other.order
    }
}

/// Bounded binary min-heap of pending sends, earliest first.
struct SendQueue {
    let capacity: Int
    private var heap: [PendingSend] = []

    init(capacity: Int) {
        self.capacity = capacity
        heap.reserveCapacity(min(capacity, 4096))
    }

    var count: Int { heap.count }
    var first: PendingSend? { heap.first }

    /// False (and nothing stored) when the queue is full.
    mutating func push(_ item: PendingSend) -> Bool {
        guard heap.count < capacity else { return false }
        heap.append(item)
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].precedes(heap[parent]) else { break }
            heap.swapAt(child, parent)
            child = parent
        }
        return true
    }

    mutating func popFirst() -> PendingSend? {
        guard !heap.isEmpty else { return nil }
        heap.swapAt(0, heap.count - 1)
        let top = heap.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1, right = left + 1
            var best = parent
            if left < heap.count && heap[left].precedes(heap[best]) { best = left }
            if right < heap.count && heap[right].precedes(heap[best]) { best = right }
            if best == parent { break }
            heap.swapAt(parent, best)
            parent = best
        }
        return top
    }

    mutating func removeAll() { heap.removeAll() }

    func item(at index: Int) -> PendingSend { heap[index] }
}

extension SendQueue {
    /// How many pending sends go in `direction` (used once, at stop, for accounting).
    func count(of direction: RelayDirection) -> Int {
        var n = 0
        for i in 0..<count where item(at: i).direction == direction { n += 1 }
        return n
    }
}
