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
            // Where the estimate stood before the stalls (a CI run read -22 ppm after them, which a
            // trace of the stalls alone does not: DriftTraceTests).
            let before = [a, b].map { (try? $0.statistics().network?.streams.first?.driftPPM).flatMap { $0 } }
                .map { $0.map { String(format: "%.1f", $0) } ?? "-" }.joined(separator: "/")

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
            c.checkNoDrift([(statsA, "A", a), (statsB, "B", b)], after: " after the stalls (A/B before them: \(before) ppm)")
            return [a, b]
        }
    }
    /// A sender frozen for 300 ms, then for 1 s (issue 18, point 3): once it runs again it reads
    /// its capture device empty and sends only the newest 50 ms of what it read, so the room is on
    /// the wire again, live; the time lost is the stall's and no more, and the sender goes on at
    /// its full rate. Read from A's typed stats, polled every 5 ms from the moment it was let go.
    /// How soon it is live again (goal 100 ms; 8-26 ms on a quiet machine, 112-115 ms in two CI
    /// runs) is a figure of the suite (`SuiteStallRecoveryTests`), not a verdict here. (Judging the
    /// backlog by snd_pcm_delay, which right after such a stop reports the stop itself, once kept a
    /// sender at 269 packets in 20 s, and counted a 1 s stop twice in 1 run of 3.)
    func testAfterAStallTheSenderCatchesUpAndLosesOnlyTheStall() throws {
        try Rig.require()
        try measureWithRetries("A frozen 300 ms and 1 s", daemonXrunsExpected: true) { c in
            let portA = try FreePort.udp(), portB = try FreePort.udp()
            let a = try startRoom("roomA", listen: portA, peers: ["127.0.0.1:\(portB)"])
            let b = try startRoom("roomB", listen: portB, peers: ["127.0.0.1:\(portA)"])
            defer { a.terminate(); b.terminate() }
            waitUntilStreaming([a, b])
            for stallFrames in [30, 100] {
                guard let r = c.require(Self.freeze(a, frames: stallFrames), "A answers stats around the stall: \(a.logPath)") else { break }
                let stall = "\(stallFrames * 10) ms stall"
                print("\(stall): \(r)")
                c.check(r.liveAfterMs != nil, "\(stall): A's capture caught up and it sent within 2 s of resuming: \(a.logPath)")
                // The stall's time is lost, not more: at most the stall and the kept backlog.
                c.check(r.lost <= stallFrames + 10, "\(stall): A lost \(r.lost) frames of capture: \(a.logPath)")
                c.check(r.sentInASecond >= 95, "\(stall): A sent \(r.sentInASecond) packets in the second after it caught up: \(a.logPath)")
                c.check(r.captureDelayMs <= 20, "\(stall): A's capture device still holds \(r.captureDelayMs) ms: \(a.logPath)")
            }
            c.checkNoDrift([(try? a.statistics(), "A", a), (try? b.statistics(), "B", b)], after: " after the stalls")
            return [a, b]
        }
    }

    /// What one freeze of a sender did, from its typed stats.
    struct CatchUp: CustomStringConvertible {
        /// From SIGCONT to the first reply with the device read empty and a packet sent since.
        var liveAfterMs: Double?
        var lost: Int
        var stale: Int
        var sentInASecond: Int
        var captureDelayMs: Double
        var xruns: Int
        var description: String {
            "A live again after \(liveAfterMs.map { String(format: "%.1f ms", $0) } ?? "never"), capture lost \(lost) frames (\(stale) stale), "
                + "capture delay \(captureDelayMs) ms, sent \(sentInASecond) in the next second; xruns \(xruns)"
        }
    }

    /// Freezes `a` (SIGSTOP) for `frames` frames, lets it go and watches it catch up; nil if it
    /// did not answer stats before or a second after.
    static func freeze(_ a: DaemonProcess, frames: Int) -> CatchUp? {
        guard let before = try? a.statistics(), let sentBefore = before.network?.sent else { return nil }
        kill(a.process.processIdentifier, SIGSTOP)
        usleep(UInt32(frames * 10_000))
        let resumed = MonotonicClock.nanoseconds()
        kill(a.process.processIdentifier, SIGCONT)
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
        guard let after = try? a.statistics() else { return nil }
        return CatchUp(liveAfterMs: liveAfterMs, lost: after.audio.captureGapFrames - before.audio.captureGapFrames,
                       stale: after.audio.staleCaptureFrames - before.audio.staleCaptureFrames,
                       sentInASecond: (after.network?.sent ?? 0) - sentAtLive, captureDelayMs: after.audio.captureDelayMs,
                       xruns: after.audio.xruns - before.audio.xruns)
    }
}

