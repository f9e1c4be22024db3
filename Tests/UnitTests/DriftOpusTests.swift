import AudioPipeline
import CAllocCounter
import Codec
import IntercomConfig
import Foundation
import Impairment
import IntercomDaemon
import Jitter
import SignalTools
import TestSupport
import XCTest

/// Real Opus through `JitterBuffer` and `DriftCorrector`: the audio still matches what was sent,
/// and the audio-thread path allocates nothing.
final class DriftOpusTests: XCTestCase {
    static let frame = 480
    static let ms: UInt64 = 1_000_000

    /// Distinct chirps back to back (no two alike, so a window matches one place only).
    static func source(seconds: Double) -> [Int16] {
        var out: [Float] = []
        var i = 0
        while Double(out.count) < seconds * 48_000 {
            let low = 150 + 37 * Double(i % 7), high = 2_000 + 300 * Double(i % 5)
            out += Signals.chirp(from: i % 2 == 0 ? low : high, to: i % 2 == 0 ? high : low,
                                 duration: 0.55 + 0.05 * Double(i % 4), sampleRate: 48_000, amplitude: 0.4)
            i += 1
        }
        return Signals.toInt16(Array(out.prefix(Int(seconds * 48_000))))
    }

    /// Opus packets of `signal`, one per frame.
    static func packets(_ signal: [Int16]) throws -> [[UInt8]] {
        let encoder = try OpusEncoder(daemonConfig { $0.opus.expectedLossPercent = 5 })
        var out = [UInt8](repeating: 0, count: 1500)
        return (0..<(signal.count / frame)).map { f in
            let n = signal.withUnsafeBufferPointer { encoder.encode($0.baseAddress! + f * frame, frameSize: frame, into: &out, capacity: 1500) }
            precondition(n > 0)
            return Array(out[0..<n])
        }
    }

    /// 40 s from a sender 200 ppm fast with 10 ms of jitter: every 0.2 s window of the output is
    /// found in the source, and the output runs through the source faster than our clock. (No loss:
    /// a window holding an FEC or concealed frame measures Opus, not the corrector.)
    func testRealOpusThroughTheDriftCorrectorStillMatchesTheSource() throws {
        let ppm = 200.0, seconds = 40.0
        let source = Self.source(seconds: seconds)
        let packets = try Self.packets(source)
        var model = try ImpairmentModel(profile: ImpairmentProfile(baseDelayMs: 5, jitterMs: 10, seed: 3))
        let start: UInt64 = 1_000_000_000
        var arrivals: [(arrival: UInt64, index: Int)] = []
        for k in packets.indices {
            let sent = start + UInt64((Double(k) * 10e6 / (1 + ppm * 1e-6)).rounded())
            arrivals += model.sendTimes(arrivalNs: sent).map { ($0, k) }
        }
        arrivals.sort { $0.arrival < $1.arrival }

        let clock = TraceClock(start)
        // A 20 ms floor, the delay this jitter needs: starting at the daemon's 10 ms the buffer
        // inserts a concealed frame as the target grows, and libopus decodes differently after a
        // concealment (a transient 22 s later came out at 0.75 correlation for the codec alone,
        // given the same concealed frame): the windows would measure that, not the corrector.
        let buffer = JitterBuffer(settings: JitterSettings(daemonConfig { $0.jitter.minDelayMs = 20 }),
                                  decoder: try OpusDecoder(sampleRate: 48000), clock: { clock.now })
        let corrector = try DriftCorrector(buffer: buffer, settings: DriftSettings(.default))
        var output: [Int16] = []
        var out = [Int16](repeating: 0, count: Self.frame)
        var next = 0
        for c in 0..<Int(seconds * 100) {
            clock.now = start + UInt64(c) * 10 * Self.ms + 7 * Self.ms
            while next < arrivals.count, arrivals[next].arrival <= clock.now {
                let (arrival, k) = arrivals[next]
                _ = packets[k].withUnsafeBytes {
                    buffer.queue.push(payload: $0, sequence: UInt16(k), timestamp: UInt32(k * Self.frame), marker: k == 0, arrivalNanos: arrival)
                }
                next += 1
            }
            _ = corrector.readFrame(into: &out, count: Self.frame)
            output += out
        }

        // Each window: where in the source it came from (lag = source position of its first sample).
        let reference = Signals.toFloat(source), played = Signals.toFloat(output)
        let window = 48_000 / 5
        var found: [(time: Double, lag: Double, peak: Double)] = []
        for t in stride(from: 5.0, to: seconds - 1, by: 1) {
            let at = Int(t * 48_000)
            let slice = Array(played[at..<(at + window)])
            let lo = at - 48_000 * 3 / 10  // the buffer plays at most 300 ms late here
            let hit = try XCTUnwrap(Correlation.findDelay(reference: slice, in: Array(reference[lo..<(at + window + 4_800)]),
                                                          maxLag: at - lo + 4_800))
            found.append((t, Double(lo) + hit.fractionalLag, hit.peak))
        }
        let worst = found.map(\.peak).min() ?? 0
        XCTAssertGreaterThan(worst, 0.9, "every window of the output matches the source")
        XCTAssertEqual(buffer.statistics.inserted.load + buffer.statistics.dropped.load, 0, "nothing concealed or dropped")
        // After the start-up offset is worked off (≤ 12.5 ms at ≤ 1000 ppm), the output advances
        // through the source at the sender's rate: lag grows by ppm·1e-6 per sample played.
        let late = found.filter { $0.time >= 20 }
        let slope = (late.last!.lag - late.first!.lag) / ((late.last!.time - late.first!.time) * 48_000) - 1
        XCTAssertEqual(slope * 1e6, ppm, accuracy: ppm / 4, "played faster by about the sender's offset")
        XCTAssertEqual(corrector.driftPPM, ppm, accuracy: ppm / 4)
        print(String(format: "opus through drift corrector: worst window correlation %.3f, rate %+.0f ppm (sender %+.0f), "
                     + "estimate %.1f ppm, delay %.1f ms, FEC %d, concealed %d",
                     worst, slope * 1e6, ppm, corrector.driftPPM, corrector.delayMs,
                     buffer.statistics.fecRecovered.load, buffer.statistics.lost.load))
    }

