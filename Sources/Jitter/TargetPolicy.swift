/// The delay a jitter buffer aims for, from the transit of the packets it received: measure
/// (`measure`, the backlog filter), estimate (`DelayEstimator`, the percentile) and decide (`refresh`,
/// the grow-fast/shrink-slow-and-in-a-pause rule and the FEC hold). The playout state machine applies it.
///
/// Transit is `arrival - timestamp` in ns with an unknown offset; only differences matter.
/// Audio thread only; nothing allocates after `init`.
public struct TargetPolicy: ~Copyable {
    private let estimator: DelayEstimator
    private let frameNs: Int64
    private let minDelayNs: Int64
    private let maxDelayNs: Int64
    private let shrinkIntervalNs: Int64
    private let shrinkPauseNs: Int64
    private let shrinkUnpausedNs: Int64
    private let backlogSpacingNs: Int64
    private let fecHoldNs: Int64
    private let tailMarginNs: Int64
    private let initialNs: Int64

    /// The target delay, ns.
    public private(set) var targetNs: Int64
    private var lastChange: Int64 = 0
    /// Since when the stream has been quiet (see `refresh`).
    private var quietSince: Int64 = .min / 2
    /// Until when the desired delay stays at two frames or more for FEC look-ahead (.min: no hold).
    private var fecHoldUntil: Int64 = .min
    /// Arrival of the last packet measured, and whether it came after a silence of the network.
    private var lastArrival: Int64 = .min / 2
    private var inBacklog = false
    /// Whether the backlog being received opened the stream (see `measure`).
    private var backlogOpensStream = false
    /// A silence of the network longer than `newTimelineGapNs` may end in another timeline: the
    /// sender's capture came back from a stall or a sound server's slow start, and every packet
    /// after it is later (or earlier) by the same amount. That is no jitter, and a window holding
    /// both would keep the target high for seconds, shrunk by drops while people talk. So the first
    /// `timelineCheckPackets` after such a silence are compared with the window before it: a
    /// minimum transit moved by more than the jitter seen before (or a frame) forgets the window
    /// before the silence. A DTX pause keeps its timeline, and so its history.
    private let newTimelineGapNs: Int64
    static let timelineCheckPackets = 10
    private var afterSilence = 0  // packets measured since the silence; 0: no check pending
    private var minimumBefore: Int64 = 0, jitterBefore: Int64 = 0, minimumAfter: Int64 = .max

    public init(settings: JitterSettings) {
        frameNs = Int64(settings.frameSize) * 1_000_000_000 / Int64(settings.sampleRate)
        minDelayNs = Int64(settings.minDelayMs * 1e6)
        maxDelayNs = Int64(settings.maxDelayMs * 1e6)
        shrinkIntervalNs = Int64(settings.shrinkIntervalMs * 1e6)
        shrinkPauseNs = Int64(settings.shrinkPauseMs * 1e6)
        shrinkUnpausedNs = Int64(settings.shrinkUnpausedMs * 1e6)
        backlogSpacingNs = Int64(settings.backlogSpacingFrames * Double(frameNs))
        fecHoldNs = Int64(settings.fecHoldMs * 1e6)
        tailMarginNs = Int64(settings.tailMarginFrames * Double(frameNs))
        estimator = DelayEstimator(windowCount: settings.windowCount, percentile: settings.percentile, floor: settings.floorPercentile,
                                   tail: settings.tailPercentile)
        // Before any packet: what a path without jitter needs. Jitter grows it at once.
        initialNs = Int64(settings.jitterFreeTargetMs * 1e6)
        targetNs = initialNs
        newTimelineGapNs = Int64(settings.resetGapMs * 1e6)
    }

    /// Forgets every measurement and returns to the initial target.
    public mutating func reset() {
        estimator.reset()
        targetNs = initialNs
        lastChange = 0
        quietSince = .min / 2
        fecHoldUntil = .min
        lastArrival = .min / 2
        inBacklog = false
        afterSilence = 0
    }

