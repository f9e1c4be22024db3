import Glibc

/// A refused system call on a path, with the C library's text for errno.
struct PosixFailure: Error, Equatable, CustomStringConvertible {
    let what: String
    let reason: String
    init(_ what: String, code: Int32 = errno) {
        self.what = what
        self.reason = String(cString: strerror(code))
    }
    var description: String { "\(what): \(reason)" }
}

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
    static func open(path: String) -> Result<InputSource, PosixFailure> {
        let fd = Glibc.open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return .failure(PosixFailure("cannot open")) }
        return .success(InputSource(fd: fd, identity: FileIdentity.of(fd: fd)))
    }

    enum ReadResult: Equatable {
        case bytes(Int)
        case endOfFile
        case wouldBlock
        case failed(PosixFailure)
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> ReadResult {
        while true {
            let n = Glibc.read(fd, buffer.baseAddress, buffer.count)
            if n > 0 { return .bytes(n) }
            if n == 0 { return .endOfFile }
            switch errno {
            case EINTR: continue
            case EAGAIN: return .wouldBlock
            default: return .failed(PosixFailure("cannot read"))
            }
        }
    }

    func close() { _ = Glibc.close(fd) }
}

/// A non-blocking pipe whose read end wakes a `poll` (used to stop a thread).
struct WakePipe: Sendable {
    let readFD: Int32
    let writeFD: Int32

    static func make() throws(PosixFailure) -> WakePipe {
        var fds: [Int32] = [-1, -1]
        // pipe2 is not visible to Swift without _GNU_SOURCE; set the flags one by one.
        guard pipe(&fds) == 0 else { throw PosixFailure("cannot create wake pipe") }
        for fd in fds {
            guard fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) == 0, fcntl(fd, F_SETFD, FD_CLOEXEC) == 0 else {
                let failure = PosixFailure("cannot configure wake pipe")
                fds.forEach { _ = Glibc.close($0) }
                throw failure
            }
        }
        return WakePipe(readFD: fds[0], writeFD: fds[1])
    }

    func wake() {
        var byte: UInt8 = 1
        _ = Glibc.write(writeFD, &byte, 1)
    }

    func close() {
        _ = Glibc.close(readFD)
        _ = Glibc.close(writeFD)
    }
}

/// Waits for the descriptors (nil entries are skipped) to become readable or hung up.
/// Returns which ones did; an empty answer after `timeout` seconds.
func pollReadable(_ fds: [Int32], timeout: Double) -> [Bool] {
    var entries = fds.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
    let ms = Int32(max(0, min(timeout * 1000, Double(Int32.max))).rounded(.up))
    let n = Glibc.poll(&entries, nfds_t(entries.count), ms)
    guard n > 0 else { return fds.map { _ in false } } // timeout or EINTR: the caller loops
    return entries.map { $0.revents != 0 }
}

/// Seconds on the monotonic clock.
func monotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}
