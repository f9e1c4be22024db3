import Jitter
import SignalTools
import XCTest

/// A silence of the network that ends in another timeline (the sender's capture came back from a
/// stall or a slow start: every later packet later by the same amount) is no jitter: the target
/// must not keep that offset, and a DTX pause (the same timeline) must keep its history.
final class JitterTimelineTests: XCTestCase {
    private let ms = TraceHarness.ms

    /// `count` packets from `index` on, one per 10 ms of sender time, arriving `offsetMs` after their
    /// send time plus up to `jitterMs` of seeded jitter.
    private func packets(from index: Int, count: Int, sentAt t0: UInt64, offsetMs: UInt64, jitterMs: UInt64 = 0, seed: UInt64 = 1) -> [TracePacket] {
        var rng = SplitMix64(seed: seed)
        return (index..<index + count).map { k in
            let jitter = jitterMs == 0 ? 0 : UInt64.random(in: 0...(jitterMs * ms), using: &rng)
            return TracePacket(sequence: UInt16(truncatingIfNeeded: k), timestamp: UInt32(truncatingIfNeeded: k * 480),
                               arrival: t0 + UInt64(k) * 10 * ms + 2 * ms + offsetMs * ms + jitter)
        }
    }

    /// As a daemon's first second on the rig: five packets, the sender's capture stalls for 0.9 s
    /// and comes back (its timestamps skip the lost time), and from then on every packet comes
    /// 37 ms later than the first five did.
    func testATimelineMovedAcrossASilenceIsLearnedAgainInsteadOfKeptAsJitter() {
        func run(shifted: Bool) -> (target: Double, dropped: Int, newTimelines: Int) {
            let h = TraceHarness()
            let t0 = h.clock.now
            h.deliver(packets(from: 0, count: 5, sentAt: t0, offsetMs: 0))
            h.deliver(packets(from: 99, count: 500, sentAt: t0, offsetMs: shifted ? 37 : 0))
            _ = h.run(250)  // 2.5 s: the stream's first second and what follows
            let droppedBefore = h.stats.dropped.load
            _ = h.run(300)  // the talk: 3 s more
            return (h.stats.targetDelayMs.load, h.stats.dropped.load - droppedBefore, h.stats.newTimelines.load)
        }
        let shifted = run(shifted: true)
        XCTAssertEqual(shifted.newTimelines, 1, "the moved timeline is recognised once")
        XCTAssertLessThanOrEqual(shifted.target, 20, "the target learned from the new timeline, not its 37 ms offset")
        XCTAssertEqual(shifted.dropped, 0, "no frame dropped in the 3 s after the start")
        let same = run(shifted: false)
        XCTAssertEqual(same.newTimelines, 0, "a silence on the same timeline is only a silence")
    }

    /// As a daemon's start on the rig when its capture stalled before the first read: the sender
    /// sends only the newest five frames of its backlog, together (the oldest 46 ms old), then
    /// one frame every 10 ms on the path's own transit. The backlog's age is no jitter of the path.
    func testAStreamThatOpensWithTheSendersBacklogLearnsThePathNotTheBacklogsAge() {
        func run(backlog: Bool) -> (target: Double, dropped: Int) {
            let h = TraceHarness()
            let t0 = h.clock.now
            let first = backlog ? 5 : 0
            var trace: [TracePacket] = (0..<first).map { k in
                // Frames 0...4 captured 50-10 ms before they leave together at t0 + 50 ms.
                TracePacket(sequence: UInt16(k), timestamp: UInt32(k * 480), arrival: t0 + 50 * ms + UInt64(k) * ms / 5)
            }
            trace += (first..<first + 600).map { k in
                TracePacket(sequence: UInt16(k), timestamp: UInt32(k * 480), arrival: t0 + UInt64(k) * 10 * ms + 10 * ms + ms / 2)
            }
            h.deliver(trace)
            _ = h.run(150)  // the stream's first 1.5 s
            let droppedBefore = h.stats.dropped.load
            _ = h.run(300)  // the talk: 3 s more
            return (h.stats.targetDelayMs.load, h.stats.dropped.load - droppedBefore)
        }
        let plain = run(backlog: false)
        let opened = run(backlog: true)
        XCTAssertEqual(opened.target, plain.target, accuracy: 2, "the target as without the backlog (\(plain.target) ms)")
        XCTAssertEqual(opened.dropped, 0, "no frame dropped in the 3 s after the start")
    }

    /// 40 ms of jitter, then a DTX-like pause of 400 ms on the same timeline: the target learned
    /// before the pause stays (forgetting it would underrun at each talk spurt's start).
    func testAPauseOnTheSameTimelineKeepsTheLearnedTarget() {
        let h = TraceHarness()
        let t0 = h.clock.now
        h.deliver(packets(from: 0, count: 300, sentAt: t0, offsetMs: 0, jitterMs: 40))
        h.deliver(packets(from: 340, count: 300, sentAt: t0, offsetMs: 0, jitterMs: 40, seed: 2))
        _ = h.run(300)
        let before = h.stats.targetDelayMs.load
        XCTAssertGreaterThan(before, 35, "40 ms of jitter grows the target")
        _ = h.run(60)  // the pause and the first packets after it
        XCTAssertEqual(h.stats.newTimelines.load, 0)
        XCTAssertGreaterThanOrEqual(h.stats.targetDelayMs.load, before - 1, "the target survives the pause")
    }
}
