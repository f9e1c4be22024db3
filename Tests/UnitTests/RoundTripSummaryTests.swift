import SignalTools
import XCTest

/// The network loopback report on crafted replies: figures, histogram, diagnosis and advice.
final class RoundTripSummaryTests: XCTestCase {
    private func replies(_ values: [Double]) -> [Int: Double] {
        Dictionary(uniqueKeysWithValues: values.enumerated().map { ($0.offset, $0.element) })
    }

    func testCleanPathFiguresAndHistogramAddUp() throws {
        // 1.0 to 1.99 ms, evenly: a quiet LAN.
        let rtt = (0..<100).map { 1.0 + Double($0) / 100 }
        let s = RoundTripSummary.summarise(sent: 100, rttMs: replies(rtt.shuffled()), duplicates: 0, jitterBounds: (5, 200))
        XCTAssertEqual(s.received, 100)
        XCTAssertEqual(s.lossPercent, 0)
        XCTAssertEqual(try XCTUnwrap(s.minMs), 1.0, accuracy: 1e-9)
        XCTAssertEqual(try XCTUnwrap(s.maxMs), 1.99, accuracy: 1e-9)
        XCTAssertEqual(try XCTUnwrap(s.medianMs), 1.5, accuracy: 0.011)
        XCTAssertEqual(try XCTUnwrap(s.p95Ms), 1.94, accuracy: 0.011)
        XCTAssertEqual(s.histogram.map(\.count).reduce(0, +), 100)
        XCTAssertLessThanOrEqual(s.histogram.count, 21)
        XCTAssertEqual(s.problems, [])
        XCTAssertTrue(s.recommendations.contains { $0.hasPrefix("jitter.min_delay_ms = 1 ") }, "\(s.recommendations)")
        XCTAssertFalse(s.recommendations.contains { $0.contains("configured") }, "5 ms is a sensible minimum here: \(s.recommendations)")
    }

    func testJitterIsTheMeanStepBetweenConsecutiveProbes() throws {
        let s = RoundTripSummary.summarise(sent: 6, rttMs: replies([1, 3, 1, 3, 1, 3]), duplicates: 0, jitterBounds: (10, 200))
        XCTAssertEqual(try XCTUnwrap(s.jitterMs), 2, accuracy: 1e-9)
    }

    func testLossIsAProblemNamedInPercent() {
        var rtt = replies(Array(repeating: 2.0, count: 100))
        for i in stride(from: 0, to: 100, by: 10) { rtt[i] = nil }
        let s = RoundTripSummary.summarise(sent: 100, rttMs: rtt, duplicates: 0, jitterBounds: (10, 200))
        XCTAssertEqual(s.lossPercent, 10, accuracy: 1e-9)
        XCTAssertEqual(s.problems.count, 1)
        XCTAssertTrue(s.problems[0].contains("10.0 %"), s.problems[0])
    }

    func testNothingBackIsADiagnosisNotANumber() {
        let s = RoundTripSummary.summarise(sent: 50, rttMs: [:], duplicates: 0, jitterBounds: (10, 200))
        XCTAssertNil(s.medianMs)
        XCTAssertEqual(s.lossPercent, 100)
        XCTAssertTrue(s.problems.first?.contains("offline or unreachable") == true, "\(s.problems)")
        XCTAssertEqual(s.recommendations, [])
    }

    func testConfiguredBoundsAreJudgedAgainstTheMeasuredVariation() {
        // A jittery path: 2 ms base, 5 % of probes 60 ms late, the rest up to 40 ms late.
        let rtt = (0..<100).map { i in i % 20 == 0 ? 62.0 : 2 + Double(i % 41) }
        let tight = RoundTripSummary.summarise(sent: 100, rttMs: replies(rtt), duplicates: 0, jitterBounds: (5, 25))
        XCTAssertTrue(tight.recommendations.contains { $0.contains("min_delay_ms (5) is below") }, "\(tight.recommendations)")
        XCTAssertTrue(tight.recommendations.contains { $0.contains("max_delay_ms (25) is below") }, "\(tight.recommendations)")

        let quiet = (0..<100).map { 1.0 + Double($0 % 3) / 10 }
        let wasteful = RoundTripSummary.summarise(sent: 100, rttMs: replies(quiet), duplicates: 0, jitterBounds: (80, 200))
        XCTAssertTrue(wasteful.recommendations.contains { $0.contains("min_delay_ms (80) adds delay") }, "\(wasteful.recommendations)")
        XCTAssertFalse(wasteful.recommendations.contains { $0.contains("is below") }, "\(wasteful.recommendations)")
    }
}
