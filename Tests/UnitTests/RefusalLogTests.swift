import Control
import Foundation
@testable import IntercomDaemon
import Posix
import XCTest

/// Refused signalling reaches the log at once the first time and then at most once a minute,
/// with what came since by reason and address, however fast a revoked terminal keeps trying.
final class RefusalLogTests: XCTestCase {
    private func counters(unknownSender: Int = 0, replay: Int = 0) -> DaemonStatistics.Refusals {
        DaemonStatistics.Refusals(notSealed: 0, malformed: 0, unknownSender: unknownSender, authentication: 0, replay: replay,
                                  stale: 0, senderMismatch: 0, notForEveryone: 0)
    }

    func testAFloodIsOneLineAMinuteWithItsReasonsAndAddresses() throws {
        let revoked = IPv4Endpoint.loopback(port: 5072), stranger = IPv4Endpoint.loopback(port: 9)
        var log = RefusalLog(counters: counters())
        XCTAssertNil(log.line(now: 0, counters: counters()), "nothing refused, nothing said")
        log.refused(from: revoked)
        let first = try XCTUnwrap(log.line(now: 0, counters: counters(unknownSender: 1)))
        XCTAssertTrue(first.contains("refused 1 signalling datagram (unknown_sender 1) from 127.0.0.1:5072"), first)

        // Ten a second for three minutes: one line a minute.
        var lines: [String] = []
        var sent = 1
        for tenth in 1...1800 {
            let now = Double(tenth) / 10
            sent += 1
            log.refused(from: tenth % 100 == 0 ? stranger : revoked)
            // Every hundredth is the stranger's, a replay.
            if let line = log.line(now: now, counters: counters(unknownSender: sent - tenth / 100, replay: tenth / 100)) { lines.append(line) }
        }
        XCTAssertEqual(lines.count, 3, lines.joined(separator: "\n"))
        XCTAssertTrue(lines[0].contains("refused 600 signalling datagrams in the last 60 s (unknown_sender 594, replay 6)"), lines[0])
        XCTAssertTrue(lines[0].contains("from 127.0.0.1:5072 (594), 127.0.0.1:9 (6)"), lines[0])

        // Addresses beyond those kept are summed.
        for port in 1...20 { log.refused(from: .loopback(port: UInt16(port))) }
        let spread = try XCTUnwrap(log.line(now: 1000, counters: counters(unknownSender: sent - 18 + 20, replay: 18)))
        XCTAssertTrue(spread.contains("12 from other addresses"), spread)
    }

    /// The names the log gives are the names on the wire, every counter once.
    func testEveryReasonIsNamedAsOnTheWire() throws {
        let r = DaemonStatistics.Refusals(notSealed: 1, malformed: 2, unknownSender: 3, authentication: 4, replay: 5, stale: 6,
                                          senderMismatch: 7, notForEveryone: 8, unknownSession: 9, badSignature: 10, older: 11,
                                          behind: 12, silent: 13)
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        let wire = try XCTUnwrap(JSONSerialization.jsonObject(with: try encoder.encode(r)) as? [String: Int])
        XCTAssertEqual(Dictionary(uniqueKeysWithValues: r.byReason.map { ($0.reason, $0.count) }), wire)
        XCTAssertEqual(r.total, (1...13).reduce(0, +))
    }
}
