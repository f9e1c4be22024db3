import IntercomConfig
import Foundation
import CAllocCounter
import IntercomDaemon
import Jitter
import TestSupport
import SignalTools
import XCTest

// MARK: - Test doubles

private final class SimClock: @unchecked Sendable {
    var now: UInt64 = 1_000_000_000
}

private struct SimPacket {
    var sequence: UInt16
    var timestamp: UInt32
    var marker = false
    var arrival: UInt64
}

private enum Output: Equatable {
    case silence, decoded(UInt16), fec(UInt16), concealed
}

private let ms: UInt64 = 1_000_000
/// The daemon's target on a path without jitter, which these tests run at (half a frame and the
/// least margin, or `jitter.min_delay_ms` where that is more).
private let jitterFreeMs = JitterSettings(DaemonConfig.default).jitterFreeTargetMs

/// Feeds packets by arrival time and reads one 10 ms frame per simulated cycle.
private final class Harness {
    let clock = SimClock()
    let buffer: JitterBuffer
    let start: UInt64
    var pending: [SimPacket] = []
    var next = 0
    var cycle = 0
    var frame = [Int16](repeating: 0, count: 480)

    init(settings: JitterSettings = JitterSettings(.default), decoder: TagDecoder = TagDecoder()) {
        let c = clock
        buffer = JitterBuffer(settings: settings, decoder: decoder, clock: { c.now })
        start = clock.now
    }

    /// Packets to deliver (any order; sorted by arrival here).
    func schedule(_ packets: [SimPacket]) {
        pending.append(contentsOf: packets[...])
        pending[next...].sort { $0.arrival < $1.arrival }
    }

    /// One audio cycle at start + cycle * 10 ms + 7 ms.
    @discardableResult
    func step() -> Output {
        clock.now = start + UInt64(cycle) * 10 * ms + 7 * ms
        cycle += 1
        while next < pending.count, pending[next].arrival <= clock.now {
            let p = pending[next]
            next += 1
            var seq = p.sequence
            let pushed = withUnsafeBytes(of: &seq) { raw in
                buffer.queue.push(payload: raw, sequence: p.sequence, timestamp: p.timestamp,
                                  marker: p.marker, arrivalNanos: p.arrival)
            }
            precondition(pushed)
        }
        let audible = frame.withUnsafeMutableBufferPointer { buffer.readFrame(into: $0.baseAddress!, count: 480) }
        switch frame[0] {
        case 0:
            XCTAssertFalse(audible)
            XCTAssertTrue(frame.allSatisfy { $0 == 0 })
            return .silence
        case TagDecoder.decoded: XCTAssertTrue(audible); return .decoded(UInt16(bitPattern: frame[1]))
        case TagDecoder.fec: XCTAssertTrue(audible); return .fec(UInt16(bitPattern: frame[1]))
        default: XCTAssertTrue(audible); return .concealed
        }
    }

    func run(_ cycles: Int) -> [Output] { (0..<cycles).map { _ in step() } }

    /// Packet k sent at start + k * 10 ms, timestamps from `ts0`, sequence from `seq0`.
    func packet(_ k: Int, seq0: UInt16 = 1000, ts0: UInt32 = 90_000, transit: UInt64 = 5 * ms) -> SimPacket {
        SimPacket(sequence: seq0 &+ UInt16(truncatingIfNeeded: k), timestamp: ts0 &+ UInt32(truncatingIfNeeded: k * 480),
                  arrival: start + UInt64(k) * 10 * ms + transit)
    }

    var stats: JitterStatistics { buffer.statistics }
}

private func decodedSequences(_ outputs: [Output]) -> [UInt16] {
    outputs.compactMap { if case let .decoded(s) = $0 { s } else { nil } }
}


// MARK: - Tests

