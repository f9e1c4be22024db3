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

    /// The condition, with a failure recorded when it is false (a `Bool` is never nil, so the
    /// optional form above would never fail for one).
    @discardableResult
    func require(_ condition: Bool, _ message: @autoclosure () -> String) -> Bool {
        if !condition { failures.append(message()) }
        return condition
    }

    /// Notes that a precondition of this attempt failed (the rig's echo path moved, the machine held
    /// a stream up, a control run did not show what it must): it spoils the attempt.
    func rigFault(_ why: String) { rigFaults.append(why) }

    /// Notes a probe run's own xruns.
    func probed(_ r: TalkerProbe.Result) -> TalkerProbe.Result {
        probeXruns += r.xruns
        return r
    }
}

/// The one rule for "the machine, not intercomd, spoiled this window": it stopped for a frame or
/// more (`MachineStalls`: real-time watchers on every core woke that late), or a daemon or the
/// probe counted an xrun in it. A daemon that could not be asked (nil) proves nothing.
func machineSpoiled(_ stalls: MachineStalls.Reading, daemonXruns: [Int?], probeXruns: Int) -> Bool {
    stalls.proves || probeXruns > 0 || daemonXruns.contains { ($0 ?? 0) > 0 }
}

extension XCTestCase {
    /// Runs a measurement up to `attempts` (5) times; it passes when one attempt passes all checks.
    /// Only an attempt the machine provably spoiled is repeated: one in which a daemon or the probe
    /// counted xruns, the machine itself stopped for a frame or more (`MachineStalls`: real-time
    /// watchers on every core woke that late), or the rig broke a precondition it reports (`rigFault`). Each repeat is
    /// recorded with its cause (`Retries`). Any other failure fails at once, and so does the last
    /// attempt whatever spoiled it: a measurement is never turned into a skip.
    /// `daemonXrunsExpected`: the test provokes them itself; then only the probe's spoil an attempt.
    func measureWithRetries(_ name: String, attempts: Int = 5, daemonXrunsExpected: Bool = false,
                            _ body: (Checks) throws -> [DaemonProcess]) throws {
        for attempt in 1...attempts {
            let checks = Checks()
            let watch = MachineStalls()
            let daemons: [DaemonProcess]
            do { daemons = try body(checks) } catch { _ = watch.stop(); throw error }
            let stalls = watch.stop()
            if checks.failures.isEmpty && checks.rigFaults.isEmpty { return }
            let xruns = daemons.map(\.finalXruns)
            let spoiled = machineSpoiled(stalls, daemonXruns: daemonXrunsExpected ? [] : xruns, probeXruns: checks.probeXruns)
                || !checks.rigFaults.isEmpty
            let why = "xruns per daemon \(xruns.map { $0.map(String.init) ?? "unknown" }), probe \(checks.probeXruns), \(stalls)"
                + checks.rigFaults.map { ", \($0)" }.joined()
            if spoiled && attempt < attempts {
                Retries.record(name, attempt: attempt, cause: why, failures: checks.failures)
                continue
            }
            for f in checks.failures + checks.rigFaults {
                XCTFail("\(name) (attempt \(attempt) of \(attempts), \(why)): \(f)")
            }
            return
        }
    }
}
