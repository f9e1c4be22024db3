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
}
