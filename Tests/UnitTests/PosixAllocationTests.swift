import CAllocCounter
import Posix
import TestSupport
import XCTest

/// The system layer's per-frame and per-packet calls allocate nothing: the audio thread rings the
/// doorbell once per frame, the network thread sends and receives each datagram.
final class PosixAllocationTests: XCTestCase {
    func testDoorbellAndUDPSocketAllocateNothingPerCall() throws {
        XCTAssertEqual(alloc_counter_is_active(), 1, "malloc must be routed through the counter for this test to measure")
        let bell = try Doorbell()
        let a = try UDPSocket(bind: .loopback(port: 0))
        let b = try UDPSocket(bind: .loopback(port: 0))
        final class Round: @unchecked Sendable {  // written on the counted thread, read after its join
            let payload = UnsafeMutableRawBufferPointer.allocate(byteCount: 200, alignment: 8)
            let received = UnsafeMutableRawBufferPointer.allocate(byteCount: 2048, alignment: 8)
            var rung = 0, sent = 0, got = 0, allocations: UInt64 = 99
            func run(_ bell: Doorbell, _ a: UDPSocket, _ b: UDPSocket) {
                bell.ring()
                rung += bell.drain()
                if case .success = a.send(UnsafeRawBufferPointer(payload), to: b.local) { sent += 1 }
                _ = b.waitReadable(milliseconds: 100)
                if let (n, from) = b.receive(into: received), n == 200, from == a.local { got += 1 }
            }
        }
        let r = Round()
        defer { r.payload.deallocate(); r.received.deallocate() }
        // Once before counting: the first call instantiates generic metadata (a debug build does).
        r.run(bell, a, b)
        (r.rung, r.sent, r.got) = (0, 0, 0)
        // On a thread of its own: tracking a thread cannot be undone, and the test runner's
        // thread goes on to run other tests.
        let counted = WorkerThread(name: "posix-allocs") {
            AllocationCounter.trackCurrentThread()
            let before = AllocationCounter.count
            for _ in 0..<1000 { r.run(bell, a, b) }
            r.allocations = AllocationCounter.count - before
        }
        AllocationCounter.arm()
        try counted.start()
        counted.join()
        AllocationCounter.disarm()
        let (rung, sent, got) = (r.rung, r.sent, r.got)
        XCTAssertEqual(rung, 1000)
        XCTAssertEqual(sent, 1000)
        XCTAssertEqual(got, 1000)
        XCTAssertEqual(r.allocations, 0, "allocations: \(AllocationCounter.callers)")
    }
}
