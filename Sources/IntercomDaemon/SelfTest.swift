import Control
import Foundation
import IntercomConfig
import Logging
import Posix
import Synchronization

/// The terminal's own periodic check (`[selftest]`): once per interval, as soon as nothing is to
/// be heard (no call, tone or read-out), the device loopback with a quiet chirp. A check that
/// finds a problem lights the fault light until one passes; its result is in `stats`, the metrics
/// and the log. Its own thread looks once a second; it only arms and reads the loopback.
final class SelfTest: Service {
    var serviceName: String { "self-test" }
    private let settings: SelfTestSection
    /// Seconds between checks (the accelerated soak's `time_scale` shortens it).
    private let interval: Double
    private let loopback: DeviceLoopback
    private let isQuiet: @Sendable () -> Bool
    private let audioRunning: @Sendable () -> Bool
    private let log: Logger
    private struct State {
        var due: Double
        var running = false
        var postponedSinceDue = false
        var statistics = DaemonStatistics.SelfTest()
    }
    private let state: Mutex<State>
    private let worker = Mutex<PeriodicWorker?>(nil)

    /// Wait after a check the audio streams cut short (an xrun) before the next try, seconds.
    static let retryAfterAbortS = 60.0

    init(settings: SelfTestSection, loopback: DeviceLoopback, isQuiet: @escaping @Sendable () -> Bool,
         audioRunning: @escaping @Sendable () -> Bool, timeScale: Double = 1, logger: Logger) {
        self.settings = settings
        interval = Double(settings.interval.components.seconds) / timeScale
        self.loopback = loopback
        self.isQuiet = isQuiet
        self.audioRunning = audioRunning
        log = logger
        state = Mutex(State(due: MonotonicClock.seconds() + interval))
    }

    func start() throws(SystemError) {
        let w = try PeriodicWorker(name: "selftest", interval: 1) { [self] in tick() }
        worker.withLock { $0 = w }
    }

    func stop() {
        worker.withLock { w -> PeriodicWorker? in defer { w = nil }; return w }?.stop()
    }

    var statistics: DaemonStatistics.SelfTest { state.withLock { $0.statistics } }
    /// The last check failed (the fault light shows it until one passes).
    var failed: Bool { statistics.last?.passed == false }

    private func tick() {
        let now = MonotonicClock.seconds()
        let (running, due) = state.withLock { ($0.running, $0.due) }
        if running {
            let status = loopback.currentStatus
            if status.state != .running { finish(status, now: now) }
            return
        }
        guard now >= due else { return }
        // Never while anyone could hear it, nor during a technician's loopback test.
        let started = audioRunning() && isQuiet()
            && (try? loopback.start(insertMs: 0, audioRunning: true, gain: settings.gain).get()) != nil
        state.withLock { s in
            if started {
                s.running = true
            } else if !s.postponedSinceDue {
                s.postponedSinceDue = true
                s.statistics.postponed += 1
            }
        }
    }

    private func finish(_ status: LoopbackStatus, now: Double) {
        guard status.state == .done, let r = status.result else {
            state.withLock { s in
                s.running = false
                s.statistics.aborted += 1
                s.due = now + min(interval, Self.retryAfterAbortS)
            }
            log.notice("self-test: cut short (the audio streams restarted); again in \(Int(min(interval, Self.retryAfterAbortS))) s")
            return
        }
        let passed = r.problems.isEmpty && r.roundTripMs != nil
        let check = DaemonStatistics.SelfTest.Check(at: Date().timeIntervalSince1970, passed: passed, roundTripMs: r.roundTripMs,
                                                    echoLevelDb: r.echoLevelDb, problems: r.problems)
        state.withLock { s in
            s.running = false
            s.postponedSinceDue = false
            s.due = now + interval
            s.statistics.runs += 1
            if !passed { s.statistics.failures += 1 }
            s.statistics.last = check
        }
        if passed {
            log.info("self-test: passed, round trip \(String(format: "%.1f", r.roundTripMs ?? 0)) ms, chirp heard at \(String(format: "%.0f", r.echoLevelDb)) dBFS")
        } else {
            log.error("self-test: FAILED: \(r.problems.joined(separator: "; "))")
        }
    }
}