final class JitterBufferTests: XCTestCase {
    func testPacketQueueIsFIFOCopiesPayloadsAndCountsFullAndOversize() {
        let q = PacketQueue(slots: 3, maxPayloadBytes: 8)  // rounds up to 4
        XCTAssertEqual(q.slotCount, 4)
        for i in 0..<4 {
            var bytes: [UInt8] = [UInt8(i), 1, 2]
            XCTAssertTrue(bytes.withUnsafeBytes {
                q.push(payload: $0, sequence: UInt16(i), timestamp: UInt32(i * 480), marker: i == 0, arrivalNanos: UInt64(i))
            })
            bytes[0] = 99  // the queue holds its own copy
        }
        let extra: [UInt8] = [0]
        XCTAssertFalse(extra.withUnsafeBytes { q.push(payload: $0, sequence: 9, timestamp: 0, marker: false, arrivalNanos: 0) })
        XCTAssertEqual(q.full.load, 1)
        let big = [UInt8](repeating: 0, count: 9)
        XCTAssertFalse(big.withUnsafeBytes { q.push(payload: $0, sequence: 9, timestamp: 0, marker: false, arrivalNanos: 0) })
        XCTAssertEqual(q.oversize.load, 1)
        for i in 0..<4 {
            guard let p = q.peek() else { return XCTFail("queue empty at \(i)") }
            XCTAssertEqual(p.sequence, UInt16(i))
            XCTAssertEqual(p.timestamp, UInt32(i * 480))
            XCTAssertEqual(p.marker, i == 0)
            XCTAssertEqual(p.arrivalNanos, UInt64(i))
            XCTAssertEqual(Array(p.payload), [UInt8(i), 1, 2])
            q.pop()
        }
        XCTAssertNil(q.peek())
        XCTAssertTrue(extra.withUnsafeBytes { q.push(payload: $0, sequence: 5, timestamp: 0, marker: false, arrivalNanos: 0) })
        XCTAssertEqual(q.count, 1)
    }

    /// The target keeps above the 95th percentile half a frame plus the margin the path's tail
    /// needs: how far the 99th percentile reaches beyond the 95th plus a quarter frame, at most
    /// half a frame. A path whose tail is short gets a quarter frame less than a frame in all; one
    /// with 3 % of its packets 4 ms further out keeps the whole frame.
    func testTheMarginAboveThePercentileIsWhatThePathsTailNeeds() {
        let settings = JitterSettings(daemonConfig { $0.jitter.minDelayMs = 0 })
        let frame = settings.frameMs
        func target(_ transitMs: (Int) -> Double) -> (target: Double, p95: Double) {
            var policy = TargetPolicy(settings: settings)
            for i in 0..<settings.windowCount {
                _ = policy.measure(transitNs: Int64(transitMs(i) * 1e6), arrivalNs: Int64(i) * 10_000_000, firstOfStream: i == 0)
            }
            _ = policy.refresh(now: 10_000_000_000, quietSince: 0)
            return (Double(policy.targetNs) / 1e6, Double(policy.jitterNs) / 1e6)
        }
        // Uniform over 0-2 ms: the 99th percentile is 0.08 ms beyond the 95th.
        let short = target { Double(($0 * 37) % 200) / 100 }
        XCTAssertEqual(short.p95, 1.9, accuracy: 0.02)
        XCTAssertEqual(short.target, short.p95 + frame / 2 + 0.08 + frame / 4, accuracy: 0.03)
        // The same with every 33rd packet 4 ms later: the tail takes the whole half frame.
        let tailed = target { i in Double((i * 37) % 200) / 100 + (i % 33 == 0 ? 4 : 0) }
        XCTAssertEqual(tailed.target, tailed.p95 + frame, accuracy: 0.01)
        // Nothing measured yet, or no jitter at all: three quarters of a frame.
        XCTAssertEqual(TargetPolicy(settings: settings).targetNs, Int64(0.75 * frame * 1e6))
        XCTAssertEqual(target { _ in 3 }.target, 0.75 * frame, accuracy: 0.001)
    }

    func testDelayEstimatorPercentileOverSlidingWindow() {
        let e = DelayEstimator(windowCount: 100, percentile: 0.95, floor: 0.05)
        for i in 0..<100 { e.add(transitNanos: 1_000 + Int64((i * 37) % 100)) }  // 1000...1099, shuffled
        XCTAssertTrue(e.refresh())
        XCTAssertEqual(e.minimum, 1_000)
        XCTAssertEqual(e.percentileRelative, 94)
        XCTAssertEqual(e.floorRelative, 4, "the fifth of 100")
        XCTAssertEqual(e.tailRelative, 98, "the 99th of 100")
        XCTAssertFalse(e.refresh(), "nothing new")
        for _ in 0..<100 { e.add(transitNanos: 5_000) }  // the old values slide out
        e.refresh()
        XCTAssertEqual(e.minimum, 5_000)
        XCTAssertEqual(e.percentileRelative, 0)
        XCTAssertEqual(e.floorRelative, 0)
    }

