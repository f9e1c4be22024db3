import Foundation
import TestSupport
import XCTest

/// Checks collected during one measurement attempt instead of failing at once, so that an attempt
/// spoiled by the machine (not by intercomd) can be repeated.
final class Checks {
    private(set) var failures: [String] = []
    /// xruns of the measuring instrument (the talker probe): they spoil an attempt as the daemons' do.
    private(set) var probeXruns = 0
    /// Why the rig could not give the measurement its precondition (e.g. an echo path that moved).
    private(set) var rigFaults: [String] = []

    func check(_ condition: Bool, _ message: @autoclosure () -> String) {
        if !condition { failures.append(message()) }
    }

    /// The value, or nil with a failure recorded.
    func require<T>(_ value: T?, _ message: @autoclosure () -> String) -> T? {
        if value == nil { failures.append(message()) }
        return value
    }

    /// Notes that the rig, not intercomd, broke a precondition of this attempt: it spoils the attempt.
    func rigFault(_ why: String) { rigFaults.append(why) }

    /// Notes a probe run's own xruns.
    func probed(_ r: TalkerProbe.Result) -> TalkerProbe.Result {
        probeXruns += r.xruns
        return r
    }
}

extension XCTestCase {
    /// Runs a measurement up to `attempts` (5) times; it passes when one attempt passes all checks.
    /// Only an attempt the machine spoiled is repeated: one where a daemon or the probe had an
    /// xrun, or the hypervisor stole more than `HostSteal.spoilingFraction` of the CPU (on this
    /// project's shared 2-core machines it steals 12-45 % at times). Any other failure fails at once.
    /// When every attempt was spoiled the test is skipped with the figures: not measured.
    /// `daemonXrunsExpected`: the test provokes them itself; then only the probe's spoil an attempt.
    func measureWithRetries(_ name: String, attempts: Int = 5, daemonXrunsExpected: Bool = false,
                            _ body: (Checks) throws -> [DaemonProcess]) throws {
        for attempt in 1...attempts {
            let checks = Checks()
            let steal = HostSteal()
            let daemons = try body(checks)
            if checks.failures.isEmpty && checks.rigFaults.isEmpty { return }
            let stolen = steal.fraction
            let xruns = daemons.map { $0.finalXruns ?? 0 }
            let spoiled = (!daemonXrunsExpected && xruns.contains { $0 > 0 }) || checks.probeXruns > 0
                || stolen > HostSteal.spoilingFraction || !checks.rigFaults.isEmpty
            let why = "xruns per daemon \(xruns), probe \(checks.probeXruns), host steal \(Int(stolen * 100)) %"
                + checks.rigFaults.map { ", \($0)" }.joined()
            if spoiled && attempt < attempts {
                print("\(name): attempt \(attempt) spoiled: the machine starved the audio (\(why)); repeating. It failed: \(checks.failures.joined(separator: " | "))")
                continue
            }
            if spoiled {
                // Every attempt was spoiled: the machine could not run the measurement. Reported as
                // a skip with its figures (CI's summary counts it), not as a verdict on intercomd.
                throw XCTSkip("\(name): all \(attempts) attempts spoiled by the machine (last: \(why)); not measured. Last failures: \(checks.failures.joined(separator: " | "))")
            }
            for f in checks.failures { XCTFail("\(name) (attempt \(attempt), \(why)): \(f)") }
            return
        }
    }
}
