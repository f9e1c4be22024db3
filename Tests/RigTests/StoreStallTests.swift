import CallStore
import Calls
import Control
import Foundation
import SignalTools
import TestSupport
import XCTest

/// A terminal's slow flash must not stall calls: history and state are written by a thread of
/// their own, never under the lock that signalling, control clients and keys take.
final class StoreStallTests: XCTestCase {
    /// B's every fsync is made `delayMs` slower (the preloaded FsyncDelay library, through the
    /// daemon's real write path), so each store write takes two delays. B's do-not-disturb is
    /// toggled every 50 ms, which keeps its state file being written the whole time, and a call
    /// ends, which writes its history. Meanwhile B's control socket answers and A's signalling
    /// probes come back from B's calls thread, none after waiting for a write (95 % within a tenth of one).
    func testControlAndSignallingStayAnsweredWhileTheStoreWritesAreSlow() throws {
        let delayMs = 300.0
        let library = Repo.builtProgram("libFsyncDelay.so")
        XCTAssertTrue(FileManager.default.fileExists(atPath: library), "the test library is built: \(library)")
        let rooms = try CallRooms(["roomA", "roomB"])
        defer { rooms.stopAll() }
        try rooms.start("rooma")
        try rooms.start("roomb", environment: ["LD_PRELOAD": library, "FSYNC_DELAY_MS": "\(Int(delayMs))"])
        XCTAssertTrue(rooms.waitOnline("rooma", ["roomb"]), "A sees B online")

        // A call that B's history keeps; it ends while the state writes below are under way.
        guard case .success = try rooms.control("rooma", .perform(.call(button: "roomb"))) else { return XCTFail("A calls B") }
        XCTAssertTrue(rooms.wait(5) { rooms.isConnected("rooma") && rooms.isConnected("roomb") }, "B answers")

        let toggling = ReplyTimes()
        let finalDoNotDisturb = Locked(false)
        let socketB = rooms.room("roomb").socket
        let toggler = Thread {
            do {
                let client = try ControlClient(path: socketB, timeout: 5)
                defer { client.close() }
                for i in 0..<60 {
                    let on = i % 2 == 0
                    let start = Date()
                    guard case .success(.doNotDisturb(on)) = try client.run(.perform(.setDoNotDisturb(on))) else {
                        return toggling.fail("do-not-disturb \(on) refused")
                    }
                    toggling.add(Date().timeIntervalSince(start) * 1000)
                    finalDoNotDisturb.value = on
                    usleep(50_000)
                }
            } catch { toggling.fail("\(error)") }
            toggling.finish()
        }
        toggler.start()
        usleep(200_000)
        // The probes start in A's calls thread and are reflected by B's.
        guard case .success = try rooms.control("rooma", .networkLoopback(room: RoomID("roomb")!, count: 200)) else {
            return XCTFail("A starts the signalling probes")
        }
        let status = ReplyTimes()
        let client = try ControlClient(path: rooms.room("roomb").socket, timeout: 5)
        defer { client.close() }
        var hungUp = false
        let historyBefore = rooms.history("roomb").count
        while !toggling.isFinished {
            let start = Date()
            guard case .success(.status) = try client.run(.status) else { return XCTFail("B's status") }
            status.add(Date().timeIntervalSince(start) * 1000)
            if !hungUp, status.count == 40 {
                guard case .success = try client.run(.perform(.hangUp)) else { return XCTFail("B hangs up") }
                hungUp = true
            }
            usleep(20_000)
        }
        XCTAssertNil(toggling.failure, "the toggles were all answered")

        var probes: RoundTripSummary?
        _ = rooms.wait(5) {
            guard case .success(.networkLoopback(let s))? = try? rooms.control("rooma", .networkLoopbackResult),
                  s.state == .done else { return false }
            probes = s.result
            return true
        }
        guard let probes, let probeP95 = probes.p95Ms, let probeMax = probes.maxMs else { return XCTFail("the probes' result") }
        print(String(format: "store stall: fsync +%.0f ms; B's control replies: do-not-disturb %@, status %@; signalling probes A→B→A: %d of %d back, median %.2f, 95 %% %.2f, max %.2f ms",
                     delayMs, toggling.summary, status.summary, probes.received, probes.sent, probes.medianMs ?? Double.nan, probeP95, probeMax))
        // A reply that waited for a write would take at least one slowed fsync: none may, and most
        // come far sooner (the test prints how soon; a bound in ms would be a timed test).
        let farBelowAWrite = delayMs / 10
        for (name, times) in [("do-not-disturb", toggling), ("status", status)] {
            XCTAssertLessThan(times.percentile(0.95), farBelowAWrite, "B answers \(name) far sooner than a write: \(times.summary)")
            XCTAssertLessThan(times.max, delayMs, "no \(name) reply waited for a write: \(times.summary)")
        }
        XCTAssertEqual(probes.received, probes.sent, "every probe came back")
        XCTAssertLessThan(probeP95, farBelowAWrite, "B's calls thread reflects probes far sooner than a write")
        XCTAssertLessThan(probeMax, delayMs, "no probe waited for a write")

        // The writes were slow, and they all happened: once the last toggle is on disk, one more
        // change shows there only after the temporary file's slowed fsync (the rename follows
        // it; the directory's fsync comes after), though its reply came at once.
        let statePath = "\(rooms.dir)/roomb-state.json"
        // Read as a control tool would; opening a StateStore here would clear B's temporary files.
        func onDisk() -> Bool? {
            (FileManager.default.contents(atPath: statePath)).flatMap { try? Wire.decoder().decode(TerminalState.self, from: $0) }?.doNotDisturb
        }
        let final = finalDoNotDisturb.value
        XCTAssertTrue(rooms.wait(5) { onDisk() == final }, "the last toggle is written")
        usleep(useconds_t(3 * delayMs * 1000))  // a write under way with an older value has ended
        XCTAssertEqual(onDisk(), final, "nothing older is written after the last toggle")
        let change = Date()
        guard case .success(.doNotDisturb(!final)) = try client.run(.perform(.setDoNotDisturb(!final))) else { return XCTFail("one more change") }
        let replyMs = Date().timeIntervalSince(change) * 1000
        XCTAssertTrue(rooms.wait(5) { onDisk() == !final }, "the change is written")
        let writeMs = Date().timeIntervalSince(change) * 1000
        print(String(format: "store stall: one change answered in %.2f ms, on disk after %.0f ms", replyMs, writeMs))
        XCTAssertLessThan(replyMs, delayMs, "the change is answered before it is written")
        XCTAssertGreaterThan(writeMs, 0.9 * delayMs, "the write went through the slowed fsync")
        XCTAssertTrue(rooms.isIdle("roomb"), "the call ended")
        XCTAssertEqual(rooms.history("roomb").count, historyBefore + 1, "B's history has the call at once")
        XCTAssertEqual(rooms.stop("roomb"), 0, "B stops cleanly")
        let kept = try HistoryStore(path: "\(rooms.dir)/roomb-history.json").all()
        XCTAssertEqual(kept.count, historyBefore + 1, "the history file has the call after B stopped: \(kept)")
    }
}

/// Reply times in ms, collected from two threads.
private final class ReplyTimes: @unchecked Sendable {
    private let lock = NSLock()
    private var times: [Double] = []
    private var done = false
    private(set) var failure: String?

    func add(_ ms: Double) { lock.withLock { times.append(ms) } }
    func fail(_ why: String) { lock.withLock { failure = why; done = true } }
    func finish() { lock.withLock { done = true } }
    var isFinished: Bool { lock.withLock { done } }
    var count: Int { lock.withLock { times.count } }
    var max: Double { lock.withLock { times.max() ?? .infinity } }

    func percentile(_ p: Double) -> Double {
        lock.withLock {
            let s = times.sorted()
            return s.isEmpty ? .infinity : s[min(s.count - 1, Int(Double(s.count) * p))]
        }
    }

    var summary: String {
        String(format: "%d replies, median %.2f, 95 %% %.2f, max %.2f ms", count, percentile(0.5), percentile(0.95), max)
    }
}

