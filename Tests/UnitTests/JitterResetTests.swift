import AudioPipeline
import Codec
import IntercomConfig
import IntercomDaemon
import Jitter
import SignalTools
import XCTest

/// Reuse of a stream slot: `JitterBuffer.reset()`, `PacketQueue.reset()`, `OpusDecoder.reset()`.
final class JitterResetTests: XCTestCase {
    private let ms: UInt64 = 1_000_000

    /// One stream's packets: `count` frames from `seq0`/`ts0`, sent every 10 ms from `sentAt`.
    private func stream(_ count: Int, seq0: UInt16, ts0: UInt32, sentAt: UInt64, jitterMs: UInt64, seed: UInt64) -> [TracePacket] {
        var rng = SplitMix64(seed: seed)
        return (0..<count).map { k in
            let jitter = jitterMs == 0 ? 0 : UInt64.random(in: 0...(jitterMs * ms), using: &rng)
            return TracePacket(sequence: seq0 &+ UInt16(truncatingIfNeeded: k), timestamp: ts0 &+ UInt32(truncatingIfNeeded: k * 480),
                               arrival: sentAt + UInt64(k) * 10 * ms + 5 * ms + jitter)
        }
    }

    /// Stream A (50 ms jitter, so a large target), reset, then stream B with unrelated sequence
    /// numbers and timestamps: B must play exactly as it does on a fresh buffer.
    func testResetBetweenUnrelatedStreamsPlaysTheNewStreamLikeAFreshBuffer() {
        let reused = TraceHarness()
        let t0 = reused.clock.now
        reused.deliver(stream(400, seq0: 1000, ts0: 90_000, sentAt: t0, jitterMs: 50, seed: 1))
        _ = reused.run(400)
        XCTAssertGreaterThan(reused.stats.targetDelayMs.load, 45, "stream A must leave a large target behind")
        // A's last packets are still in the queue when the slot is handed over.
        reused.pushNow(stream(5, seq0: 1400, ts0: 90_000 + 400 * 480, sentAt: reused.clock.now, jitterMs: 0, seed: 0))
        let before = reused.counters()
        reused.discardPending()  // stream A has ended: its stragglers go to its own (new) slot
        reused.buffer.reset()
        XCTAssertEqual(reused.decoder.resets, 1)
        XCTAssertEqual(reused.buffer.queue.count, 0)
        // Back to the initial target: a jitter-free path's.
        XCTAssertEqual(reused.stats.targetDelayMs.load, reused.buffer.settings.jitterFreeTargetMs, accuracy: 0.01)
        XCTAssertEqual(reused.stats.currentDelayMs.load, 0)
        XCTAssertFalse(reused.buffer.isPlaying)

        let bStart = reused.clock.now
        let firstBCycle = reused.nextCycleStart
        reused.deliver(stream(300, seq0: 40_000, ts0: 7_000_000, sentAt: bStart, jitterMs: 0, seed: 0))
        let outB = reused.run(300)

        let fresh = TraceHarness(start: firstBCycle)  // the same cycle times as `reused` had for B
        fresh.deliver(stream(300, seq0: 40_000, ts0: 7_000_000, sentAt: bStart, jitterMs: 0, seed: 0))
        let outFresh = fresh.run(300)

        XCTAssertEqual(outB.count, outFresh.count)
        let firstDifference = zip(outB, outFresh).enumerated().first { $0.element.0 != $0.element.1 }?.offset
        XCTAssertNil(firstDifference, "after reset, stream B must play as on a fresh buffer; frame \(firstDifference ?? -1) differs")
        XCTAssertFalse(outB.contains { if case let .decoded(s) = $0 { s < 2000 } else { false } }, "nothing of stream A")
        let after = reused.counters()
        XCTAssertEqual(after.rebuffers, before.rebuffers, "no rebuffer")
        XCTAssertEqual(after.late, before.late)
        XCTAssertEqual(after.overflow, before.overflow)
        XCTAssertEqual(after.lostOrConcealed, before.lostOrConcealed)
        let leading = outB.prefix { $0 == .silence }.count
        // Playout starts once the first packet is target - frame/2 = 15 ms old; A's target would be 40+ ms.
        XCTAssertLessThanOrEqual(leading, 2, "\(leading) frames of buffering: the minimum delay, not A's target")
        XCTAssertEqual(TraceOutput.decodedSequences(outB).count, 300 - leading)

        // Without the reset the same B is not played like that: the check above can fail.
        let control = TraceHarness()
        control.deliver(stream(400, seq0: 1000, ts0: 90_000, sentAt: control.clock.now, jitterMs: 50, seed: 1))
        _ = control.run(400)
        control.pushNow(stream(5, seq0: 1400, ts0: 90_000 + 400 * 480, sentAt: control.clock.now, jitterMs: 0, seed: 0))
        control.discardPending()
        control.deliver(stream(300, seq0: 40_000, ts0: 7_000_000, sentAt: control.clock.now, jitterMs: 0, seed: 0))
        XCTAssertNotEqual(control.run(300), outFresh, "without reset B plays differently")
    }

