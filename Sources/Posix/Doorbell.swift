import Glibc
import SystemPackage

/// Wakes a thread that waits in `poll`: a non-blocking pipe (Glibc's Swift module has no eventfd).
/// `ring` is one non-blocking 1-byte write: no allocation, no lock, never waits, so the audio
/// thread may call it once per frame; a thread told to stop is woken the same way.
public final class Doorbell: Sendable {
    /// Poll this for POLLIN; call `drain` when it fires.
    public let descriptor: Int32
    private let writeEnd: Int32

    public init() throws(SystemError) {
        do {
            let (r, w) = try FileDescriptor.pipe(options: [.nonBlocking, .closeOnExec])
            descriptor = r.rawValue
            writeEnd = w.rawValue
        } catch {
            throw SystemError("pipe", error)
        }
    }

    deinit {
        close(descriptor)
        close(writeEnd)
    }

    @inline(__always)
    public func ring() {
        var one: UInt8 = 1
        _ = retryingInterrupts { write(writeEnd, &one, 1) }  // fails only when the pipe is full: then it is rung anyway
    }

    /// Clears the bell; returns how often it was rung since the last drain.
    @discardableResult
    public func drain() -> Int {
        var total = 0
        var bytes: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)
        while true {
            let result = withUnsafeMutableBytes(of: &bytes) { b in retryingInterrupts { read(descriptor, b.baseAddress, b.count) } }
            guard case .success(let n) = result, n > 0 else { return total }
            total += n
        }
    }

    /// Waits until the bell rings or `seconds` pass (nil: forever); true when it rang. Drains it.
    @discardableResult
    public func wait(seconds: Double?) -> Bool {
        let ready = Poller.waitReadable(descriptor, timeoutMs: Poller.milliseconds(seconds))
        if ready { drain() }
        return ready
    }
}
