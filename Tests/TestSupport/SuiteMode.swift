import Foundation
import XCTest

/// The measurement suite (`scripts/bench-suite.sh`) runs the `Suite…Tests` classes with
/// INTERCOM_SUITE=full (the figures in BENCHMARKS.md) or smoke (CI: each measurement once, small,
/// so that it cannot silently rot). In a normal test run they are skipped.
public struct SuiteMode: Sendable {
    public let isSmoke: Bool

    public static func require() throws -> SuiteMode {
        switch ProcessInfo.processInfo.environment["INTERCOM_SUITE"] {
        case "full": return SuiteMode(isSmoke: false)
        case "smoke": return SuiteMode(isSmoke: true)
        default: throw XCTSkip("a measurement of the suite: scripts/bench-suite.sh runs it")
        }
    }

    /// A paragraph saying what is measured, a blank line, and the head of the table that follows.
    public static func emitTable(intro: String, columns: [String]) {
        emit(intro)
        emit("")
        emit("| " + columns.joined(separator: " | ") + " |")
        emit("|" + String(repeating: "---|", count: columns.count))
    }

    /// One line of the section this test writes into BENCHMARKS.md.
    public static func emit(_ line: String) {
        print("SUITE|" + line)
        fflush(nil)  // all streams: stdout itself is not concurrency-safe to name
    }
}
