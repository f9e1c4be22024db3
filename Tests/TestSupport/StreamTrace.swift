import Control
import Foundation
import Synchronization

/// Reads a daemon's first playing stream from its typed statistics a few times a second while a
/// measurement runs, so that a failed check can say what the receiver did and when (the target
/// rising on a burst of late packets, the corrector working an offset off) instead of only the
/// counters' totals.
public final class StreamTrace: Sendable {
    public struct Reading: Sendable {
        public let seconds: Double
        public let stream: DaemonStatistics.Stream
        /// What the playback device held at the reading, ms.
        public let playbackDelayMs: Double
    }

    private let readings = Mutex<[Reading]>([])
    private let stopped = Atomic<Bool>(false)
    private let done = DispatchSemaphore(value: 0)

    /// Starts reading `daemon` every `interval` seconds on a thread of its own.
    public init(_ daemon: DaemonProcess, interval: Double = 0.25) {
        let start = Date()
        Thread.detachNewThread { [self] in
            while !stopped.load(ordering: .relaxed) {
                if let all = try? daemon.statistics(timeout: 1), let s = all.network?.streams.first {
                    readings.withLock {
                        $0.append(Reading(seconds: Date().timeIntervalSince(start), stream: s, playbackDelayMs: all.audio.playbackDelayMs))
                    }
                }
                Thread.sleep(forTimeInterval: interval)
            }
            done.signal()
        }
    }

    /// Stops reading; returns what was read.
    @discardableResult
    public func stop() -> [Reading] {
        if !stopped.exchange(true, ordering: .relaxed) { done.wait() }
        return readings.withLock { $0 }
    }

    /// How the target moved over the readings, ms: how far it rose above where it was at the
    /// first reading (the path's jitter grew: it rises only on transit the window saw), how far it
    /// fell from the highest it reached (it shrinks only in a pause of a second,
    /// `shrinkPauseMs`), and how far apart its highest and lowest readings are (a delay that
    /// followed it moved at most this much).
    public func targetMoves() -> (riseMs: Double, fallMs: Double, rangeMs: Double) {
        let all = stop().map(\.stream.targetMs)
        guard let first = all.first else { return (0, 0, 0) }
        var peak = first, low = first, fall = 0.0
        for t in all { peak = max(peak, t); low = min(low, t); fall = max(fall, peak - t) }
        return (peak - first, fall, peak - low)
    }

    /// The playback device's queue over the readings, ms (lowest, highest).
    public func playbackQueueRangeMs() -> (low: Double, high: Double) {
        let queue = stop().map(\.playbackDelayMs)
        return (queue.min() ?? 0, queue.max() ?? 0)
    }

    /// The drift estimate and the corrector's trim about once a second, with the playout delay and
    /// the playback queue ("t: drift/trim ppm (playout/target, queue ms)"):
    /// how the estimate came to what it reads at the end.
    public func driftPath() -> String {
        var shown = -1.0
        return stop().compactMap { r -> String? in
            guard r.seconds >= shown + 1 else { return nil }
            shown = r.seconds
            return String(format: "%.0f s: %.0f/%.0f (%.1f/%.1f, %.1f)", r.seconds, r.stream.driftPPM, r.stream.trimPPM, r.stream.playoutDelayMs, r.stream.targetMs, r.playbackDelayMs)
        }.joined(separator: ", ")
    }

    /// One line per change of the target by half a millisecond or more and per reading where the late, underrun, insert or drop
    /// counters moved, plus the playout delay's range: the receiver's story in a few lines.
    public func story() -> String {
        let all = stop()
        guard let first = all.first, let last = all.last else { return "no stream was read" }
        var lines: [String] = []
        var previous = first.stream
        var shownTarget = first.stream.targetMs
        for r in all.dropFirst() {
            let s = r.stream
            var moved: [String] = []
            if abs(s.targetMs - shownTarget) >= 0.5 {
                moved.append(String(format: "target %.1f → %.1f ms", shownTarget, s.targetMs))
                shownTarget = s.targetMs
            }
            if s.late != previous.late { moved.append("late +\(s.late - previous.late)") }
            if s.underruns != previous.underruns { moved.append("underruns +\(s.underruns - previous.underruns)") }
            if s.inserted != previous.inserted { moved.append("inserted +\(s.inserted - previous.inserted)") }
            if s.dropped != previous.dropped { moved.append("dropped +\(s.dropped - previous.dropped)") }
            if s.newTimelines != previous.newTimelines { moved.append("new timeline") }
            if s.pathShiftMs != previous.pathShiftMs {
                moved.append(String(format: "the sender's timeline shifted %.1f ms", s.pathShiftMs - previous.pathShiftMs))
            }
            if s.pauseJumpedMs - previous.pauseJumpedMs >= 0.5 {
                moved.append(String(format: "jumped %.1f ms in a pause", s.pauseJumpedMs - previous.pauseJumpedMs))
            }
            if !moved.isEmpty {
                lines.append(String(format: "%.2f s: ", r.seconds) + moved.joined(separator: ", ")
                             + String(format: " (playout %.1f ms, trim %.0f ppm)", s.playoutDelayMs, s.trimPPM))
            }
            previous = s
        }
        let playout = all.map(\.stream.playoutDelayMs), queue = all.map(\.playbackDelayMs)
        let head = String(format: "%d readings over %.1f s: target %.1f → %.1f ms, playout delay %.1f-%.1f ms, playback queue %.1f-%.1f ms, slewed %.1f ms, jumped in pauses %.1f ms, drift %.0f ppm",
                          all.count, last.seconds - first.seconds, first.stream.targetMs, last.stream.targetMs,
                          playout.min() ?? 0, playout.max() ?? 0, queue.min() ?? 0, queue.max() ?? 0, last.stream.slewedMs - first.stream.slewedMs,
                          last.stream.pauseJumpedMs - first.stream.pauseJumpedMs, last.stream.driftPPM)
        return ([head] + lines).joined(separator: "\n  ")
    }
}
