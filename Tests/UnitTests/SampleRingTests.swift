import RealTime
import XCTest

final class SampleRingTests: XCTestCase {
    func testWritesAndReadsWholeFramesAcrossTheWrapPoint() {
        let ring = SampleRing(minimumCapacity: 10)  // rounds up to 16
        XCTAssertEqual(ring.capacity, 16)
        var next: Int16 = 0
        var expected: Int16 = 0
        var out = [Int16](repeating: 0, count: 6)
        for _ in 0..<20 {
            let frame = (0..<6).map { _ -> Int16 in next += 1; return next }
            XCTAssertTrue(ring.write(frame, count: 6))
            XCTAssertTrue(ring.read(into: &out, count: 6))
            for v in out { expected += 1; XCTAssertEqual(v, expected) }
        }
    }

    func testFullRingRejectsWriteAndEmptyRingRejectsReadWithoutPartialCopies() {
        let ring = SampleRing(minimumCapacity: 8)
        let eight = [Int16](repeating: 7, count: 8)
        XCTAssertTrue(ring.write(eight, count: 8))
        XCTAssertFalse(ring.write(eight, count: 1))
        var out = [Int16](repeating: 0, count: 9)
        XCTAssertFalse(ring.read(into: &out, count: 9), "must not hand out a partial frame")
        XCTAssertEqual(ring.availableToRead, 8)
        XCTAssertTrue(ring.read(into: &out, count: 8))
        XCTAssertFalse(ring.read(into: &out, count: 1))
    }

    func testProducerAndConsumerThreadsSeeEverySampleInOrder() {
        let ring = SampleRing(minimumCapacity: 256)
        let total = 200_000
        let producer = Thread {
            var v: Int16 = 0
            var frame = [Int16](repeating: 0, count: 32)
            var sent = 0
            while sent < total {
                for i in 0..<32 { frame[i] = v &+ Int16(truncatingIfNeeded: i) }
                if ring.write(frame, count: 32) { v = v &+ 32; sent += 32 }
            }
        }
        producer.start()
        var expected: Int16 = 0
        var got = 0
        var frame = [Int16](repeating: 0, count: 32)
        var mismatches = 0
        let deadline = Date().addingTimeInterval(20)
        while got < total, Date() < deadline {
            if ring.read(into: &frame, count: 32) {
                for s in frame { if s != expected { mismatches += 1 }; expected = expected &+ 1 }
                got += 32
            }
        }
        XCTAssertEqual(got, total)
        XCTAssertEqual(mismatches, 0)
    }
}
