import Glibc

/// One non-blocking send or receive on a stream socket (Unix or TCP): the one place both kinds
/// read and write, each call retried on EINTR only.
public enum StreamIO {
    public enum Result: Equatable, Sendable {
        case done(Int)
        /// A non-blocking socket is full (send) or empty (receive), or a blocking one timed out.
        case wouldBlock
        case endOfStream
        case failed(Errno)
    }

    /// Sends without SIGPIPE.
    public static func send(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer) -> Result {
        switch retryingInterrupts({ Glibc.send(descriptor, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL)) }) {
        case .success(let n): return .done(n)
        case .failure(.resourceTemporarilyUnavailable): return .wouldBlock
        case .failure(let code): return .failed(code)
        }
    }

    /// Receives up to `buffer.count` bytes.
    public static func receive(_ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer) -> Result {
        switch retryingInterrupts({ recv(descriptor, buffer.baseAddress, buffer.count, 0) }) {
        case .success(0): return .endOfStream
        case .success(let n): return .done(n)
        case .failure(.resourceTemporarilyUnavailable): return .wouldBlock
        case .failure(let code): return .failed(code)
        }
    }
}
