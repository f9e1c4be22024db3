import AudioPipeline
import XCTest

/// The frames one wake-up read: the newest `capacity` are kept, in order, the oldest leave first.
final class CaptureBacklogTests: XCTestCase {
    private func push(_ backlog: CaptureBacklog, _ value: Int16) -> Int16? {
        var evicted: Int16?
        if backlog.isFull {
            evicted = backlog.oldest[0]
            backlog.removeOldest()
        }
        backlog.nextSlot.update(repeating: value, count: backlog.frameSize)
        backlog.commit()
        return evicted
    }

    func testKeepsTheNewestFramesInOrderAndHandsOutTheOldestFirst() {
        let backlog = CaptureBacklog(frameSize: 4, capacity: 5)
        let evicted = (1...8).compactMap { push(backlog, Int16($0)) }
        XCTAssertEqual(evicted, [1, 2, 3], "the three oldest of eight leave a backlog of five")
        backlog.setLost(2, beforeKept: 1)
        var kept: [Int16] = [], lost: [Int] = []
        while !backlog.isEmpty {
            XCTAssertEqual(Array(UnsafeBufferPointer(start: backlog.oldest, count: 4)), [Int16](repeating: backlog.oldest[0], count: 4))
            kept.append(backlog.oldest[0])
            lost.append(backlog.lostBeforeOldest)
            backlog.removeOldest()
        }
        XCTAssertEqual(kept, [4, 5, 6, 7, 8])
        XCTAssertEqual(lost, [0, 2, 0, 0, 0], "a loss stays with its frame")
    }

    func testAFrameLeftAfterARestartIsForgotten() {
        let backlog = CaptureBacklog(frameSize: 2, capacity: 3)
        _ = push(backlog, 7)
        _ = push(backlog, 8)
        backlog.removeAll()
        XCTAssertTrue(backlog.isEmpty)
        _ = push(backlog, 9)
        XCTAssertEqual(backlog.oldest[0], 9)
        XCTAssertEqual(backlog.count, 1)
    }
}