    func testInOrderStreamPlaysEveryPacketAcrossSequenceAndTimestampWrapWithDelayNearMinimum() {
        let h = Harness()
        h.schedule((0..<300).map { h.packet($0, seq0: 65_400, ts0: UInt32.max - 100 * 480) })
        let out = h.run(300)
        let played = decodedSequences(out)
        XCTAssertEqual(played, (0..<played.count).map { 65_400 &+ UInt16($0) })
        XCTAssertGreaterThanOrEqual(played.count, 297)
        XCTAssertFalse(out.contains(.concealed))
        XCTAssertEqual(h.stats.received.load, 300)
        XCTAssertEqual(h.stats.lost.load + h.stats.fecRecovered.load + h.stats.late.load + h.stats.inserted.load, 0)
        XCTAssertEqual(h.stats.targetDelayMs.load, jitterFreeMs, accuracy: 0.01)
        // Leading silence (buffering) is about the minimum delay.
        let leading = out.prefix { $0 == .silence }.count
        let floorFrames = Int(jitterFreeMs / 10)
        XCTAssertTrue((floorFrames...floorFrames + 1).contains(leading), "\(leading) frames of buffering")
        XCTAssertEqual(h.stats.currentDelayMs.load, jitterFreeMs, accuracy: 5.01)
    }

    func testInOrderCurrentDelayIsNearMinDelay() {
        let h = Harness()
        h.schedule((0..<200).map { h.packet($0) })
        _ = h.run(150)
        XCTAssertEqual(h.stats.currentDelayMs.load, jitterFreeMs, accuracy: 5.01)
        XCTAssertGreaterThan(h.buffer.bufferLevelMs, 0)
        XCTAssertLessThanOrEqual(h.buffer.bufferLevelMs, jitterFreeMs + 10)
    }

    func testReorderingWithinTheWindowIsFixed() {
        let h = Harness()
        // Every even packet is overtaken by the next one (arrives 8 ms late).
        h.schedule((0..<200).map { k in
            var p = h.packet(k)
            if k % 2 == 0 && k > 0 { p.arrival += 8 * ms }
            return p
        })
        let out = h.run(210)
        let played = decodedSequences(out)
        XCTAssertEqual(played, (0..<played.count).map { 1000 + UInt16($0) })
        XCTAssertGreaterThanOrEqual(played.count, 195)
        XCTAssertEqual(h.stats.late.load + h.stats.lost.load + h.stats.fecRecovered.load, 0)
    }

    func testDuplicatesAreCountedAndPlayedOnce() {
        let h = Harness()
        var packets = (0..<100).map { h.packet($0) }
        for k in stride(from: 10, to: 90, by: 10) {
            var d = h.packet(k); d.arrival += 3 * ms; packets.append(d)          // before it is played
            var e = h.packet(k + 1); e.arrival += 60 * ms; packets.append(e)     // after it was played
        }
        h.schedule(packets)
        let played = decodedSequences(h.run(110))
        XCTAssertEqual(played, (0..<played.count).map { 1000 + UInt16($0) })
        XCTAssertGreaterThanOrEqual(played.count, 97)
        XCTAssertEqual(h.stats.duplicates.load, 16)
        XCTAssertEqual(h.stats.late.load, 0)
        XCTAssertEqual(h.stats.received.load, 116)
    }

    func testSingleLossWithNextPacketPresentIsRecoveredByFEC() {
        let h = Harness()
        h.schedule((0..<100).filter { $0 != 50 }.map { h.packet($0) })
        let out = h.run(100)
        let i = out.firstIndex(of: .fec(1050))
        XCTAssertNotNil(i)
        if let i {
            XCTAssertEqual(out[i - 1], .decoded(1049))
            // The repair holds the delay at two frames for FEC look-ahead: at the 10 ms floor one
            // concealed frame is inserted to get there.
            XCTAssertEqual(Array(out[(i + 1)...(i + 2)]), [.concealed, .decoded(1051)])
        }
        XCTAssertEqual(h.stats.fecRecovered.load, 1)
        XCTAssertEqual(h.stats.lost.load, 0)
        XCTAssertEqual(h.stats.inserted.load, 1)
        XCTAssertEqual(out.filter { $0 == .concealed }.count, 1)
        XCTAssertEqual(h.stats.targetDelayMs.load, 20, accuracy: 0.01, "two frames while the FEC hold lasts")
    }

