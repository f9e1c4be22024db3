import SignalTools
import XCTest

/// The whole-path estimate and its advice, on crafted measurements.
final class PathBudgetTests: XCTestCase {
    private func device(playback: Double = 30, path: Double = 1.5, period: Double = 10) -> LoopbackAnalysis.Result {
        LoopbackAnalysis.Result(roundTripMs: playback + path + period, playbackBufferMs: playback, pathMs: path, capturePeriodMs: period,
                                correlation: 0.95, echoLevelDb: -20, snrDb: 40, clippedSamples: 0, curve: [], problems: [], warnings: [])
    }
    private func network(_ rtt: [Double]) -> RoundTripSummary {
        RoundTripSummary.summarise(sent: rtt.count, rttMs: Dictionary(uniqueKeysWithValues: rtt.enumerated().map { ($0.offset, $0.element) }),
                                   duplicates: 0, jitterBounds: (10, 200))
    }
    private func terminal(period: Double = 10, buffer: Int = 3, fill: Int? = nil, xruns: Int = 0, processMax: Double = 1, jitterMin: Double = 10) -> TerminalTiming {
        TerminalTiming(periodMs: period, bufferPeriods: buffer, fillPeriods: fill, processingDelayMs: period, codecLookaheadMs: 6.5,
                       jitterMinMs: jitterMin, jitterMaxMs: 200, xruns: xruns, processMaxMs: processMax)
    }

    func testPartsAddUpAndComeFromTheRightMeasurement() throws {
        // Round trips 4 ms, steady: 2 ms one way; jitter buffer at its configured 10 ms minimum.
        let b = try XCTUnwrap(PathBudget.estimate(device: device(), network: network(Array(repeating: 4, count: 50)), terminal: terminal()))
        let byName = Dictionary(uniqueKeysWithValues: b.parts.map { ($0.name, $0.ms) })
        XCTAssertEqual(byName["capture period"], 10)
        XCTAssertEqual(byName["echo canceller and preprocessor"], 10)
        XCTAssertEqual(byName["codec look-ahead"], 6.5)
        XCTAssertEqual(byName["network (half the round trip)"], 2)
        XCTAssertEqual(byName["jitter buffer (far end)"], 10)
        XCTAssertEqual(byName["playback buffer (far end, as here)"], 30)
        XCTAssertEqual(byName["converters and air"], 1.5)
        XCTAssertEqual(b.totalMs, 70, accuracy: 1e-9)
        XCTAssertEqual(b.goalMs, 40)
        XCTAssertTrue(b.recommendations.first?.contains("largest part is the playback buffer") == true, "\(b.recommendations)")
    }

    func testAJitteryPathRaisesTheFarJitterBufferAboveItsMinimum() throws {
        // Round trips 2...42 ms: 95th percentile 40 ms → 19 ms one way above the fastest, plus half
        // a frame and the least margin (a quarter frame).
        let rtt = (0..<100).map { 2 + Double($0) * 40 / 99 }
        let b = try XCTUnwrap(PathBudget.estimate(device: device(), network: network(rtt), terminal: terminal()))
        let jitter = try XCTUnwrap(b.parts.first { $0.name.hasPrefix("jitter") }).ms
        XCTAssertEqual(jitter, 26.5, accuracy: 0.3)
    }

    func testPeriodAdvice() throws {
        let quiet = network(Array(repeating: 1, count: 20))
        let idle = try XCTUnwrap(PathBudget.estimate(device: device(), network: quiet, terminal: terminal(processMax: 0.8)))
        XCTAssertTrue(idle.recommendations.contains { $0.contains("audio.period_ms = 5 would save about 25 ms") }, "\(idle.recommendations)")

        let xruns = try XCTUnwrap(PathBudget.estimate(device: device(), network: quiet, terminal: terminal(xruns: 4)))
        XCTAssertTrue(xruns.recommendations.contains { $0.contains("4 xruns") && $0.contains("buffer_periods to 4") }, "\(xruns.recommendations)")
        XCTAssertFalse(xruns.recommendations.contains { $0.contains("would save") })
        // With a fill target below the buffer, the queue is what ran dry, not the buffer.
        let queueXruns = try XCTUnwrap(PathBudget.estimate(device: device(), network: quiet, terminal: terminal(fill: 2, xruns: 4)))
        XCTAssertTrue(queueXruns.recommendations.contains { $0.contains("playback_fill_periods to 3") }, "\(queueXruns.recommendations)")

        let busy = try XCTUnwrap(PathBudget.estimate(device: device(), network: quiet, terminal: terminal(processMax: 6)))
        XCTAssertTrue(busy.recommendations.contains { $0.contains("too little headroom; keep audio.period_ms = 10") }, "\(busy.recommendations)")
        let halfBusy = try XCTUnwrap(PathBudget.estimate(device: device(), network: quiet, terminal: terminal(processMax: 3)))
        XCTAssertFalse(halfBusy.recommendations.contains { $0.contains("would save") }, "3 ms of work does not fit a 5 ms period with headroom")

        let smallest = try XCTUnwrap(PathBudget.estimate(device: device(playback: 5, period: 2.5), network: quiet,
                                                         terminal: terminal(period: 2.5, buffer: 2, processMax: 0.1)))
        XCTAssertEqual(smallest.goalMs, 15, "low-delay mode is held to 15 ms")
        XCTAssertFalse(smallest.recommendations.contains { $0.contains("would save") }, "2.5 ms is Opus's smallest frame")
    }

    func testAPlaybackBufferLargerThanConfiguredIsNamed() throws {
        let b = try XCTUnwrap(PathBudget.estimate(device: device(playback: 52), network: network([2, 2]), terminal: terminal()))
        XCTAssertTrue(b.recommendations.contains { $0.contains("52.0 ms against 30 ms configured") }, "\(b.recommendations)")
    }

    func testNoEstimateWithoutBothMeasurements() {
        let silent = LoopbackAnalysis.Result(roundTripMs: nil, playbackBufferMs: nil, pathMs: nil, capturePeriodMs: 10, correlation: 0,
                                             echoLevelDb: -100, snrDb: nil, clippedSamples: 0, curve: [], problems: ["silent"], warnings: [])
        XCTAssertNil(PathBudget.estimate(device: silent, network: network([2]), terminal: terminal()))
        XCTAssertNil(PathBudget.estimate(device: device(), network: network([]), terminal: terminal()))
    }
}
