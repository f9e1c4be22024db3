import Glibc
import Posix

// The only file in Control that makes system calls (sockets, poll, the socket file).

/// The control socket could not be used: the path, and the failed call or the problem found.
public struct ControlSocketError: Error, CustomStringConvertible, Equatable {
    public let path: String
    /// The failed call; for a problem this code found, its text and the nearest errno.
    public let cause: SystemError
    /// False when `cause` is a problem this code found rather than a failed call.
    public let isSystemCall: Bool
    public var code: Int32 { cause.errno.rawValue }
    /// The system's text for a failed call, or the problem found.
    public var reason: String { isSystemCall ? cause.errno.description : cause.operation }

    init(_ operation: String, path: String, errno: Errno = SystemError.currentErrno) {
        self.init(SystemError(operation, errno), path: path)
    }

    init(_ cause: SystemError, path: String) {
        self.path = path
        self.cause = cause
        isSystemCall = true
    }

    init(path: String, problem: String, errno: Errno) {
        self.path = path
        cause = SystemError(problem, errno)
        isSystemCall = false
    }

    public var description: String {
        isSystemCall ? "control socket \(path): \(cause)" : "control socket \(path): \(cause.operation)"
    }
}

/// Who is at the other end of a connection, as the kernel saw it at connect (SO_PEERCRED, and
/// SO_PEERGROUPS for the supplementary groups).
public struct PeerCredentials: Sendable, Equatable, CustomStringConvertible {
    public let pid: Int32
    public let uid: UInt32
    public let gid: UInt32
    public let groups: [UInt32]
    public init(pid: Int32, uid: UInt32, gid: UInt32, groups: [UInt32] = []) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
        self.groups = groups
    }
    public var description: String {
        "pid \(pid) uid \(uid) gid \(gid)" + (groups.isEmpty ? "" : " groups \(groups.map(String.init).joined(separator: ","))")
    }

    /// Root, or a member of `group` (primary or supplementary).
    public func mayAct(asMemberOf group: UInt32) -> Bool { uid == 0 || gid == group || groups.contains(group) }
}

/// struct ucred from <sys/socket.h>: Glibc's Swift module hides it (it needs _GNU_SOURCE).
private struct UCred {
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0
}

/// A Unix stream socket. Closed when released.
public final class UnixSocket: @unchecked Sendable {
    // @unchecked: one thread uses a socket at a time (the server thread, or the client's caller).
    public let descriptor: Int32
    private var closed = false

    private init(descriptor: Int32) { self.descriptor = descriptor }
    deinit { close() }

    public func close() {
        guard !closed else { return }
        closed = true
        _ = Glibc.close(descriptor)
    }

    public typealias IOResult = StreamIO.Result

    // MARK: Server side

    /// Creates the listening socket at `path`. The lock file beside it (`SocketLock`) is taken
    /// first, so two daemons started at once cannot both see "no live socket" and take each
    /// other's file: the loser fails here, before it has made anything. A stale socket file is
    /// then removed; a live one (another daemon answers) or any other kind of file is an error.
    /// Returns the socket, the file's inode (only our own file is removed at stop) and the lock.
    static func listen(path: String, mode: UInt32, group: String?, backlog: Int32) throws(ControlSocketError) -> Listening {
        var address = try socketAddress(path)
        try createParentDirectory(of: path)
        let lock = try SocketLock(socketPath: path)
        do throws(ControlSocketError) {
            try removeStaleFile(path)
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { throw ControlSocketError("socket", path: path) }
            let sock = UnixSocket(descriptor: fd)
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            guard bound == 0 else { throw ControlSocketError("bind", path: path) }
            do throws(ControlSocketError) {
                // Before listen nobody can connect, so the looser mode bind left is never usable.
                guard chmod(path, mode_t(mode)) == 0 else { throw ControlSocketError("chmod", path: path) }
                if let group {
                    let gid = try groupID(group, path: path)
                    guard chown(path, uid_t.max, gid) == 0 else { throw ControlSocketError("chown to group \(group)", path: path) }
                }
                guard Glibc.listen(fd, backlog) == 0 else { throw ControlSocketError("listen", path: path) }
                var st = stat()
                guard lstat(path, &st) == 0 else { throw ControlSocketError("stat", path: path) }
                return Listening(socket: sock, inode: UInt64(st.st_ino), lock: lock)
            } catch {
                unlink(path)
                throw error
            }
        } catch {
            lock.release()
            throw error
        }
    }

