import Foundation
import Posix
import SignalTools
import TestSupport
import XCTest

/// A whole daemon frozen for a moment (SIGSTOP, then SIGCONT: what a starved VM or a paging
/// storm does to it) costs the listener that moment and no more: the echo canceller pairs its
/// streams again, the sender's timestamps jump over the lost time, the receiver's jitter buffer
/// keeps its delay. Before these were handled, one 150 ms stall of the sender left STOI at 0.45
/// for the rest of the talk (no echo cancellation, a receiver cutting back every few frames).
final class StallRecoveryTests: XCTestCase {
    static let stallMs = 150.0
    /// Measured 0.73-0.89 with two 150 ms stalls in a 5 s clip (6 % of it lost; 8 runs); 0.93-0.96
    /// without stalls, 0.45-0.55 before intercomd recovered from them.
    static let minSTOI = 0.70

    /// A talks to B; A (the sender) freezes 1.5 s into the talk, B (the receiver) 1.5 s later.
    func testSpeechSurvivesA150msStallOfTheSenderAndOfTheReceiver() throws {
        try Rig.require()
        try measureWithRetries("A ↔ B with stalls", daemonXrunsExpected: true) { c in
            let dir = try Repo.scratchFolder("net-stalls")
            let portA = try FreePort.udp(), portB = try FreePort.udp()
            let a = try startRoom("roomA", listen: portA, peers: ["127.0.0.1:\(portB)"])
            let b = try startRoom("roomB", listen: portB, peers: ["127.0.0.1:\(portA)"])
            defer { a.terminate(); b.terminate() }
            waitUntilStreaming([a, b])

            let freezer = Thread {
                for room in [a, b] {
                    Thread.sleep(forTimeInterval: 1.5)
                    kill(room.process.processIdentifier, SIGSTOP)
                    usleep(UInt32(Self.stallMs * 1000))
                    kill(room.process.processIdentifier, SIGCONT)
                }
            }
            freezer.start()
            let ab = try c.probed(TalkerProbe(mouth: "roomA", ear: "roomB").run(clipPath: Speech.roomA(), folder: dir, name: "roomB-speaker"))
            XCTAssertEqual(b.terminate(), 0, b.log)
            XCTAssertEqual(a.terminate(), 0, a.log)
            let q = try Quality.measure(reference: ab.clipPath, recording: ab.recordingPath)
            guard let statsA = c.require(a.finalStatistics, "A answered stats before it stopped"),
                  let statsB = c.require(b.finalStatistics, "B answered stats before it stopped") else { return [a, b] }
            let stream = statsB.network?.streams.first
            print("stalls: A → B \(q), stretches \(ab.summary); A lost \(statsA.audio.captureGapFrames) frames, "
                  + "realigned \(statsA.audio.echoCancellerRealignments)/\(statsB.audio.echoCancellerRealignments); B: \(statsB.network?.summary ?? "-")")

            c.check(q.stoi >= Self.minSTOI, "STOI \(q.stoi) < \(Self.minSTOI) after two \(Self.stallMs) ms stalls: \(q); stretches \(ab.summary); \(a.logPath) \(b.logPath)")
            // The receiver's delay came back: the last stretch is heard within 150 ms of the first,
            // and the jitter buffer never had to cut back more than once per stall.
            if let first = ab.windows.first(where: { $0.peak >= TalkerProbe.minPeak }), let last = ab.windows.last(where: { $0.peak >= 0.3 }) {
                c.check(last.delayMs < first.delayMs + 150, "the delay grew from \(first.delayMs) to \(last.delayMs) ms: \(ab.summary)")
            } else {
                c.check(false, "the clip was not found in B's speaker: \(ab.summary)")
            }
            // A room that re-paired its echo reference after its stall must have paired it so
            // that the echo follows the reference (a negative delay cannot be cancelled).
            for (stats, name, room) in [(statsA, "A", a), (statsB, "B", b)] where stats.audio.echoCancellerRealignments > 0 {
                if let delay = stats.audio.echoDelayMs {
                    c.check(delay > -5, "\(name) re-paired its echo reference with the echo \(delay) ms before it: \(room.logPath)")
                }
            }
            if let s = c.require(stream, "B's final statistics list A's stream: \(b.logPath)") {
                c.check(s.cutBacks <= 2, "B cut back \(s.cutBacks) times: \(b.logPath)")
            }
            // A frozen room comes back to a restarted speaker queue and a backlog stamped at once:
            // its drift loop starts over, and the estimate still reads no drift.
            c.checkNoDrift([(statsA, "A", a), (statsB, "B", b)], after: " after the stalls")
            return [a, b]
        }
    }
    /// A sender frozen for 300 ms, then for 1 s (issue 18, point 3): once it runs again it reads
    /// its capture device empty and sends only the newest 50 ms of what it read, so the room is on
    /// the wire again, live, within 100 ms; the time lost is the stall's and no more, and the
    /// sender goes on at its full rate. Read from A's typed stats, polled every 5 ms from the
    /// moment it was let go. (Judging the backlog by snd_pcm_delay, which right after such a stop
    /// reports the stop itself, once kept a sender at 269 packets in 20 s, and counted a 1 s
    /// stop twice in 1 run of 3.)
    func testAfterAStallTheSenderIsLiveAgainWithin100ms() throws {
        try Rig.require()
        try measureWithRetries("A frozen 300 ms and 1 s", daemonXrunsExpected: true) { c in
            let portA = try FreePort.udp(), portB = try FreePort.udp()
            let a = try startRoom("roomA", listen: portA, peers: ["127.0.0.1:\(portB)"])
            let b = try startRoom("roomB", listen: portB, peers: ["127.0.0.1:\(portA)"])
            defer { a.terminate(); b.terminate() }
            waitUntilStreaming([a, b])
            for stallFrames in [30, 100] {
                guard let before = c.require(try? a.statistics(), "A answers stats"), let sentBefore = before.network?.sent else { break }
                kill(a.process.processIdentifier, SIGSTOP)
                usleep(UInt32(stallFrames * 10_000))
                let resumed = MonotonicClock.nanoseconds()
                kill(a.process.processIdentifier, SIGCONT)
                // The first reply in which A has read its device empty and sent since the freeze.
                var liveAfterMs: Double?, last = before
                while liveAfterMs == nil, MonotonicClock.nanoseconds() - resumed < 2_000_000_000 {
                    if let s = try? a.statistics(timeout: 1) {
                        last = s
                        if s.audio.captureDelayMs <= 20, let sent = s.network?.sent, sent > sentBefore + 1 {
                            liveAfterMs = Double(MonotonicClock.nanoseconds() - resumed) / 1e6
                        }
                    }
                    usleep(5_000)
                }
                let sentAtLive = last.network?.sent ?? 0
                Thread.sleep(forTimeInterval: 1.0)
                guard let after = c.require(try? a.statistics(), "A answers stats after the stall") else { break }
                let sentInASecond = (after.network?.sent ?? 0) - sentAtLive
                let stale = after.audio.staleCaptureFrames - before.audio.staleCaptureFrames
                let lost = after.audio.captureGapFrames - before.audio.captureGapFrames
                let stall = "\(stallFrames * 10) ms stall"
                print("\(stall): A live again after \(liveAfterMs.map { String(format: "%.1f ms", $0) } ?? "never"), "
                      + "capture lost \(lost) frames (\(stale) stale), capture delay \(after.audio.captureDelayMs) ms, "
                      + "sent \(sentInASecond) in the next second; xruns \(after.audio.xruns - before.audio.xruns)")
                c.check(liveAfterMs.map { $0 <= 100 } ?? false,
                        "\(stall): A's capture caught up and sent \(liveAfterMs.map { "\($0) ms" } ?? "never") after it resumed (goal 100 ms): \(a.logPath)")
                // The stall's time is lost, not more: at most the stall and the kept backlog.
                c.check(lost <= stallFrames + 10, "\(stall): A lost \(lost) frames of capture: \(a.logPath)")
                c.check(sentInASecond >= 95, "\(stall): A sent \(sentInASecond) packets in the second after it caught up: \(a.logPath)")
                c.check(after.audio.captureDelayMs <= 20, "\(stall): A's capture device still holds \(after.audio.captureDelayMs) ms: \(a.logPath)")
            }
            c.checkNoDrift([(try? a.statistics(), "A", a), (try? b.statistics(), "B", b)], after: " after the stalls")
            return [a, b]
        }
    }
}