    /// The fastest transit in the window, ns: a frame stamped t is `now - (t + minimumTransit)` late.
    public var minimumTransitNs: Int64 { estimator.minimum }
    /// The transit percentile above the fastest, ns (as of the last `refresh`).
    public var jitterNs: Int64 { estimator.percentileRelative }
    /// The low transit percentile above the fastest, ns (`JitterSettings.floorPercentile`).
    public var floorNs: Int64 { estimator.floorRelative }
    /// Whether the FEC look-ahead is on (`fecHoldMs` > 0).
    public var holdsForFEC: Bool { fecHoldNs > 0 }

    /// Records one packet's transit. `firstOfStream`: the first packet since the store was emptied,
    /// whose transit seconds away from the window's means a new timestamp base (a sender restart).
    public mutating func measure(transitNs: Int64, arrivalNs: Int64, firstOfStream: Bool) -> Measured {
        if firstOfStream && estimator.count > 0 && abs(transitNs - estimator.minimum) > 2_000_000_000 {
            estimator.reset()
        }
        // A stall's backlog (the network went silent for longer than the buffer holds, then
        // delivered everything at once) is one event, not a run of jittery packets: only its
        // first packet counts. A stall now and then stays out of the percentile and costs its
        // backlog once; stalls frequent enough to be the network's rhythm still reach it.
        // A stream that opens with a backlog is the sender's: it started late (its capture stalled
        // and it sends only the newest frames, together) and the older ones waited in its queue,
        // not on the path. There the backlog's fastest packet is the path's transit: counting the
        // first would hold the target at the backlog's age for seconds, shrunk by drops in talk.
        let gap = arrivalNs - lastArrival
        lastArrival = arrivalNs
        if gap > newTimelineGapNs && estimator.count > 0 && afterSilence == 0 {
            estimator.refresh()
            minimumBefore = estimator.minimum
            jitterBefore = estimator.percentileRelative
            minimumAfter = .max
            afterSilence = 1
        }
        if gap > targetNs + frameNs {
            inBacklog = true
            backlogOpensStream = estimator.count == 0
        } else if inBacklog && gap <= backlogSpacingNs {
            if backlogOpensStream { estimator.lowerNewest(to: transitNs) }
            return .leftOutOfBacklog
        } else {
            inBacklog = false
        }
        estimator.add(transitNanos: transitNs)
        return afterSilence > 0 && checkTimeline(transitNs) ? .newTimeline : .counted
    }

    /// What `measure` did with a packet.
    public enum Measured: Sendable {
        case counted
        /// Left out: one of a stall's backlog after its first packet.
        case leftOutOfBacklog
        /// Counted, and it ended the check after a silence with a new timeline: the window before was forgotten.
        case newTimeline
    }

    /// Returns whether the packets after the silence are on a new timeline.
    private mutating func checkTimeline(_ transitNs: Int64) -> Bool {
        minimumAfter = min(minimumAfter, transitNs)
        guard afterSilence == Self.timelineCheckPackets else { afterSilence += 1; return false }
        afterSilence = 0
        guard abs(minimumAfter - minimumBefore) > max(jitterBefore, frameNs) else { return false }
        estimator.keepNewest(Self.timelineCheckPackets)
        // Learned again from the new timeline's packets at the next refresh, up or down.
        targetNs = initialNs
        lastChange = 0
        return true
    }

    /// Re-reads the percentile if packets came since the last call and moves the target.
    /// `quietSince`: since when the stream played nothing above the quiet level (a shrink waits
    /// for a pause). Returns whether the percentile was re-read.
    public mutating func refresh(now: Int64, quietSince: Int64) -> Bool {
        // While the packets after a silence are checked, the target waits: a window holding two
        // timelines would grow it by their offset.
        self.quietSince = quietSince
        guard afterSilence == 0, estimator.refresh() else { return false }
        decide(now: now)
        return true
    }