    /// What `listen` made: the socket, its file's inode, and the lock that keeps the path ours.
    struct Listening {
        let socket: UnixSocket
        let inode: UInt64
        let lock: SocketLock
    }

    /// Removes the socket file if it is still the one we created (a newer daemon may have replaced it).
    static func removeSocketFile(path: String, inode: UInt64) {
        var st = stat()
        if lstat(path, &st) == 0, UInt64(st.st_ino) == inode, st.st_mode & S_IFMT == S_IFSOCK {
            unlink(path)
        }
    }

    /// The next pending connection, non-blocking; nil when there is none.
    func accept() throws(ControlSocketError) -> UnixSocket? {
        switch retryingInterrupts({ Glibc.accept(descriptor, nil, nil) }) {
        case .success(let fd):
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            return UnixSocket(descriptor: fd)
        // The peer gave up while queued: nothing to accept this time.
        case .failure(.resourceTemporarilyUnavailable), .failure(.connectionAbort), .failure(.protocolError): return nil
        case .failure(let code): throw ControlSocketError("accept", path: "", errno: code)
        }
    }

    func peerCredentials() -> PeerCredentials? {
        var cred = UCred()
        var length = socklen_t(MemoryLayout<UCred>.size)
        guard getsockopt(descriptor, SOL_SOCKET, SO_PEERCRED, &cred, &length) == 0 else { return nil }
        // SO_PEERGROUPS (Linux 4.13): the supplementary groups at connect; an empty list if refused.
        var groups = [gid_t](repeating: 0, count: 64)
        var size = socklen_t(groups.count * MemoryLayout<gid_t>.size)
        let found = getsockopt(descriptor, SOL_SOCKET, Self.peerGroupsOption, &groups, &size) == 0
            ? Int(size) / MemoryLayout<gid_t>.size : 0
        return PeerCredentials(pid: cred.pid, uid: cred.uid, gid: cred.gid, groups: Array(groups.prefix(found)))
    }

    /// SO_PEERGROUPS from <asm-generic/socket.h>; Glibc's Swift overlay does not export it.
    private static let peerGroupsOption: Int32 = 59

    // MARK: Client side

    /// Connects to `path`. The socket blocks, bounded by `timeout` seconds for connect, send and
    /// receive (0 for receive: wait forever).
    public static func connect(path: String, timeout: Double, receiveTimeout: Double? = nil) throws(ControlSocketError) -> UnixSocket {
        var address = try socketAddress(path)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw ControlSocketError("socket", path: path) }
        let sock = UnixSocket(descriptor: fd)
        // A Unix connect waits on a full backlog for up to SO_SNDTIMEO.
        sock.setTimeout(SO_SNDTIMEO, timeout)
        sock.setTimeout(SO_RCVTIMEO, receiveTimeout ?? timeout)
        let connected = retryingInterrupts {
            withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
        }
        if case .failure(let code) = connected { throw ControlSocketError("connect", path: path, errno: code) }
        return sock
    }

    /// Changes how long a blocking receive waits (0: forever).
    public func setReceiveTimeout(_ seconds: Double) { setTimeout(SO_RCVTIMEO, seconds) }

    private func setTimeout(_ option: Int32, _ seconds: Double) {
        let whole = seconds.rounded(.down)
        var tv = timeval(tv_sec: Int(whole), tv_usec: Int((seconds - whole) * 1_000_000))
        _ = setsockopt(descriptor, SOL_SOCKET, option, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    // MARK: Both sides

    /// Sends without SIGPIPE; `wouldBlock` when a non-blocking socket is full or a blocking one timed out.
    public func send(_ bytes: UnsafeRawBufferPointer) -> IOResult { StreamIO.send(descriptor, bytes) }

    /// Receives up to `buffer.count` bytes.
    public func receive(into buffer: UnsafeMutableRawBufferPointer) -> IOResult { StreamIO.receive(descriptor, into: buffer) }

    public func shutdownWrite() { _ = shutdown(descriptor, Int32(SHUT_WR)) }

    // MARK: Helpers

    private static func socketAddress(_ path: String) throws(ControlSocketError) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard !bytes.isEmpty, bytes.count < capacity else {
            throw ControlSocketError(path: path, problem: "path must be 1 to \(capacity - 1) bytes long", errno: Errno(rawValue: ENAMETOOLONG))
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
        }
        return address
    }

    /// The default path's directory (/run/intercomd) may not exist before the first start.
    private static func createParentDirectory(of path: String) throws(ControlSocketError) {
        guard let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return }
        let parent = String(path[..<slash])
        var st = stat()
        if stat(parent, &st) == 0 { return }
        guard mkdir(parent, 0o755) == 0 || errno == EEXIST else { throw ControlSocketError("mkdir \(parent)", path: path) }
    }

    private static func removeStaleFile(_ path: String) throws(ControlSocketError) {
        var st = stat()
        guard lstat(path, &st) == 0 else {
            if errno == ENOENT { return }
            throw ControlSocketError("stat", path: path)
        }
        guard st.st_mode & S_IFMT == S_IFSOCK else {
            throw ControlSocketError(path: path, problem: "exists and is not a socket; not removing it", errno: Errno(rawValue: EEXIST))
        }
        if (try? connect(path: path, timeout: 1)) != nil {
            throw ControlSocketError(path: path, problem: "another daemon is listening on it", errno: Errno(rawValue: EADDRINUSE))
        }
        guard unlink(path) == 0 || errno == ENOENT else { throw ControlSocketError("unlink stale socket", path: path) }
    }

    /// A group by name or number, for the settings that name one.
    public static func resolveGroup(_ group: String) throws(ControlSocketError) -> gid_t { try groupID(group, path: "") }

    private static func groupID(_ group: String, path: String) throws(ControlSocketError) -> gid_t {
        if let number = gid_t(group) { return number }
        var entry = group_struct()
        var result: UnsafeMutablePointer<group_struct>?
        var buffer = [CChar](repeating: 0, count: 16 * 1024)
        let rc = getgrnam_r(group, &entry, &buffer, buffer.count, &result)
        guard rc == 0 else { throw ControlSocketError("getgrnam \(group)", path: path, errno: Errno(rawValue: rc)) }
        guard result != nil else { throw ControlSocketError(path: path, problem: "no group named \(group)", errno: .noSuchFileOrDirectory) }
        return entry.gr_gid
    }
}

