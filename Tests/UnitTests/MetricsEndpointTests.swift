import Foundation
import IntercomConfig
import MetricsText
import XCTest

@testable import IntercomDaemon

/// `[metrics]`: a bad address names its key; a token file others may read, or without a token,
/// is refused naming `metrics.token_file` (the endpoint itself: MetricsRigTests).
final class MetricsEndpointTests: XCTestCase {
    /// The self-test's counters and its last result, from the one statistics snapshot; a daemon
    /// without `[selftest]` has no such series.
    func testTheSelfTestIsInTheMetrics() {
        let identity = TerminalMetrics.Identity(room: "empfang", software: "test", frameMs: 10)
        let text = String(decoding: TerminalMetrics.exposition(ControlProtocolTests.statistics, identity: identity), as: UTF8.self)
        for line in ["intercom_selftest_runs_total{outcome=\"passed\"} 2", "intercom_selftest_runs_total{outcome=\"failed\"} 1",
                     "intercom_selftest_postponed_total 2", "intercom_selftest_aborted_total 0", "intercom_selftest_passed 0.0"] {
            XCTAssertTrue(text.split(separator: "\n").contains { $0 == line }, "\(line) in:\n\(text)")
        }
        XCTAssertFalse(text.contains("intercom_selftest_round_trip_seconds"), "no round trip when none was measured")
        XCTAssertTrue(text.contains("intercom_room_moved{room=\"labor\",address=\"10.77.0.99:5070\"} 1.0") || text.contains("intercom_room_moved{address=\"10.77.0.99:5070\",room=\"labor\"} 1.0"),
                      "a room heard at another address is shown")
        var without = ControlProtocolTests.statistics
        without.selfTest = nil
        XCTAssertFalse(String(decoding: TerminalMetrics.exposition(without, identity: identity), as: UTF8.self).contains("selftest"))
    }

    /// G.107's E-model with its defaults and the values taken for Opus, against figures worked
    /// by hand: no delay or loss, 200 ms, and 5 % random loss.
    func testTheQualityEstimateIsTheEModels() {
        for (delay, loss, r, mos) in [(0.0, 0.0, 93.2, 4.4093), (200, 0, 85.903, 4.2262), (0, 0.05, 77.419, 3.9228)] {
            let e = CallQualityEstimate(delayMs: delay, lossRatio: loss)
            XCTAssertEqual(e.r, r, accuracy: 0.001, "R at \(delay) ms, \(loss * 100) %")
            XCTAssertEqual(e.mos, mos, accuracy: 0.001, "MOS at \(delay) ms, \(loss * 100) %")
        }
        XCTAssertLessThan(CallQualityEstimate(delayMs: 400, lossRatio: 0.05).mos, CallQualityEstimate(delayMs: 100, lossRatio: 0.05).mos)
        XCTAssertEqual(CallQualityEstimate(delayMs: 0, lossRatio: 1).mos, 1, accuracy: 0.3, "all lost: the scale's bottom")
    }

    func testTheSettingsAndTheTokenFileAreCheckedByName() throws {
        XCTAssertEqual(try DaemonConfig.parse("[metrics]\nlisten = \"127.0.0.1:9470\"").metrics.listen, "127.0.0.1:9470")
        XCTAssertEqual(DaemonConfig().metrics.listen, "", "off unless asked for")
        XCTAssertThrowsError(try DaemonConfig.parse("[metrics]\nlisten = \"everywhere\"")) { error in
            XCTAssertEqual((error as? ConfigError)?.issues.first?.key, "metrics.listen", "\(error)")
        }

        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("metrics-\(UUID())").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        func file(_ name: String, _ text: String, mode: Int) -> String {
            let path = dir + "/" + name
            FileManager.default.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: mode])
            return path
        }
        XCTAssertEqual(try MetricsServer.readToken(file("good", "0123456789abcdef-token\n", mode: 0o600)), Array("0123456789abcdef-token".utf8))
        for (path, says) in [(file("open", "0123456789abcdef-token\n", mode: 0o644), "chmod 600"),
                             (file("short", "secret\n", mode: 0o600), "at least 16"),
                             (dir + "/missing", "cannot be read")] {
            XCTAssertThrowsError(try MetricsServer.readToken(path)) { error in
                XCTAssertEqual((error as? ConfigError)?.issues.first?.key, "metrics.token_file", "\(error)")
                XCTAssertTrue("\(error)".contains(says), "\(error)")
            }
        }
    }
}
