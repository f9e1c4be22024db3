import IntercomConfig
import Foundation
import Frames
import IntercomDaemon
import Jitter
import TestSupport
import XCTest

/// After a stall (the network held packets back, or the audio side stopped reading for a while),
/// the delay must come back to its target in seconds, not minutes, and mostly where nobody hears it.
final class JitterRecoveryTests: XCTestCase {
    /// Payload byte 0: 1 = speech (loud frame), 0 = a pause (quiet frame).
    private final class LevelDecoder: FrameDecoder {
        var droppedLoud = 0
        func decode(_ payload: UnsafeRawBufferPointer, into output: UnsafeMutablePointer<Int16>, frameSize: Int) -> Int {
            let loud = payload.first == 1
            for i in 0..<frameSize { output[i] = loud ? Int16(8000 * sin(Double(i) * 0.1)) : Int16(i % 3 - 1) }
            return frameSize
        }
        func decodeFEC(from next: UnsafeRawBufferPointer, into output: UnsafeMutablePointer<Int16>, frameSize: Int) -> Int { -1 }
        func conceal(into output: UnsafeMutablePointer<Int16>, frameSize: Int) -> Int {
            output.update(repeating: 0, count: frameSize)
            return frameSize
        }
        func reset() {}
    }

    private final class SimClock: @unchecked Sendable { var now: UInt64 = 1_000_000_000 }

    /// 10 ms frames; `speech(i)` says whether frame i is loud. The reader stops for `stallMs` at 5 s
    /// (packets keep arriving), then reads on. Returns the delay (ms) per simulated second and how
    /// many loud frames were played vs sent.
    private func run(seconds: Int, stallMs: Int, speech: (Int) -> Bool) -> (delays: [Double], peak: Double, loudPlayed: Int, loudSent: Int) {
        let clock = SimClock()
        let c = clock
        let jb = JitterBuffer(settings: JitterSettings(.default), decoder: LevelDecoder(), clock: { c.now })
        let out = UnsafeMutablePointer<Int16>.allocate(capacity: 480)
        defer { out.deallocate() }
        var delays: [Double] = []
        var loudPlayed = 0, loudSent = 0, peak = 0.0
        let frames = seconds * 100
        let stallStart = 500, stallEnd = 500 + stallMs / 10
        var payload: [UInt8] = [0, 0]
        for i in 0..<frames {
            clock.now = 1_000_000_000 + UInt64(i) * 10_000_000
            payload[0] = speech(i) ? 1 : 0
            if speech(i) { loudSent += 1 }
            payload.withUnsafeBytes {
                _ = jb.queue.push(payload: $0, sequence: UInt16(truncatingIfNeeded: i), timestamp: UInt32(i * 480),
                                  marker: i == 0, arrivalNanos: clock.now + 2_000_000)
            }
            clock.now += 5_000_000
            if i >= stallStart && i < stallEnd { continue }  // the reader is stalled
            if jb.readFrame(into: out, count: 480), abs(Int(out[10])) > 1000 { loudPlayed += 1 }
            if i % 100 == 99 { delays.append(jb.currentDelayMs) }
            peak = max(peak, jb.currentDelayMs)
        }
        return (delays, peak, loudPlayed, loudSent)
    }

    /// A stall shorter than `consumerStallMs` (80) leaves its delay to be dropped where it is not heard.
    func testAfterA70msStallWithSpeechPausesTheDelayIsBackWithin5sDroppingOnlyPauses() {
        // Speech in 600 ms phrases with 200 ms pauses: frames i % 80 < 60 are loud.
        let r = run(seconds: 15, stallMs: 70, speech: { $0 % 80 < 60 })
        print("peak \(r.peak) ms; delay per second after a 70 ms stall at 5 s:", r.delays.map { String(format: "%.0f", $0) }.joined(separator: " "))
        let before = r.delays[3]
        XCTAssertGreaterThan(r.peak, before + 50, "the stall raised the delay (the test can fail)")
        XCTAssertLessThan(r.delays[10], before + 15, "back near the old delay within 5 s of the stall")
        XCTAssertGreaterThanOrEqual(r.loudPlayed, r.loudSent - 7 - 3, "only pauses dropped (7 loud frames were never read during the stall)")
    }

    func testAfterA70msStallInContinuousSpeechTheDelayStillComesBackWithin15s() {
        let r = run(seconds: 25, stallMs: 70, speech: { _ in true })
        print("delay per second, continuous speech:", r.delays.map { String(format: "%.0f", $0) }.joined(separator: " "))
        XCTAssertGreaterThan(r.peak, r.delays[3] + 50)
        XCTAssertLessThan(r.delays[20], r.delays[3] + 15, "back within 15 s even without a pause")
    }

    /// A longer stall of the reader (a starved audio thread, its device run dry) has been heard as
    /// a gap already: the delay it left is cut back at the next read instead of over seconds.
    func testAfterA150msReaderStallTheDelayIsCutBackAtTheNextRead() {
        let r = run(seconds: 10, stallMs: 150, speech: { _ in true })
        print("peak \(r.peak) ms; delay per second after a 150 ms reader stall at 5 s:", r.delays.map { String(format: "%.0f", $0) }.joined(separator: " "))
        let before = r.delays[3]
        XCTAssertLessThan(r.peak, before + 15, "the stall's delay was never played out")
        XCTAssertLessThan(abs(r.delays[6] - before), 5, "the delay is where it was")
        XCTAssertGreaterThanOrEqual(r.loudPlayed, r.loudSent - 15 - 3, "the stalled frames lost, and at most a few to land on the target")
    }

    /// The audio side reads 10 % too slowly for 20 s (a sound server starved of CPU): far more than
    /// drift correction or gentle drops absorb. The delay must stay bounded by the maximum.
    func testAConsumerRunning10PercentSlowNeverPushesTheDelayPastTheMaximum() {
        let clock = SimClock()
        let c = clock
        let settings = JitterSettings(daemonConfig { $0.jitter.maxDelayMs = 200 })
        let jb = JitterBuffer(settings: settings, decoder: LevelDecoder(), clock: { c.now })
        let out = UnsafeMutablePointer<Int16>.allocate(capacity: 480)
        defer { out.deallocate() }
        var peak = 0.0
        let payload: [UInt8] = [1, 0]
        for i in 0..<2000 {
            clock.now = 1_000_000_000 + UInt64(i) * 10_000_000
            payload.withUnsafeBytes {
                _ = jb.queue.push(payload: $0, sequence: UInt16(truncatingIfNeeded: i), timestamp: UInt32(i * 480),
                                  marker: i == 0, arrivalNanos: clock.now)
            }
            clock.now += 5_000_000
            if i % 10 == 9 { continue }  // one read in ten never happens
            _ = jb.readFrame(into: out, count: 480)
            if i > 100 { peak = max(peak, jb.currentDelayMs) }
        }
        print("slow consumer: peak delay \(peak) ms, cut-backs \(jb.statistics.cutBacks.load), dropped \(jb.statistics.dropped.load)")
        XCTAssertLessThanOrEqual(peak, settings.maxDelayMs + 2 * settings.frameMs, "bounded by the maximum")
        XCTAssertGreaterThan(jb.statistics.dropped.load, 150, "the backlog was dropped, not kept")
    }
}