private typealias group_struct = Glibc.group

/// Who owns a control socket's path: an exclusive `flock` on `<socket>.lock`, holding the owner's
/// pid. The kernel drops the lock when its process dies, however it dies, so a crashed daemon
/// never blocks the next one; a live one makes every other daemon fail at once, naming its pid.
final class SocketLock: @unchecked Sendable {
    // @unchecked: taken in `listen`, released once by the server that owns it.
    let path: String
    private var descriptor: Int32

    init(socketPath: String) throws(ControlSocketError) {
        let lockPath = socketPath + ".lock"
        path = lockPath
        // The owner unlinks the file at stop: a lock taken on a file that was unlinked meanwhile
        // is worthless, so check that the path still names the file locked, and try again if not.
        for _ in 0..<8 {
            let fd = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
            guard fd >= 0 else { throw ControlSocketError("open \(lockPath)", path: socketPath) }
            if flock(fd, LOCK_EX | LOCK_NB) != 0 {
                let code = errno
                let owner = Self.owner(fd)
                Glibc.close(fd)
                guard code == EWOULDBLOCK else { throw ControlSocketError("lock \(lockPath)", path: socketPath, errno: Errno(rawValue: code)) }
                throw ControlSocketError(path: socketPath, problem: "another daemon is listening on it"
                    + (owner.map { " (pid \($0), which holds \(lockPath))" } ?? " (it holds \(lockPath))"), errno: Errno(rawValue: EADDRINUSE))
            }
            var held = stat(), named = stat()
            guard fstat(fd, &held) == 0, lstat(lockPath, &named) == 0, held.st_ino == named.st_ino, held.st_dev == named.st_dev else {
                Glibc.close(fd)
                continue
            }
            let pid = Array("\(getpid())\n".utf8)
            _ = ftruncate(fd, 0)
            _ = pid.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
            descriptor = fd
            return
        }
        throw ControlSocketError(path: socketPath, problem: "\(lockPath) keeps being replaced; not taking it", errno: Errno(rawValue: EAGAIN))
    }

    /// Removes the lock file and drops the lock (in that order: nobody can lock a file that is
    /// still ours and then find it gone). Idempotent.
    func release() {
        guard descriptor >= 0 else { return }
        unlink(path)
        Glibc.close(descriptor)
        descriptor = -1
    }

    deinit { release() }

    /// The pid the lock file names, if it names one.
    private static func owner(_ fd: Int32) -> Int32? {
        var bytes = [UInt8](repeating: 0, count: 16)
        let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard n > 0 else { return nil }
        return Int32(String(decoding: bytes[..<n].prefix { $0 != UInt8(ascii: "\n") }, as: UTF8.self))
    }
}