    /// Holds the desired delay at two frames or more for `fecHoldMs` from now (a loss FEC repaired
    /// or would have repaired) and applies it at once. Nothing when the look-ahead is off.
    public mutating func holdForFEC(now: Int64) {
        guard fecHoldNs > 0 else { return }
        fecHoldUntil = now + fecHoldNs
        decide(now: now)
    }

    private mutating func decide(now: Int64) {
        let p = estimator.percentileRelative
        // A packet of relative transit r is in time iff r <= delay, and the delay never sits below
        // the band's lower edge, target - frame/2 (where a drift corrector holds it): p + margin.
        // The margin is what the path needs: how far its tail (the window's 99th percentile) reaches
        // beyond p, plus a quarter frame for the corrector's dead band, tolerance and reading noise;
        // at most half a frame. Zero margin failed: through the corrector its underruns made the
        // buffer drop every minute or so with a 200 ppm sender (DriftTraceTests).
        let margin = min(frameNs / 2, estimator.tailRelative - p + tailMarginNs)
        let fecFloor = now < fecHoldUntil ? 2 * frameNs : 0
        let desired = max(minDelayNs, min(maxDelayNs, max(p + frameNs / 2 + margin, fecFloor)))
        if desired > targetNs {
            targetNs = desired
            lastChange = now
        } else if desired < targetNs, now - lastChange >= shrinkIntervalNs,
                  now - quietSince >= shrinkPauseNs || now - lastChange >= shrinkUnpausedNs {
            // Half the way down (at least a frame): a target left high by one burst comes back in a
            // few intervals, while a jitter that keeps returning still finds the delay it needs.
            targetNs = max(desired, targetNs - max(frameNs, (targetNs - desired) / 2))
            lastChange = now
        }
    }
}

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
    private var floorCache: Int64 = 0
    private var tailCache: Int64 = 0
    private var dirty = false
    private let fraction: Double
    private let floorFraction: Double
    private let tailFraction: Double

    public init(windowCount: Int, percentile: Double, floor: Double = 0.1, tail: Double = 0.99) {
        precondition(windowCount > 0 && percentile > 0 && percentile <= 1 && floor > 0 && floor <= 1 && tail >= percentile && tail <= 1)
        self.windowCount = windowCount
        fraction = percentile
        floorFraction = floor
        tailFraction = tail
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

    public func reset() { next = 0; count = 0; dirty = false; percentileCache = 0; floorCache = 0; tailCache = 0; minimum = 0 }

    /// Replaces the newest transit by `transitNanos` if that is faster.
    public func lowerNewest(to transitNanos: Int64) {
        guard count > 0 else { return }
        let newest = (next - 1 + windowCount) % windowCount
        if transitNanos < ring[newest] { ring[newest] = transitNanos; dirty = true }
    }

    /// Forgets all but the newest `k` transits.
    public func keepNewest(_ k: Int) {
        let k = min(k, count)
        for i in 0..<k { scratch[i] = ring[(next - k + i + windowCount) % windowCount] }
        for i in 0..<k { ring[i] = scratch[i] }
        count = k
        next = k % windowCount
        dirty = true
    }

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
        percentileCache = select(rank(fraction), count) - lo
        // Selection only reorders the scratch copy: another one on it is as good as on the ring.
        floorCache = select(rank(floorFraction), count) - lo
        tailCache = select(rank(tailFraction), count) - lo
        return true
    }

    private func rank(_ fraction: Double) -> Int { max(0, min(count - 1, Int((Double(count) * fraction).rounded(.up)) - 1)) }

    /// The chosen percentile of transit minus the window minimum, ns (as of the last `refresh`).
    public var percentileRelative: Int64 { percentileCache }
    /// The floor percentile of transit minus the window minimum, ns (as of the last `refresh`).
    public var floorRelative: Int64 { floorCache }
    /// The tail percentile of transit minus the window minimum, ns (as of the last `refresh`).
    public var tailRelative: Int64 { tailCache }

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
