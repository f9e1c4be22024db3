import Glibc
import Posix

/// Which file a descriptor or path names, to notice a path that was removed or replaced.
struct FileIdentity: Equatable {
    let device: UInt64
    let inode: UInt64

    static func of(fd: Int32) -> FileIdentity? {
        var s = stat()
        guard fstat(fd, &s) == 0 else { return nil }
        return FileIdentity(device: UInt64(s.st_dev), inode: UInt64(s.st_ino))
    }

    static func of(path: String) -> FileIdentity? {
        var s = stat()
        guard stat(path, &s) == 0 else { return nil }
        return FileIdentity(device: UInt64(s.st_dev), inode: UInt64(s.st_ino))
    }
}

/// An open, non-blocking input device or FIFO.
struct InputSource {
    let fd: Int32
    let identity: FileIdentity?

    /// Non-blocking, so opening a FIFO does not wait for a writer.
    static func open(path: String) -> Result<InputSource, SystemError> {
        retryingInterrupts { Glibc.open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC) }
            .map { InputSource(fd: $0, identity: FileIdentity.of(fd: $0)) }
            .mapError { SystemError("open", $0) }
    }

    enum ReadResult: Equatable {
        case bytes(Int)
        case endOfFile
        case wouldBlock
        case failed(SystemError)
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> ReadResult {
        switch retryingInterrupts({ Glibc.read(fd, buffer.baseAddress, buffer.count) }) {
        case .success(0): .endOfFile
        case .success(let n): .bytes(n)
        case .failure(.resourceTemporarilyUnavailable): .wouldBlock
        case .failure(let code): .failed(SystemError("read", code))
        }
    }

    func close() { _ = Glibc.close(fd) }
}
