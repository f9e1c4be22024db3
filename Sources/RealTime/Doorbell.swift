import Glibc

/// Wakes a thread that waits in `poll` (a non-blocking pipe; Glibc's Swift module has no eventfd).
/// `ring` is one non-blocking 1-byte write:
/// no allocation, no lock, never waits, so the audio thread may call it once per frame to tell
/// the network thread that a microphone frame is ready.
public final class Doorbell: Sendable {
    /// Poll this for POLLIN; call `drain` when it fires.
    public let descriptor: Int32
    private let writeEnd: Int32

    public init() throws(DoorbellError) {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw DoorbellError(code: errno) }
        for fd in fds {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        descriptor = fds[0]
        writeEnd = fds[1]
    }

    deinit {
        close(descriptor)
        close(writeEnd)
    }

    @inline(__always)
    public func ring() {
        var one: UInt8 = 1
        _ = write(writeEnd, &one, 1)  // fails only when the pipe is full: then it is rung anyway
    }

    /// Clears the bell; returns how often it was rung since the last drain (up to 64 per read).
    @discardableResult
    public func drain() -> Int {
        var total = 0
        var bytes: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)
        while true {
            let n = withUnsafeMutableBytes(of: &bytes) { read(descriptor, $0.baseAddress, $0.count) }
            if n <= 0 { return total }
            total += n
        }
    }
}

public struct DoorbellError: Error, CustomStringConvertible {
    public let code: Int32
    public var description: String { "pipe failed: \(String(cString: strerror(code)))" }
}
