import IntercomConfig
import IntercomDaemon
import Jitter
import XCTest

/// `TargetPolicy`'s decision alone: the target rises at once and shrinks only in a pause.
final class TargetPolicyTests: XCTestCase {
    private let ms: Int64 = 1_000_000

    /// Packets every 10 ms with 5 ms of transit; 20 of them 20 ms later at 1 s. `quietSince(now)`:
    /// since when the stream has been quiet when the packet arriving at `now` is read.
    private func targets(seconds: Int, quietSince: (Int64) -> Int64) -> [Int64] {
        let settings = JitterSettings(.default)
        var policy = TargetPolicy(settings: settings)
        var out: [Int64] = []
        for k in 0..<(seconds * 100) {
            let t = Int64(k) * 10 * ms
            let transit = 5 * ms + ((100..<120).contains(k) ? 20 * ms : 0)
            _ = policy.measure(transitNs: transit, arrivalNs: t + transit, firstOfStream: k == 0)
            _ = policy.refresh(now: t + transit, quietSince: quietSince(t + transit))
            out.append(policy.targetNs)
        }
        return out
    }

    func testAShrinkWaitsForAPauseOfASecond() {
        let initial = targets(seconds: 2, quietSince: { $0 })[50]
        // Talking all the time, then from 10 s on silent.
        let talking = targets(seconds: 14) { now in now < 10_000 * self.ms ? now : 10_000 * self.ms }
        let risen = talking[150], at9s = talking[900], at10_5s = talking[1_050], at11_5s = talking[1_150]
        print("target: \(initial / ms) ms, after the burst \(risen / ms) ms, at 9 s of talk \(at9s / ms) ms, "
              + "0.5 s into the pause \(at10_5s / ms) ms, 1.5 s into it \(at11_5s / ms) ms")
        XCTAssertGreaterThan(risen, initial + 10 * ms, "the burst raises the target at once")
        XCTAssertEqual(at9s, risen, "no shrink while the stream is loud")
        XCTAssertEqual(at10_5s, risen, "no shrink half a second into a pause")
        XCTAssertLessThan(at11_5s, risen, "a shrink once the pause has lasted a second")
        // The measure can fail: a stream quiet all along shrinks 3 s after the burst.
        let quiet = targets(seconds: 6) { _ in .min / 2 }
        XCTAssertLessThan(quiet[500], risen, "a quiet stream shrinks after the interval")
    }

    func testAStreamThatNeverPausesStillShrinksAfterThirtySeconds() {
        let talking = targets(seconds: 33) { $0 }
        XCTAssertEqual(talking[2_900], talking[150], "held while loud within 30 s of the rise")
        XCTAssertLessThan(talking[3_200], talking[150], "shrunk after 30 s without a pause")
    }
}
