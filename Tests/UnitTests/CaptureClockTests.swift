import AudioPipeline
import XCTest

/// The sender's timeline jumps over capture time that was lost, and only over that.
final class CaptureClockTests: XCTestCase {
    private let frameNs = 10_000_000.0

    /// Frames captured every 10 ms with `jitterMs` of read-time noise and a clock off by `ppm`;
    /// `lossAt` frames in, `lossMs` of audio vanish. Returns the frames reported lost.
    private func run(frames: Int, ppm: Double = 0, jitterMs: Double = 0, lossAt: Int = -1, lossMs: Double = 0) -> [Int] {
        var clock = CaptureClock(frameNanos: frameNs)
        var rng = SystemRandomNumberGenerator()
        var reports: [Int] = []
        var t = 1_000_000_000.0
        for i in 0..<frames {
            if i == lossAt { t += lossMs * 1e6 }
            t += frameNs * (1 + ppm * 1e-6)
            let noise = jitterMs > 0 ? Double.random(in: 0...jitterMs, using: &rng) * 1e6 : 0
            let lost = clock.frameCaptured(at: UInt64(t + noise))
            if lost > 0 { reports.append(lost) }
        }
        return reports
    }

    func testA90msSilentLossJumpsTheTimelineBy9Frames() {
        let r = run(frames: 1000, jitterMs: 3, lossAt: 500, lossMs: 90)
        XCTAssertEqual(r.count, 1, "one jump: \(r)")
        XCTAssertEqual(Double(r.first ?? 0), 9, accuracy: 1, "about 90 ms: \(r)")
    }

    func testClockDriftOf1000ppmAndReadJitterOf8msNeverJump() {
        XCTAssertEqual(run(frames: 60_000, ppm: 1000, jitterMs: 8), [], "10 minutes of a slow capture clock")
        XCTAssertEqual(run(frames: 60_000, ppm: -1000, jitterMs: 8), [], "10 minutes of a fast capture clock")
    }

    func testALossBelowTheThresholdIsLeftToTheReceiver() {
        XCTAssertEqual(run(frames: 1000, lossAt: 500, lossMs: 10), [])
    }

    /// A 1 s stop whose capture the sound server hands over in pieces: a first piece of 3 frames
    /// read as captured just then (the clock counts the stop as lost), then the other 97 of the
    /// stop's frames at once, too old to send. They are the time already counted, not more.
    func testAStopsCaptureHandedOverInPiecesIsCountedOnce() {
        var clock = CaptureClock(frameNanos: frameNs)
        var t: UInt64 = 1_000_000_000
        for _ in 0..<200 { t += 10_000_000; XCTAssertEqual(clock.frameCaptured(at: t), 0) }
        t += 1_000_000_000
        var lost = 0
        for k in 0..<3 { lost += clock.frameCaptured(at: t - UInt64(2 - k) * 10_000_000) }
        t += 10_000_000
        let stale = 97
        for k in 0..<stale { lost += clock.frameCaptured(at: t - UInt64(stale - 1 - k) * 10_000_000 / 20) }
        let notCounted = clock.staleFramesNotCounted(stale, at: t)
        // The timeline jumps by the stop less the 3 frames sent (counting the stale ones as well: 193).
        XCTAssertEqual(Double(lost + notCounted), 97, accuracy: 2, "lost \(lost), stale not counted before \(notCounted)")
        // A backlog long after, with no loss counted before it, is all capture time.
        t += 5_000_000_000
        XCTAssertEqual(clock.staleFramesNotCounted(10, at: t), 10)
    }
}
