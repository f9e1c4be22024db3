import Foundation
import TestSupport
import XCTest

/// Checks collected during one measurement attempt instead of failing at once, so that an attempt
/// spoiled by the machine (not by intercomd) can be repeated.
final class Checks {
    private(set) var failures: [String] = []

    func check(_ condition: Bool, _ message: @autoclosure () -> String) {
        if !condition { failures.append(message()) }
    }

    /// The value, or nil with a failure recorded.
    func require<T>(_ value: T?, _ message: @autoclosure () -> String) -> T? {
        if value == nil { failures.append(message()) }
        return value
    }
}

extension XCTestCase {
    /// Runs a measurement up to `attempts` times. An attempt whose checks fail is repeated only
    /// when a daemon it ran reported xruns: then the machine starved intercomd's audio thread
    /// (another process took the CPU; on this 2-core machine a compiler does), a precondition of the
    /// measurement like the echo test's still echo path, not a property of the network path.
    /// Failures without xruns fail at once; so does the last attempt. Every repeat is printed.
    func measureWithRetries(_ name: String, attempts: Int = 3, _ body: (Checks) throws -> [DaemonProcess]) throws {
        for attempt in 1...attempts {
            let checks = Checks()
            let daemons = try body(checks)
            if checks.failures.isEmpty { return }
            let xruns = daemons.map { $0.finalXruns ?? 0 }
            if attempt < attempts, xruns.contains(where: { $0 > 0 }) {
                print("\(name): attempt \(attempt) spoiled: the machine starved the audio (xruns per daemon \(xruns)); repeating. It failed: \(checks.failures.joined(separator: " | "))")
                continue
            }
            for f in checks.failures { XCTFail("\(name) (attempt \(attempt), xruns per daemon \(xruns)): \(f)") }
            return
        }
    }
}