/// The suite's catch-up after a stall (issue 18, point 3): A frozen for 1 s, seven times (smoke:
/// once), each time how soon it is live on the wire again; the goal is 100 ms. A freeze during
/// which the machine itself stopped (real-time watchers on every core woken a frame late) is
/// shown and left out of the median: the catch-up then waits for the machine, not for intercomd.
final class SuiteStallRecoveryTests: XCTestCase {
    func testSuiteHowSoonASenderIsLiveAgainAfterA1sStall() throws {
        let mode = try SuiteMode.require()
        try Rig.require()
        let count = mode.isSmoke ? 1 : 7
        SuiteMode.emit("### Live again after a 1 s stall (rig, a sender frozen with SIGSTOP)")
        SuiteMode.emit("")
        SuiteMode.emitTable(intro: "Room A in a call with room B, frozen for 1 s \(count) time\(count == 1 ? "" : "s") (about 2 s apart); from SIGCONT to A's first typed stats reply with its capture device read empty and a packet sent since (polled every 5 ms, the poll's own time included). Goal: 100 ms. Lower is better. A freeze during which the machine stopped (real-time watchers on every core woken a frame late) is shown and left out of the median.",
                            columns: ["stall", "live again after", "capture lost (stale)", "sent in the next second", "the machine", "goal"])
        let portA = try FreePort.udp(), portB = try FreePort.udp()
        let a = try startRoom("roomA", listen: portA, peers: ["127.0.0.1:\(portB)"])
        let b = try startRoom("roomB", listen: portB, peers: ["127.0.0.1:\(portA)"])
        defer { a.terminate(); b.terminate() }
        waitUntilStreaming([a, b])
        var clean: [Double] = [], measured = 0
        for n in 1...count {
            let watch = MachineStalls()
            let r = StallRecoveryTests.freeze(a, frames: 100)
            let stalls = watch.stop()
            guard let r, let live = r.liveAfterMs else {
                SuiteMode.emit("| \(n) | never (\(r.map(\.description) ?? "no stats")) | | | \(stalls) | not met |")
                continue
            }
            measured += 1
            if !stalls.proves { clean.append(live) }
            SuiteMode.emit(String(format: "| %d | %.1f ms | %d (%d) | %d | %@ | %@ |", n, live, r.lost, r.stale, r.sentInASecond,
                                  stalls.proves ? "\(stalls)" : "left it alone", stalls.proves ? "not judged" : live <= 100 ? "met" : "not met"))
        }
        SuiteMode.emit("")
        if clean.isEmpty {
            SuiteMode.emit("Every stall was spoiled by the machine: no median (goal not judged).")
        } else {
            let sorted = clean.sorted()
            SuiteMode.emit(String(format: "Stalls the machine left alone: %d of %d; live again after %.1f ms (median; %.1f-%.1f); goal (100 ms) met in %d of them.",
                                  clean.count, measured, sorted[sorted.count / 2], sorted.first!, sorted.last!, clean.filter { $0 <= 100 }.count))
        }
        SuiteMode.emit("")
        XCTAssertEqual(measured, count, "A came back live after every stall: \(a.logPath)")
    }
}