    /// `readFrame` with the real decoder, losses, jitter, underruns and a trim that sweeps most of
    /// the clamp: no heap allocation on the calling thread, from the very first call (speexdsp
    /// grows its tables on the first ratio change unless `init` did it).
    func testReadFrameWithOpusDoesNotAllocate() throws {
        try XCTSkipUnless(alloc_counter_is_active() == 1, "malloc is not routed through the counter")
        let driver = try AllocationDriver(packets: try Self.packets(Self.source(seconds: 4)))
        final class Box: @unchecked Sendable { var count: UInt64 = 99 }
        let box = Box()
        let thread = Thread {
            AllocationCounter.trackCurrentThread()
            let before = AllocationCounter.count
            for k in 0..<12_000 { driver.cycle(k) }
            box.count = AllocationCounter.count - before
        }
        AllocationCounter.arm()
        thread.start()
        while !thread.isFinished { usleep(1000) }
        AllocationCounter.disarm()
        XCTAssertEqual(box.count, 0, "allocations in readFrame: \(AllocationCounter.callers)")
        let s = driver.buffer.statistics
        XCTAssertGreaterThan(s.played.load, 10_000)
        XCTAssertGreaterThan(s.fecRecovered.load + s.lost.load + s.underruns.load, 50, "losses exercised")
        XCTAssertGreaterThan(driver.trimRange.upperBound - driver.trimRange.lowerBound, DriftSettings(.default).maxTrimPPM,
                             "the trim moved across most of the clamp")
    }
}

/// Pushes pre-encoded packets (a sender 700 ppm fast, then 700 ppm slow; jitter, losses, a network
/// stall now and then) and reads one frame through the corrector per cycle; nothing allocated per cycle.
private final class AllocationDriver: @unchecked Sendable {
    let clock = TraceClock(1_000_000_000)
    let buffer: JitterBuffer
    let corrector: DriftCorrector
    let packets: [[UInt8]]
    let frame = UnsafeMutablePointer<Int16>.allocate(capacity: 480)
    let t0: UInt64
    private(set) var trimRange = 0.0...0.0
    private var sent = 0

    init(packets: [[UInt8]]) throws {
        let c = clock
        self.packets = packets
        buffer = JitterBuffer(settings: JitterSettings(.default), decoder: try OpusDecoder(sampleRate: 48000), clock: { c.now })
        corrector = try DriftCorrector(buffer: buffer, settings: DriftSettings(.default))
        t0 = clock.now
    }

    deinit { frame.deallocate() }

    /// Frames the sender has produced by the end of cycle k.
    private func senderPosition(_ k: Int) -> Double {
        k < 6_000 ? Double(k + 1) * 1.0007 : 6_000 * 1.0007 + Double(k + 1 - 6_000) * 0.9993
    }

    func cycle(_ k: Int) {
        clock.now = t0 + UInt64(k) * 10_000_000 + 7_000_000
        // Every 997 cycles the network stalls for 60 ms, then delivers the backlog at once.
        let stalled = k % 997 < 6
        while !stalled, Double(sent) < senderPosition(k) {
            let s = sent
            sent += 1
            if s % 41 == 7 { continue }  // lost
            let jitter = UInt64((s * 7919) % 9) * 1_000_000
            let p = packets[s % packets.count]
            _ = p.withUnsafeBytes {
                buffer.queue.push(payload: $0, sequence: UInt16(truncatingIfNeeded: s), timestamp: UInt32(truncatingIfNeeded: s * 480),
                                  marker: false, arrivalNanos: clock.now - 9_000_000 + jitter)
            }
        }
        corrector.readFrame(into: frame, count: 480)
        trimRange = min(trimRange.lowerBound, corrector.trimPPM)...max(trimRange.upperBound, corrector.trimPPM)
    }
}