    func testBurstLossIsConcealedThenTheLastOneRecoveredByFEC() {
        let h = Harness()
        h.schedule((0..<100).filter { !(50...52).contains($0) }.map { h.packet($0) })
        let out = h.run(100)
        guard let i = out.firstIndex(of: .decoded(1049)) else { return XCTFail("1049 not played") }
        // Then one inserted frame: the repair holds the delay at two frames (FEC look-ahead).
        XCTAssertEqual(Array(out[(i + 1)...(i + 5)]), [.concealed, .concealed, .fec(1052), .concealed, .decoded(1053)])
        XCTAssertEqual(h.stats.lost.load, 2)
        XCTAssertEqual(h.stats.fecRecovered.load, 1)
        XCTAssertEqual(h.stats.inserted.load, 1)
        XCTAssertEqual(h.stats.currentDelayMs.load, 20, accuracy: 5.01, "the loss grows the delay only to the FEC hold's two frames")
    }

    /// A jitter-free link read 8 ms behind the packets: the buffer holds less than a frame, so a
    /// lost packet shows as an underrun and its successor (carrying FEC) comes 2 ms too late.
    private func lossyCleanLink(fecHoldMs: Double, decoder: TagDecoder = TagDecoder()) -> (Harness, [Output]) {
        let h = Harness(settings: JitterSettings(daemonConfig { $0.jitter.minDelayMs = 0 }).with { $0.fecHoldMs = fecHoldMs }, decoder: decoder)
        h.schedule((0..<1700).filter { $0 != 50 && $0 != 150 }.map { h.packet($0, transit: 9 * ms) })
        return (h, h.run(1700))
    }

    func testFECMissedByAnUnderrunAddsAFrameOfLookAheadSoTheNextLossIsRecoveredThenItExpires() {
        let (h, out) = lossyCleanLink(fecHoldMs: 10_000)
        guard let i = out.firstIndex(of: .decoded(1049)) else { return XCTFail("1049 not played") }
        XCTAssertEqual(out[i + 1], .concealed, "the first loss: nothing buffered, concealed")
        XCTAssertEqual(h.stats.fecMissed.load, 1, "its successor carried FEC but came late")
        XCTAssertTrue(out.contains(.fec(1150)), "the second loss comes back from FEC")
        XCTAssertEqual(h.stats.fecRecovered.load, 1)
        XCTAssertEqual(h.stats.lost.load, 1)
        XCTAssertGreaterThanOrEqual(h.stats.inserted.load, 1, "the look-ahead frame was inserted")
        // 10 s after the last loss (cycle ~150) the hold ends and the target comes back down.
        XCTAssertEqual(h.stats.targetDelayMs.load, jitterFreeMs, accuracy: 0.5)
        // Until the shrinks after the hold (at about 11.5 and 14.5 s; the second drops a frame of
        // this quiet stream to come down to less than a frame).
        let expected = (0..<1400).filter { $0 != 50 && $0 != 150 }.map { 1000 + UInt16($0) }
        XCTAssertEqual(Array(decodedSequences(out).prefix { $0 < 2400 }), expected, "every other frame played, once, in order")
    }

    /// A sender puts no FEC into silence: a loss there, before anyone talks, still tells that
    /// the link loses packets, and the look-ahead is in place when the loss in speech comes.
    func testALossInSilenceWithNoFECToMissAddsTheLookAheadBeforeTheTalk() {
        let silence = 1000..<1100
        let (h, out) = lossyCleanLink(fecHoldMs: 10_000, decoder: TagDecoder(carriesFECFrom: { !silence.contains(Int($0)) }))
        XCTAssertEqual(h.stats.fecMissed.load, 0, "the successor of the loss in silence carried no FEC to miss")
        XCTAssertTrue(out.contains(.fec(1150)), "the loss in speech comes back from FEC")
        XCTAssertEqual(h.stats.fecRecovered.load, 1)
        XCTAssertEqual(h.stats.lost.load, 1)
        guard let i = out.firstIndex(of: .decoded(1049)), let j = out.firstIndex(of: .decoded(1149)) else { return XCTFail("not played") }
        XCTAssertEqual(out[i...j].filter { $0 == .concealed }.count, 2, "the loss in silence and the look-ahead's frame, added there: \(out[i...(i + 4)])")
        XCTAssertGreaterThanOrEqual(h.stats.inserted.load, 1)
    }

