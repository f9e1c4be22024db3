import Glibc
import Posix
import XCTest

/// The one poller: what it reports ready, its one rule for time, and the stop signal every loop
/// waits on.
final class PollerTests: XCTestCase {
    func testAWaitReportsWhatIsReadyAndNothingOnTimeout() throws {
        let a = try Doorbell(), b = try Doorbell()
        var poller = Poller(capacity: 2)
        let first = poller.add(a.descriptor, read: true)
        let second = poller.add(b.descriptor, read: true)
        XCTAssertEqual(try poller.wait(timeoutMs: 10), 0)
        XCTAssertFalse(poller.events(at: first).any)
        XCTAssertFalse(poller.wasInterrupted)
        b.ring()
        XCTAssertEqual(try poller.wait(timeoutMs: 1000), 1)
        XCTAssertFalse(poller.events(at: first).readable)
        XCTAssertTrue(poller.events(at: second).readable)
        b.drain()
        XCTAssertEqual(try poller.wait(timeoutMs: 0), 0, "the readiness of the last wait is not carried over")
        XCTAssertFalse(poller.events(at: second).readable)
    }

    func testABrokenDescriptorIsReportedAndAnEntryRangeIsKept() throws {
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&fds), 0)
        close(fds[1])  // the writer is gone: the reader hangs up
        defer { close(fds[0]) }
        var poller = Poller()
        let range = poller.add(entries: [pollfd(fd: fds[0], events: Int16(POLLIN), revents: 0)])
        XCTAssertEqual(range, 0..<1)
        XCTAssertEqual(try poller.wait(timeoutMs: 1000), 1)
        XCTAssertTrue(poller.events(at: 0).broken)
        let seen = poller.withEntries(range) { entries, count in (count, entries[0].revents & Int16(POLLHUP) != 0) }
        XCTAssertEqual(seen.0, 1)
        XCTAssertTrue(seen.1)
        poller.reset()
        XCTAssertEqual(poller.count, 0)
    }

    func testSecondsBecomeMillisecondsRoundedUpAndClamped() {
        XCTAssertEqual(Poller.milliseconds(nil), -1)
        XCTAssertEqual(Poller.milliseconds(.infinity), -1)
        XCTAssertEqual(Poller.milliseconds(-.infinity), 0, "a deadline long past: no wait")
        XCTAssertEqual(Poller.milliseconds(-3), 0)
        XCTAssertEqual(Poller.milliseconds(0), 0)
        XCTAssertEqual(Poller.milliseconds(0.0001), 1, "never ends before its time")
        XCTAssertEqual(Poller.milliseconds(1.5), 1500)
        XCTAssertEqual(Poller.milliseconds(1e12), Int32.max)
    }

    func testAStopSignalWakesASleepAtOnceAndStaysSet() throws {
        let signal = try StopSignal()
        XCTAssertFalse(signal.sleep(seconds: 0.01))
        let setter = WorkerThread(name: "stop-setter") {
            usleep(50_000)
            signal.set()
        }
        let begun = MonotonicClock.seconds()
        try setter.start()
        XCTAssertTrue(signal.sleep(seconds: 30))
        let waited = MonotonicClock.seconds() - begun
        setter.join()
        XCTAssertLessThan(waited, 10, "woken by the set, not by the 30 s")
        XCTAssertTrue(signal.sleep(seconds: 30), "set stays set: a later sleep returns at once")
        // A poller that holds the bell sees it too.
        var poller = Poller()
        let bell = poller.add(signal.bell.descriptor, read: true)
        XCTAssertEqual(try poller.wait(timeoutMs: 0), 1)
        XCTAssertTrue(poller.events(at: bell).readable)
        signal.clear()
        XCTAssertFalse(signal.isSet)
        XCTAssertEqual(try poller.wait(timeoutMs: 0), 0, "clear drains the bell")
    }
}
