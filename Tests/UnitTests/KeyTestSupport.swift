import Foundation
import Glibc
import Keys
import Synchronization
import XCTest

/// The writing end of a FIFO the key reader reads, as a key device would fill it.
final class FIFOWriter {
    let fd: Int32

    /// Waits (up to `timeout`) until a reader has the FIFO open: a non-blocking open for writing
    /// fails with ENXIO until then.
    init(path: String, timeout: Double = 5) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
            if fd >= 0 {
                _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
                self.fd = fd
                return
            }
            let code = errno
            guard code == ENXIO || code == ENOENT, Date() < deadline else {
                throw NSError(domain: "FIFOWriter", code: Int(code),
                              userInfo: [NSLocalizedDescriptionKey: "\(path): \(String(cString: strerror(code)))"])
            }
            usleep(5_000)
        }
    }

    func write(_ bytes: [UInt8]) {
        let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        precondition(n == bytes.count, "short write to FIFO: \(n)")
    }

    func write(_ events: [InputEvent]) {
        write(events.flatMap { $0.encoded() })
    }

    func close() { _ = Glibc.close(fd) }
}

/// Collects what a key reader delivers, on its thread, for the test's thread to wait on.
final class KeyCollector: Sendable {
    private let presses = Mutex<[KeyPress]>([])
    private let events = Mutex<[KeyReaderEvent]>([])

    var onPress: @Sendable (KeyPress) -> Void { { p in self.presses.withLock { $0.append(p) } } }
    var onEvent: @Sendable (KeyReaderEvent) -> Void { { e in self.events.withLock { $0.append(e) } } }

    var actions: [KeyAction?] { presses.withLock { $0.map(\.action) } }
    var allPresses: [KeyPress] { presses.withLock { $0 } }
    var allEvents: [KeyReaderEvent] { events.withLock { $0 } }

    /// Polls until `condition` holds or `timeout` passes; returns whether it held.
    @discardableResult
    func wait(timeout: Double = 5, until condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while !condition() {
            if Date() >= deadline { return false }
            usleep(2_000)
        }
        return true
    }

    func waitForActions(_ count: Int, timeout: Double = 5) -> [KeyAction?] {
        wait(timeout: timeout) { actions.count >= count }
        return actions
    }
}