    /// A sender whose speech comes without FEC (FEC off, or CELT only): once that has shown, a
    /// loss adds no look-ahead frame, which would buy nothing.
    func testASenderWhoseSpeechCarriesNoFECGetsNoLookAheadFrame() {
        let h = Harness(settings: JitterSettings(daemonConfig { $0.jitter.minDelayMs = 0 }).with { $0.fecHoldMs = 10_000 },
                        decoder: TagDecoder(loud: true, carriesFECFrom: { _ in false }))
        h.schedule((0..<400).filter { $0 != 150 && $0 != 250 }.map { h.packet($0, transit: 9 * ms) })
        let out = h.run(400)
        XCTAssertEqual(h.stats.lost.load, 2, "both losses concealed")
        XCTAssertEqual(h.stats.inserted.load, 0, "no look-ahead frame inserted")
        XCTAssertEqual(h.stats.targetDelayMs.load, jitterFreeMs, accuracy: 0.5)
        XCTAssertEqual(out.filter { $0 == .concealed }.count, 2)
    }

    func testWithoutFECLookAheadEveryLossOnATightBufferIsConcealed() {
        let (h, out) = lossyCleanLink(fecHoldMs: 0)
        XCTAssertFalse(out.contains(.fec(1150)))
        XCTAssertEqual(h.stats.fecRecovered.load, 0)
        XCTAssertEqual(h.stats.fecMissed.load, 0, "not counted without the look-ahead")
        XCTAssertEqual(h.stats.lost.load, 2)
        XCTAssertEqual(h.stats.targetDelayMs.load, jitterFreeMs, accuracy: 0.5)
    }

    /// The sender stops during silence (DTX) and resumes with a marker bit and a timestamp jump.
    private func dtx(gapFrames: Int, lossBeforeSpurt: Bool) -> Harness {
        let h = Harness()
        var packets: [SimPacket] = (0..<100).map { h.packet($0) }
        if lossBeforeSpurt { packets.removeLast() }
        for k in 100..<200 {
            var p = h.packet(k + gapFrames)  // sent and stamped after the gap
            p.sequence = 1000 + UInt16(k)    // sequence numbers stay contiguous
            p.marker = k == 100
            packets.append(p)
        }
        h.schedule(packets)
        let out = h.run(210 + gapFrames)
        let played = decodedSequences(out)
        let expected = (0..<200).map { 1000 + UInt16($0) }.filter { !(lossBeforeSpurt && $0 == 1099) }
        XCTAssertEqual(played, expected)
        XCTAssertEqual(h.stats.lost.load, 0, "silence is not loss")
        XCTAssertEqual(h.stats.fecRecovered.load, 0)
        XCTAssertEqual(h.stats.late.load, 0)
        XCTAssertFalse(out.contains(.fec(1099)))
        // Between the spurts: at most the underrun concealment (60 ms), then silence.
        guard let a = out.firstIndex(of: .decoded(lossBeforeSpurt ? 1098 : 1099)),
              let b = out.firstIndex(of: .decoded(1100)) else { XCTFail("spurt boundaries not played"); return h }
        let between = out[(a + 1)..<b]
        XCTAssertLessThanOrEqual(between.filter { $0 == .concealed }.count, 6)
        XCTAssertGreaterThanOrEqual(between.filter { $0 == .silence }.count, gapFrames - 8)
        XCTAssertEqual(between.count, gapFrames + (lossBeforeSpurt ? 1 : 0), accuracy: 2)
        return h
    }

    func testShortDTXGapPlaysSilenceWithoutCountingLoss() {
        let h = dtx(gapFrames: 15, lossBeforeSpurt: false)
        XCTAssertEqual(h.stats.rebuffers.load, 0)
        XCTAssertGreaterThan(h.stats.silenceFrames.load, 5)
    }

    func testLongDTXGapRebuffersAndPlaysSilenceWithoutCountingLoss() {
        let h = dtx(gapFrames: 100, lossBeforeSpurt: false)
        XCTAssertEqual(h.stats.rebuffers.load, 1)
        XCTAssertGreaterThan(h.stats.silenceFrames.load, 90)
    }

    func testPacketLostJustBeforeATalkSpurtIsSilenceNotLoss() {
        _ = dtx(gapFrames: 15, lossBeforeSpurt: true)
    }

