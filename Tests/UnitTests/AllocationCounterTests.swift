import TestSupport
import XCTest

/// The zero-allocation proof on the audio thread is only worth something if the counter sees allocations.
final class AllocationCounterTests: XCTestCase {
    func testCounterSeesSwiftAllocationsOnATrackedThreadOnly() {
        final class Box: @unchecked Sendable { var count: UInt64 = 0; var kept: [[Int]] = [] }
        let tracked = Box(), untracked = Box()
        AllocationCounter.arm()
        let t1 = Thread {
            AllocationCounter.trackCurrentThread()
            let before = AllocationCounter.count
            for i in 0..<10 { tracked.kept.append([Int](repeating: i, count: 100 + i)) }
            tracked.count = AllocationCounter.count - before
        }
        let t2 = Thread {
            let before = AllocationCounter.count
            for i in 0..<10 { untracked.kept.append([Int](repeating: i, count: 100 + i)) }
            untracked.count = AllocationCounter.count - before
        }
        // One after the other: the count is global, only the tracking is per thread.
        t2.start()
        while !t2.isFinished { usleep(1000) }
        t1.start()
        while !t1.isFinished { usleep(1000) }
        AllocationCounter.disarm()
        XCTAssertGreaterThanOrEqual(tracked.count, 10, "allocations on the tracked thread must be counted")
        XCTAssertEqual(untracked.count, 0, "other threads must not be counted")
    }
}