    func testPacketQueueResetEmptiesItAndKeepsCounting() {
        let q = PacketQueue(slots: 4, maxPayloadBytes: 4)
        let payload: [UInt8] = [1, 2]
        for i in 0..<5 {
            _ = payload.withUnsafeBytes { q.push(payload: $0, sequence: UInt16(i), timestamp: 0, marker: false, arrivalNanos: 0) }
        }
        q.pop()
        XCTAssertEqual(q.count, 3)
        XCTAssertEqual(q.full.load, 1)
        q.reset()
        XCTAssertEqual(q.count, 0)
        XCTAssertNil(q.peek())
        for i in 0..<4 {
            XCTAssertTrue(payload.withUnsafeBytes { q.push(payload: $0, sequence: UInt16(100 + i), timestamp: 0, marker: false, arrivalNanos: 0) })
        }
        XCTAssertEqual(q.peek()?.sequence, 100)
        XCTAssertEqual(q.full.load, 1, "counters are not reset")
    }

    /// After `reset()` a used decoder decodes bit-identically to a new one; without it, it does not.
    func testOpusDecoderResetMatchesAFreshDecoder() throws {
        let frame = 480
        let encoder = try OpusEncoder(.default)
        func packets(_ signal: [Int16]) -> [[UInt8]] {
            var out = [UInt8](repeating: 0, count: 1500)
            return (0..<(signal.count / frame)).map { f in
                let n = signal.withUnsafeBufferPointer { encoder.encode($0.baseAddress! + f * frame, frameSize: frame, into: &out, capacity: 1500) }
                return Array(out[0..<n])
            }
        }
        let a = packets(Signals.toInt16(Signals.whiteNoise(count: 48_000 / 2, amplitude: 0.3, seed: 5)))
        let b = packets(Signals.toInt16(Signals.chirp(from: 300, to: 3000, duration: 0.5, sampleRate: 48_000, amplitude: 0.4)))
        func decode(_ decoder: OpusDecoder, _ packets: [[UInt8]]) -> [Int16] {
            var pcm = [Int16](repeating: 0, count: frame), all: [Int16] = []
            for p in packets {
                XCTAssertEqual(p.withUnsafeBufferPointer { decoder.decode($0.baseAddress, length: p.count, into: &pcm, frameSize: frame) }, frame)
                all += pcm
            }
            return all
        }
        let expected = decode(try OpusDecoder(sampleRate: 48000), b)
        let used = try OpusDecoder(sampleRate: 48000)
        _ = decode(used, a)
        used.reset()
        XCTAssertEqual(decode(used, b), expected)
        let notReset = try OpusDecoder(sampleRate: 48000)
        _ = decode(notReset, a)
        XCTAssertNotEqual(decode(notReset, b), expected, "the decoder's history matters, so the test can fail")
    }
}