    func testLatePacketsAreDroppedAndCounted() {
        let h = Harness()
        h.schedule((0..<100).map { k in
            var p = h.packet(k)
            if k == 50 || k == 70 { p.arrival += 100 * ms }
            return p
        })
        let played = decodedSequences(h.run(110))
        XCTAssertFalse(played.contains(1050))
        XCTAssertFalse(played.contains(1070))
        XCTAssertEqual(h.stats.late.load, 2)
        XCTAssertEqual(h.stats.fecRecovered.load, 2)
        XCTAssertEqual(h.stats.duplicates.load, 0)
    }

    func testPacketsTooFarAheadOverflowAndAStreamRestartRebuffers() {
        let h = Harness()
        var packets = (0..<100).map { h.packet($0) }
        var far = h.packet(60); far.sequence = 1060 + 5_000; packets.append(far)
        // The sender restarts at 1.5 s with new sequence numbers and timestamps.
        for k in 150..<250 { packets.append(h.packet(k, seq0: 40_000, ts0: 7_000_000)) }
        h.schedule(packets)
        let out = h.run(260)
        XCTAssertEqual(h.stats.overflow.load, 1)
        XCTAssertEqual(h.stats.rebuffers.load, 1)
        let played = decodedSequences(out)
        XCTAssertTrue(played.contains(1099))
        XCTAssertTrue(played.contains(40_000 &+ 200))
        XCTAssertEqual(h.stats.targetDelayMs.load, jitterFreeMs, accuracy: 0.01, "the restart must not look like jitter")
    }

    /// The network stops for 150 ms and then delivers its backlog at once (no jitter otherwise):
    /// the backlog is let go rather than played late, and it is not taken for jitter.
    func testAStallsBacklogIsLetGoAtOnceAndDoesNotRaiseTheTarget() {
        let h = Harness()
        let stallFrom = h.start + 3_000 * ms, stallTo = stallFrom + 150 * ms
        h.schedule((0..<600).map { k in
            var p = h.packet(k)
            if (stallFrom..<stallTo).contains(p.arrival) { p.arrival = stallTo }
            return p
        })
        var before = 0.0, maxTarget = 0.0, maxDelayAfter = 0.0
        for c in 0..<600 {
            h.step()
            if c == 299 { before = h.stats.currentDelayMs.load }
            maxTarget = max(maxTarget, h.stats.targetDelayMs.load)
            if c >= 330 { maxDelayAfter = max(maxDelayAfter, h.stats.currentDelayMs.load) }
        }
        let backlog = Int(stallTo - stallFrom) / Int(10 * ms)
        print("stall: delay before \(before) ms, max after \(maxDelayAfter) ms, max target \(maxTarget) ms, late \(h.stats.late.load), backlog packets \(h.stats.backlogPackets.load)")
        XCTAssertEqual(maxTarget, jitterFreeMs, accuracy: 0.01, "the backlog is no jitter")
        XCTAssertLessThanOrEqual(maxDelayAfter, before + 10.01, "back within a frame of the old delay at once")
        XCTAssertGreaterThanOrEqual(h.stats.backlogPackets.load, backlog - 2)
        XCTAssertLessThanOrEqual(h.stats.late.load, backlog, "only the backlog is lost")
    }

    func testFrameSizeMismatchPlaysSilence() {
        let h = Harness()
        var small = [Int16](repeating: 5, count: 100)
        XCTAssertFalse(h.buffer.readFrame(into: &small, count: 100))
        XCTAssertTrue(small.allSatisfy { $0 == 0 })
    }

