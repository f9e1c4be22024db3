import Foundation
import Logging
import Posix
import RealTime

/// Keeps systemd informed while the daemon runs: `WATCHDOG=1` only while the audio thread makes
/// progress (frames counted since the last look), so that a stalled audio thread gets the service
/// restarted by `WatchdogSec=`; and a `STATUS=` line a person can read in `systemctl status`,
/// sent whenever it changes. An ordinary thread; it only reads counters and builds a string.
final class ServiceHealth: Service, @unchecked Sendable {
    // @unchecked: the fields below belong to the health thread; `stopping` is atomic.
    var serviceName: String { "service health" }
    private let notifier: ServiceNotifier
    private let progress: AudioProgress?
    private let status: @Sendable () -> String
    private let log: Logger
    private let interval: Double
    private var worker: PeriodicWorker?
    private var lastStatus = ""
    private var stalledSince: Double?
    /// Watchdog notifications sent, for tests and the log.
    let pings = Counter()

    /// - Parameters:
    ///   - progress: the audio thread's frame counter, watched; nil on a terminal without audio
    ///     (`[audio] enabled = false`), where the watchdog is fed while this thread runs.
    ///   - status: the current one-line status.
    init(notifier: ServiceNotifier, progress: AudioProgress?, status: @escaping @Sendable () -> String,
         logger: Logger) {
        self.notifier = notifier
        self.progress = progress
        self.status = status
        log = logger
        // Half of systemd's interval already; the status needs no more than a second.
        interval = min(notifier.watchdogInterval ?? 1, 1)
    }

    func start() throws(SystemError) {
        worker = try PeriodicWorker(name: "service-health", interval: interval, tickFirst: true) { [self] in check() }
    }

    func stop() {
        worker?.stop()
        worker = nil
    }

    private func check() {
        let now = MonotonicClock.seconds()
        if progress?.stalledFor(now: now) == nil {
            if notifier.watchdogInterval != nil { notifier.watchdog(); pings.increment() }
            if let since = stalledSince {
                log.notice("audio thread running again after \(String(format: "%.1f", now - since)) s; watchdog fed")
                stalledSince = nil
            }
        } else if stalledSince == nil {
            stalledSince = now
            log.warning("audio thread made no progress: the watchdog is no longer fed")
        }
        let s = stalledSince == nil ? status() : "audio stalled; " + status()
        if s != lastStatus {
            lastStatus = s
            notifier.status(s)
        }
    }
}
