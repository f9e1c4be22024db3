/// Relative transit delay statistics over a sliding window of the last `windowCount` packets.
///
/// Each packet's transit is `arrival - timestamp` in ns (an unknown constant offset included);
/// relative to the window's minimum it is that packet's queuing/jitter delay. `percentileRelative`
/// is found with an in-place selection on a preallocated scratch copy: no allocation after `init`.
public final class DelayEstimator {
    public let windowCount: Int
    private let ring: UnsafeMutablePointer<Int64>
    private let scratch: UnsafeMutablePointer<Int64>
    private var next = 0
    public private(set) var count = 0
    /// Minimum transit over the window (valid when `count > 0`).
    public private(set) var minimum: Int64 = 0
    private var percentileCache: Int64 = 0
    private var dirty = false
    private let fraction: Double

    public init(windowCount: Int, percentile: Double) {
        precondition(windowCount > 0 && percentile > 0 && percentile <= 1)
        self.windowCount = windowCount
        fraction = percentile
        ring = .allocate(capacity: windowCount); ring.initialize(repeating: 0, count: windowCount)
        scratch = .allocate(capacity: windowCount); scratch.initialize(repeating: 0, count: windowCount)
    }

    deinit { ring.deallocate(); scratch.deallocate() }

    public func add(transitNanos: Int64) {
        ring[next] = transitNanos
        next = next + 1 == windowCount ? 0 : next + 1
        if count < windowCount { count += 1 }
        dirty = true
    }

    public func reset() { next = 0; count = 0; dirty = false; percentileCache = 0; minimum = 0 }

    /// Recomputes the minimum and the percentile if packets were added since the last call.
    /// Returns true when it recomputed.
    @discardableResult
    public func refresh() -> Bool {
        guard dirty, count > 0 else { return false }
        dirty = false
        var lo = Int64.max
        for i in 0..<count {
            let v = ring[i]
            scratch[i] = v
            if v < lo { lo = v }
        }
        minimum = lo
        var k = Int((Double(count) * fraction).rounded(.up)) - 1
        k = max(0, min(count - 1, k))
        percentileCache = select(k, count) - lo
        return true
    }

    /// The chosen percentile of transit minus the window minimum, ns (as of the last `refresh`).
    public var percentileRelative: Int64 { percentileCache }

    /// k-th smallest of scratch[0..<n] (iterative quickselect, median-of-three pivot).
    private func select(_ k: Int, _ n: Int) -> Int64 {
        var left = 0
        var right = n - 1
        let a = scratch
        while right > left {
            let mid = left + (right - left) / 2
            // median of three into a[mid]
            if a[mid] < a[left] { a.swapAt(mid, left) }
            if a[right] < a[left] { a.swapAt(right, left) }
            if a[right] < a[mid] { a.swapAt(right, mid) }
            let pivot = a[mid]
            var i = left
            var j = right
            while i <= j {
                while a[i] < pivot { i += 1 }
                while a[j] > pivot { j -= 1 }
                if i <= j { a.swapAt(i, j); i += 1; j -= 1 }
            }
            if k <= j { right = j } else if k >= i { left = i } else { return a[k] }
        }
        return a[k]
    }
}

extension UnsafeMutablePointer where Pointee == Int64 {
    @inline(__always) fileprivate func swapAt(_ i: Int, _ j: Int) {
        let t = self[i]; self[i] = self[j]; self[j] = t
    }
}
