import Glibc
import Posix
@testable import RigKit
import XCTest

/// The proof a measurement is repeated on: a core held up for 40 ms is seen by its watcher.
final class MachineStallsTests: XCTestCase {
    func testACoreHeldByARealTimeThreadFor40msIsSeen() throws {
        let watch = MachineStalls()
        Thread.sleep(forTimeInterval: 0.05)
        // A thread of the watchers' own priority on core 0, busy for 40 ms: SCHED_FIFO does not
        // preempt its equal, so core 0's watcher wakes that much late, as under a host that took
        // the core away.
        let hog = WorkerThread(name: "stall-hog") {
            _ = MachineStalls.pin(toCore: 0)
            let end = MonotonicClock.nanoseconds() + 40_000_000
            while MonotonicClock.nanoseconds() < end {}
        }
        try hog.start(priority: 99)
        hog.join()
        Thread.sleep(forTimeInterval: 0.05)
        let reading = watch.stop()
        print("machine stalls: \(reading)")
        // Real-time rights are what make the reading proof; the test command runs as root.
        XCTAssertEqual(reading.fifo, geteuid() == 0, "\(reading)")
        guard reading.fifo, case .fifo = hog.scheduling else { return }
        XCTAssertGreaterThanOrEqual(reading.count, 1, "\(reading)")
        XCTAssertGreaterThanOrEqual(reading.worstMs, 30, "\(reading)")
        XCTAssertTrue(reading.proves)
    }
}
