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
        let payload = UnsafeMutableRawBufferPointer.allocate(byteCount: 200, alignment: 8)
        let received = UnsafeMutableRawBufferPointer.allocate(byteCount: 2048, alignment: 8)
        defer { payload.deallocate(); received.deallocate() }
        var rung = 0, sent = 0, got = 0
        // Once before counting: the first call instantiates generic metadata (a debug build does).
        bell.ring()
        bell.drain()
        _ = a.send(UnsafeRawBufferPointer(payload), to: b.local)
        _ = b.waitReadable(milliseconds: 100)
        _ = b.receive(into: received)
        AllocationCounter.trackCurrentThread()
        AllocationCounter.arm()
        for _ in 0..<1000 {
            bell.ring()
            rung += bell.drain()
            if case .success = a.send(UnsafeRawBufferPointer(payload), to: b.local) { sent += 1 }
            _ = b.waitReadable(milliseconds: 100)
            if let (n, from) = b.receive(into: received), n == 200, from == a.local { got += 1 }
        }
        AllocationCounter.disarm()
        XCTAssertEqual(rung, 1000)
        XCTAssertEqual(sent, 1000)
        XCTAssertEqual(got, 1000)
        XCTAssertEqual(AllocationCounter.count, 0, "allocations: \(AllocationCounter.callers)")
    }
}