    /// 10 simulated minutes of uniform 0...30 ms jitter, then a minute without jitter.
    func testTargetFollowsJitterPercentileAndShrinksSlowly() {
        let h = Harness()
        var rng = SplitMix64(seed: 42)
        let jitterPackets = 60_000  // 10 minutes
        var jitters: [UInt64] = []
        var packets: [SimPacket] = []
        for k in 0..<jitterPackets {
            let j = UInt64.random(in: 0...(30 * ms), using: &rng)
            jitters.append(j)
            packets.append(h.packet(k, transit: 5 * ms + j))
        }
        for k in jitterPackets..<(jitterPackets + 6_000) { packets.append(h.packet(k)) }
        h.schedule(packets)
        let p95 = Double(jitters.sorted()[jitters.count * 95 / 100]) / 1e6

        var maxTarget = 0.0
        var targetSum = 0.0, delaySum = 0.0, samples = 0
        for c in 0..<jitterPackets {
            h.step()
            maxTarget = max(maxTarget, h.stats.targetDelayMs.load)
            if c >= 12_000 {  // after 2 minutes
                targetSum += h.stats.targetDelayMs.load
                delaySum += h.stats.currentDelayMs.load
                samples += 1
            }
        }
        let meanTarget = targetSum / Double(samples)
        let meanDelay = delaySum / Double(samples)
        let received = Double(h.stats.received.load)
        let lateRate = Double(h.stats.late.load) / received
        let notPlayed = Double(h.stats.fecRecovered.load + h.stats.lost.load + h.stats.underruns.load + h.stats.dropped.load)
        let glitchRate = notPlayed / received
        print(String(format: "jitter trace: p95 jitter %.1f ms, mean target %.1f ms, max target %.1f ms, "
                     + "mean current delay %.1f ms, late %.2f %%, frames not from their own packet %.2f %% "
                     + "(fec %d, lost %d, underruns %d, dropped %d, inserted %d)",
                     p95, meanTarget, maxTarget, meanDelay, lateRate * 100, glitchRate * 100,
                     h.stats.fecRecovered.load, h.stats.lost.load, h.stats.underruns.load,
                     h.stats.dropped.load, h.stats.inserted.load))
        XCTAssertEqual(meanTarget, p95 + 10, accuracy: 5)
        XCTAssertLessThanOrEqual(maxTarget, 200)
        XCTAssertLessThan(lateRate, 0.02)
        XCTAssertLessThan(glitchRate, 0.04)

        // Jitter gone: the target shrinks once per 3 s by half its distance (at least a frame), down to the minimum.
        var last = h.stats.targetDelayMs.load
        var lastChangeCycle = -1_000
        var changes: [(Int, Double)] = []
        for c in 0..<5_900 {
            h.step()
            let t = h.stats.targetDelayMs.load
            if t < last - 0.001 {
                XCTAssertLessThanOrEqual(last - t, max(10, (last - jitterFreeMs) / 2) + 0.001, "half the way down (or a frame) at a time")
                XCTAssertGreaterThanOrEqual(c - lastChangeCycle, 300, "at most one frame per 3 s")
                lastChangeCycle = c
                changes.append((c, t))
            }
            XCTAssertLessThanOrEqual(t, last + 0.001, "no growth without jitter")
            last = t
        }
        print("shrink after jitter: \(changes.map { String(format: "%.1f s -> %.1f ms", Double($0.0) / 100, $0.1) })")
        XCTAssertEqual(last, jitterFreeMs, accuracy: 0.01)
        XCTAssertGreaterThanOrEqual(changes.first?.0 ?? 0, 150, "not before the jittery packets left the window")
        print(String(format: "after a minute without jitter: target %.1f ms, current delay %.1f ms",
                     h.stats.targetDelayMs.load, h.stats.currentDelayMs.load))
    }
    /// Heavier tail: exponential jitter (mean 10 ms, so its 95th percentile is ~30 ms) for 10 minutes.
    func testExponentialJitterTraceKeepsLateLossNearTwoPercent() {
        let h = Harness()
        var rng = SplitMix64(seed: 7)
        var jitters: [UInt64] = []
        var packets: [SimPacket] = []
        for k in 0..<60_000 {
            let u = Double.random(in: Double.ulpOfOne..<1, using: &rng)
            let j = UInt64(min(300.0, -10.0 * log(u)) * 1e6)
            jitters.append(j)
            packets.append(h.packet(k, transit: 5 * ms + j))
        }
        h.schedule(packets)
        let p95 = Double(jitters.sorted()[jitters.count * 95 / 100]) / 1e6
        var maxTarget = 0.0, targetSum = 0.0, samples = 0
        for c in 0..<60_000 {
            h.step()
            maxTarget = max(maxTarget, h.stats.targetDelayMs.load)
            if c >= 12_000 { targetSum += h.stats.targetDelayMs.load; samples += 1 }
        }
        let received = Double(h.stats.received.load)
        let lateRate = Double(h.stats.late.load) / received
        let notOwn = Double(h.stats.fecRecovered.load + h.stats.lost.load + h.stats.underruns.load + h.stats.dropped.load)
        print(String(format: "exponential jitter trace: p95 jitter %.1f ms, mean target %.1f ms, max target %.1f ms, "
                     + "late %.2f %%, frames not from their own packet %.2f %% (fec %d, lost %d, underruns %d, "
                     + "dropped %d, inserted %d)",
                     p95, targetSum / Double(samples), maxTarget, lateRate * 100, notOwn / received * 100,
                     h.stats.fecRecovered.load, h.stats.lost.load, h.stats.underruns.load,
                     h.stats.dropped.load, h.stats.inserted.load))
        XCTAssertEqual(targetSum / Double(samples), p95 + 10, accuracy: 8)
        XCTAssertLessThanOrEqual(maxTarget, 200)
        XCTAssertLessThan(lateRate, 0.025)
    }

