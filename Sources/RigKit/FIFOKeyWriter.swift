import Foundation
import Glibc
import Keys

/// Writes evdev records into a FIFO the daemon's key reader has open.
public final class FIFOKeyWriter {
    private let fd: Int32
    public init(path: String) throws {
        let deadline = Date().addingTimeInterval(5)
        var fd: Int32 = -1
        while fd < 0 && Date() < deadline {
            fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
            if fd < 0 { usleep(20_000) }
        }
        guard fd >= 0 else { throw NSError(domain: "keys", code: 1, userInfo: [NSLocalizedDescriptionKey: "\(path): no reader opened the key FIFO"]) }
        self.fd = fd
    }
    deinit { close(fd) }

    public func press(_ code: UInt16) {
        send([InputEvent.key(code, InputEvent.press), InputEvent.key(code, InputEvent.release)])
    }

    /// Holds the key down for `seconds` (a long press).
    public func hold(_ code: UInt16, seconds: Double) {
        send([InputEvent.key(code, InputEvent.press)])
        Thread.sleep(forTimeInterval: seconds)
        send([InputEvent.key(code, InputEvent.release)])
    }

    private func send(_ events: [InputEvent]) {
        let bytes = events.flatMap { $0.encoded() }
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }
}
