import IntercomConfig
import IntercomDaemon
import Jitter
import SignalTools
import XCTest

/// `DriftCorrector` basics: pass-through when disabled, reset equals new, frame size checks.
final class DriftCorrectorTests: XCTestCase {
    private let ms: UInt64 = 1_000_000

    /// `count` packets from a sender `ppm` fast with up to 20 ms of jitter, one per 10 ms from `start`.
    private func packets(_ count: Int, seq0: UInt16, ts0: UInt32, start: UInt64, ppm: Double) -> [TracePacket] {
        var rng = SplitMix64(seed: 5)
        return (0..<count).map { k in
            let sent = start + UInt64((Double(k) * 10e6 / (1 + ppm * 1e-6)).rounded())
            return TracePacket(sequence: seq0 &+ UInt16(truncatingIfNeeded: k), timestamp: ts0 &+ UInt32(truncatingIfNeeded: k * 480),
                               arrival: sent + 5 * ms + UInt64.random(in: 0...(20 * ms), using: &rng))
        }.sorted { $0.arrival < $1.arrival }
    }

    /// Pushes what has arrived and reads one frame per 10 ms cycle from `cycle0`; returns the samples.
    private func play(_ packets: [TracePacket], into buffer: JitterBuffer, clock: TraceClock, from start: UInt64,
                      cycles: Int, read: (UnsafeMutablePointer<Int16>) -> Void) -> [Int16] {
        var next = 0, out: [Int16] = []
        let frame = UnsafeMutablePointer<Int16>.allocate(capacity: 480)
        defer { frame.deallocate() }
        for c in 0..<cycles {
            clock.now = start + UInt64(c) * 10 * ms + 7 * ms
            while next < packets.count, packets[next].arrival <= clock.now {
                var seq = packets[next].sequence
                _ = withUnsafeBytes(of: &seq) {
                    buffer.queue.push(payload: $0, sequence: packets[next].sequence, timestamp: packets[next].timestamp,
                                      marker: false, arrivalNanos: packets[next].arrival)
                }
                next += 1
            }
            read(frame)
            out += UnsafeBufferPointer(start: frame, count: 480)
        }
        return out
    }

    func testDisabledPassesTheBuffersFramesThroughUnchanged() throws {
        let start: UInt64 = 1_000_000_000
        let trace = packets(1_000, seq0: 7, ts0: 1_234, start: start, ppm: 300)
        let c1 = TraceClock(start), c2 = TraceClock(start)
        let direct = JitterBuffer(settings: JitterSettings(.default), decoder: TagDecoder(), clock: { c1.now })
        let wrapped = JitterBuffer(settings: JitterSettings(.default), decoder: TagDecoder(), clock: { c2.now })
        let corrector = try DriftCorrector(buffer: wrapped, settings: DriftSettings(enabled: false))
        let a = play(trace, into: direct, clock: c1, from: start, cycles: 1_000) { direct.readFrame(into: $0, count: 480) }
        let b = play(trace, into: wrapped, clock: c2, from: start, cycles: 1_000) { corrector.readFrame(into: $0, count: 480) }
        XCTAssertTrue(a == b, "disabled, the corrector must hand out the buffer's frames unchanged")
        XCTAssertEqual(wrapped.statistics.driftPPM.load, 0)
    }

    /// Stream A from a sender 500 ppm fast, reset, then stream B: B comes out sample for sample as
    /// from a new corrector; without the reset it does not.
    func testResetPlaysTheNextStreamExactlyLikeANewCorrector() throws {
        let start: UInt64 = 1_000_000_000
        let clock = TraceClock(start)
        let buffer = JitterBuffer(settings: JitterSettings(.default), decoder: TagDecoder(), clock: { clock.now })
        let corrector = try DriftCorrector(buffer: buffer, settings: DriftSettings(.default))
        let a = packets(6_000, seq0: 100, ts0: 0, start: start, ppm: 500)
        _ = play(a, into: buffer, clock: clock, from: start, cycles: 6_000) { corrector.readFrame(into: $0, count: 480) }
        XCTAssertGreaterThan(corrector.driftPPM, 250, "stream A must leave a drift estimate behind")
        XCTAssertGreaterThan(abs(corrector.trimPPM), 0)

        corrector.reset()
        XCTAssertEqual(corrector.driftPPM, 0)
        XCTAssertEqual(corrector.trimPPM, 0)
        XCTAssertEqual(corrector.delayMs, 0)
        XCTAssertEqual(buffer.statistics.driftPPM.load, 0)
        XCTAssertFalse(buffer.isPlaying)

        let bStart = start + 6_000 * 10 * ms
        let b = packets(1_500, seq0: 50_000, ts0: 9_999_999, start: bStart, ppm: -300)
        let reused = play(b, into: buffer, clock: clock, from: bStart, cycles: 1_500) { corrector.readFrame(into: $0, count: 480) }

        let freshClock = TraceClock(bStart)
        let freshBuffer = JitterBuffer(settings: JitterSettings(.default), decoder: TagDecoder(), clock: { freshClock.now })
        let fresh = try DriftCorrector(buffer: freshBuffer, settings: DriftSettings(.default))
        let expected = play(b, into: freshBuffer, clock: freshClock, from: bStart, cycles: 1_500) { fresh.readFrame(into: $0, count: 480) }
        XCTAssertTrue(reused == expected, "after reset, stream B must come out as from a new corrector")
        XCTAssertEqual(corrector.driftPPM, fresh.driftPPM)

        // Control: resetting only the buffer leaves the corrector's state (drift, filter) behind.
        let c3 = TraceClock(start)
        let b3 = JitterBuffer(settings: JitterSettings(.default), decoder: TagDecoder(), clock: { c3.now })
        let partial = try DriftCorrector(buffer: b3, settings: DriftSettings(.default))
        _ = play(a, into: b3, clock: c3, from: start, cycles: 6_000) { partial.readFrame(into: $0, count: 480) }
        b3.reset()
        let notReset = play(b, into: b3, clock: c3, from: bStart, cycles: 1_500) { partial.readFrame(into: $0, count: 480) }
        XCTAssertTrue(notReset != expected, "the check above can fail")
    }

    func testWrongFrameSizeIsSilence() throws {
        let corrector = try DriftCorrector(buffer: JitterBuffer(settings: JitterSettings(.default), decoder: TagDecoder()), settings: DriftSettings(.default))
        var small = [Int16](repeating: 5, count: 100)
        XCTAssertFalse(corrector.readFrame(into: &small, count: 100))
        XCTAssertTrue(small.allSatisfy { $0 == 0 })
    }
}
