import Glibc
import SystemPackage

@_exported import struct SystemPackage.Errno
@_exported import struct SystemPackage.FileDescriptor

/// A failed system call: what was attempted, and the system's errno (its text is strerror's).
/// The one error type for errno in the project; domain errors (a store file, a WAV file, the
/// control socket's path) carry one of these for their cause.
public struct SystemError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What was attempted, e.g. "bind 127.0.0.1:5004".
    public let operation: String
    public let errno: Errno

    public init(_ operation: String, _ errno: Errno) {
        self.operation = operation
        self.errno = errno
    }

    /// The calling thread's errno right now.
    public static var currentErrno: Errno { Errno(rawValue: Glibc.errno) }

    public var description: String { "\(operation) failed: \(errno.description) (\(errno.rawValue))" }
}

/// Calls `body` again while it fails with EINTR: the one place the project retries an interrupted
/// call. `body` follows the C convention (negative with errno set on failure). Allocates nothing,
/// so the real-time threads may use it.
@inline(__always)
public func retryingInterrupts<T: SignedInteger & FixedWidthInteger>(_ body: () -> T) -> Result<T, Errno> {
    while true {
        let result = body()
        if result >= 0 { return .success(result) }
        let code = SystemError.currentErrno
        if code != .interrupted { return .failure(code) }
    }
}

/// `retryingInterrupts` for a call whose failure ends the operation: throws `SystemError` naming it.
@inline(__always)
@discardableResult
public func systemCall<T: SignedInteger & FixedWidthInteger>(
    _ operation: @autoclosure () -> String, _ body: () -> T
) throws(SystemError) -> T {
    switch retryingInterrupts(body) {
    case .success(let value): return value
    case .failure(let code): throw SystemError(operation(), code)
    }
}