    func testTargetGrowsAtOnceWhenJitterRises() {
        let h = Harness()
        var rng = SplitMix64(seed: 3)
        let packets = (0..<3_000).map { k -> SimPacket in
            let j = k < 2_000 ? 0 : UInt64.random(in: 0...(60 * ms), using: &rng)
            return h.packet(k, transit: 5 * ms + j)
        }
        h.schedule(packets)
        _ = h.run(2_000)
        XCTAssertEqual(h.stats.targetDelayMs.load, jitterFreeMs, accuracy: 0.01)
        _ = h.run(100)  // one second of 60 ms jitter
        XCTAssertGreaterThan(h.stats.targetDelayMs.load, 60)
        _ = h.run(100)
        XCTAssertGreaterThan(h.stats.currentDelayMs.load, 55, "the delay follows the target")
        XCTAssertLessThanOrEqual(h.stats.targetDelayMs.load, 75)
    }
    /// The audio-thread path (drain, reorder, decode/FEC/conceal, DTX, adaptation) and the producer's
    /// `push` allocate nothing once constructed.
    func testReadFrameAndPushDoNotAllocate() throws {
        try XCTSkipUnless(alloc_counter_is_active() == 1, "malloc is not routed through the counter")
        final class Box: @unchecked Sendable { var count: UInt64 = 99 }
        let box = Box()
        let driver = AllocationDriver()
        for k in 0..<1_000 { driver.cycle(k) }  // warm-up outside the measurement
        let thread = Thread {
            AllocationCounter.trackCurrentThread()
            let before = AllocationCounter.count
            for k in 1_000..<6_000 { driver.cycle(k) }
            box.count = AllocationCounter.count - before
        }
        AllocationCounter.arm()
        thread.start()
        while !thread.isFinished { usleep(1000) }
        AllocationCounter.disarm()
        XCTAssertEqual(box.count, 0, "allocations on the audio path: \(AllocationCounter.callers)")
        let stats = driver.buffer.statistics
        XCTAssertGreaterThan(stats.played.load, 4_000)
        XCTAssertGreaterThan(stats.fecRecovered.load + stats.lost.load, 50)
        XCTAssertGreaterThan(stats.duplicates.load, 50)
        XCTAssertGreaterThan(stats.silenceFrames.load, 10)
    }
}

/// Pushes and reads one cycle at a time with losses, duplicates, jitter and DTX; nothing allocated per cycle.
private final class AllocationDriver: @unchecked Sendable {
    let clock = SimClock()
    let buffer: JitterBuffer
    let payload = UnsafeMutableRawBufferPointer.allocate(byteCount: 64, alignment: 8)
    let frame = UnsafeMutablePointer<Int16>.allocate(capacity: 480)
    let t0: UInt64

    init() {
        let c = clock
        buffer = JitterBuffer(settings: JitterSettings(.default), decoder: TagDecoder(), clock: { c.now })
        t0 = clock.now
    }

    deinit { payload.deallocate(); frame.deallocate() }

    func cycle(_ k: Int) {
        clock.now = t0 + UInt64(k) * 10 * ms + 7 * ms
        if k % 37 != 5 && k % 500 < 440 {  // losses; DTX at the end of each 5 s
            let spurt = k / 500
            let seq = UInt16(truncatingIfNeeded: k - spurt * 60)
            payload.storeBytes(of: seq, as: UInt16.self)
            let jitter = UInt64((k * 7919) % 25) * ms
            for _ in 0..<(k % 53 == 0 ? 2 : 1) {  // duplicates
                buffer.queue.push(payload: UnsafeRawBufferPointer(payload), sequence: seq,
                                  timestamp: UInt32(truncatingIfNeeded: k * 480),
                                  marker: k % 500 == 0, arrivalNanos: clock.now - 2 * ms + jitter / 10)
            }
        }
        buffer.readFrame(into: frame, count: 480)
    }
}
