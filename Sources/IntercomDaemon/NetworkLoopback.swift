import Calls
import Control
import Foundation
import Logging
import Posix
import RealTime
import SignalTools
import Synchronization

/// The network round-trip test to another room (`intercomctl loopback --room R`): `count` probes,
/// one every `intervalMs`, over the signalling socket; the room's daemon reflects each at once. Its
/// own short-lived thread sends them and summarises; the calls thread hands back the replies.
/// The round trip includes both calls threads' wake-up (tens of microseconds), not the media path's
/// queues: it measures the network between the terminals.
final class NetworkLoopback: Sendable {
    private struct Run {
        var status = NetworkLoopbackStatus(state: .idle)
        var room: RoomID?
        var started = 0
        var sentMicros: [UInt64] = []
        var rttMs: [Int: Double] = [:]
        var duplicates = 0
        var run = 0  // sequence numbers carry the run in their top byte: late replies of a past run are ignored
    }

    private let state = Mutex(Run())
    private let log: Logger
    static let maxCount = 2000

    init(logger: Logger) {
        log = logger
    }

    static func micros() -> UInt64 { MonotonicClock.nanoseconds() / 1000 }

    /// Control thread: starts a run; `send` puts one probe on the wire (false: unknown room).
    /// `timing` is read when the run ends: the jitter bounds to judge the path against, and the
    /// terminal's figures for the whole-path estimate.
    func start(room: RoomID, count: Int, intervalMs: Int, timing: @escaping @Sendable () -> TerminalTiming,
               send: @escaping @Sendable (UInt32, UInt64) -> Bool) -> Result<ControlReply, ControlFailure> {
        let run: Int? = state.withLock { s in
            guard s.status.state != .running else { return nil }
            s.run = (s.run + 1) & 0xFF
            s.status = NetworkLoopbackStatus(state: .running, room: room)
            s.room = room
            s.sentMicros = []
            s.rttMs = [:]
            s.duplicates = 0
            return s.run
        }
        guard let run else { return .failure(ControlFailure(.busy, "a network loopback test is running")) }
        log.notice("loopback: network round-trip test to \(room), \(count) probes every \(intervalMs) ms")
        do {
            try WorkerThread.start(name: "net-loopback") { [self] in
                probe(run: run, count: count, intervalMs: intervalMs, timing: timing, send: send)
            }
        } catch {
            state.withLock { $0.status = NetworkLoopbackStatus(state: .aborted, room: room) }
            return .failure(ControlFailure(.unavailable, "\(error)"))
        }
        return .success(.networkLoopback(NetworkLoopbackStatus(state: .running, room: room)))
    }

    func status() -> ControlReply { .networkLoopback(state.withLock { $0.status }) }

    /// Calls thread: a reflected probe came back.
    func reflected(from room: RoomID, sequence: UInt32, sentMicros: UInt64) {
        let now = Self.micros()
        state.withLock { s in
            guard s.status.state == .running, room == s.room, Int(sequence >> 24) == s.run else { return }
            let index = Int(sequence & 0xFF_FFFF)
            guard index < s.sentMicros.count, s.sentMicros[index] == sentMicros, now >= sentMicros else { return }
            if s.rttMs[index] != nil { s.duplicates += 1; return }
            s.rttMs[index] = Double(now - sentMicros) / 1000
        }
    }

    private func probe(run: Int, count: Int, intervalMs: Int, timing: @Sendable () -> TerminalTiming, send: @Sendable (UInt32, UInt64) -> Bool) {
        for i in 0..<count {
            let micros = Self.micros()
            state.withLock { $0.sentMicros.append(micros) }
            guard send(UInt32(run) << 24 | UInt32(i), micros) else {
                state.withLock { $0.status = NetworkLoopbackStatus(state: .aborted, room: $0.room) }
                return
            }
            usleep(UInt32(intervalMs * 1000))
        }
        usleep(500_000)  // stragglers
        let terminal = timing()
        let summary = state.withLock { s -> RoundTripSummary in
            let r = RoundTripSummary.summarise(sent: s.sentMicros.count, rttMs: s.rttMs, duplicates: s.duplicates,
                                               jitterBounds: (terminal.jitterMinMs, terminal.jitterMaxMs))
            s.status = NetworkLoopbackStatus(state: .done, room: s.room, result: r, terminal: terminal)
            return r
        }
        log.notice("loopback: network \(summary.received)/\(summary.sent) back, round trip median \(summary.medianMs.map { String(format: "%.2f ms", $0) } ?? "-")\(summary.problems.isEmpty ? "" : ": " + summary.problems.joined(separator: "; "))")
    }
}
