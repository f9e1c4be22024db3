import Foundation
import Glibc
import XCTest

@testable import IntercomDaemon

/// sd_notify's datagrams, received on a socket of the test's own, at a path and in the abstract
/// namespace; WATCHDOG_USEC and WATCHDOG_PID as systemd sets them.
final class ServiceNotifierTests: XCTestCase {
    /// A bound AF_UNIX datagram socket; `name` starting with "@" is abstract.
    final class Receiver {
        let fd: Int32
        init(_ name: String) throws {
            fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
            var a = sockaddr_un()
            a.sun_family = sa_family_t(AF_UNIX)
            var bytes = Array(name.utf8)
            if bytes[0] == UInt8(ascii: "@") { bytes[0] = 0 }
            withUnsafeMutableBytes(of: &a.sun_path) { p in for (i, b) in bytes.enumerated() { p[i] = b } }
            let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count)
            let rc = withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
            guard rc == 0 else { throw POSIXError(.init(rawValue: errno)!) }
            var tv = timeval(tv_sec: 2, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        }
        deinit { close(fd) }
        func next() -> String? {
            var buffer = [UInt8](repeating: 0, count: 4096)
            let n = recv(fd, &buffer, buffer.count, 0)
            return n > 0 ? String(decoding: buffer[0..<n], as: UTF8.self) : nil
        }
    }

    func testReadyStatusAndWatchdogReachASocketAtAPath() throws {
        let path = NSTemporaryDirectory() + "notify-\(UUID().uuidString.prefix(8)).sock"
        defer { unlink(path) }
        let receiver = try Receiver(path)
        let n = try XCTUnwrap(ServiceNotifier(environment: ["NOTIFY_SOCKET": path, "WATCHDOG_USEC": "4000000"]))
        XCTAssertEqual(n.watchdogInterval, 2.0, "pinged at half of WatchdogSec")
        n.ready(status: "idle,\nline two")
        let ready = try XCTUnwrap(receiver.next())
        XCTAssertTrue(ready.split(separator: "\n").contains("READY=1"), ready)
        XCTAssertTrue(ready.contains("STATUS=idle, line two"), "a newline would end the field: \(ready)")
        XCTAssertTrue(ready.contains("MAINPID=\(getpid())"), ready)
        n.watchdog()
        XCTAssertEqual(receiver.next(), "WATCHDOG=1")
        n.reloading()
        XCTAssertTrue(receiver.next()?.hasPrefix("RELOADING=1\nMONOTONIC_USEC=") == true)
    }

    func testAbstractSocketsWork() throws {
        let name = "@intercomd-test-\(UUID().uuidString.prefix(8))"
        let receiver = try Receiver(name)
        let n = try XCTUnwrap(ServiceNotifier(environment: ["NOTIFY_SOCKET": name]))
        XCTAssertNil(n.watchdogInterval, "no watchdog asked for")
        n.stopping(status: "stopping")
        XCTAssertEqual(receiver.next(), "STOPPING=1\nSTATUS=stopping")
    }

    func testNoSocketNoNotifierAndAWatchdogForAnotherProcessIsIgnored() throws {
        XCTAssertNil(ServiceNotifier(environment: [:]))
        XCTAssertNil(ServiceNotifier(environment: ["NOTIFY_SOCKET": "relative/path"]))
        let n = ServiceNotifier(environment: ["NOTIFY_SOCKET": "/nonexistent/x", "WATCHDOG_USEC": "1000000", "WATCHDOG_PID": "1"])
        XCTAssertNil(n?.watchdogInterval)
        XCTAssertEqual(n?.notify([("X", "1")]), false, "no one listens: reported, not thrown")
    }
}
