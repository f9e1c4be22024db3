import Glibc

/// A non-blocking IPv4 TCP socket: listening, accepted or connected. Only the site document's
/// transfers use TCP (a document is larger than a datagram); nothing real-time does.
public final class TCPSocket: Sendable {
    public let descriptor: Int32

    public typealias IOResult = StreamIO.Result

    private init(descriptor: Int32) { self.descriptor = descriptor }

    deinit { close(descriptor) }

    private static func make() throws(SystemError) -> Int32 {
        try systemCall("socket") {
            socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        }
    }

    /// Listens on `endpoint` (port 0: the kernel picks one).
    public static func listen(_ endpoint: IPv4Endpoint, backlog: Int32 = 16) throws(SystemError) -> TCPSocket {
        let fd = try make()
        let s = TCPSocket(descriptor: fd)
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var a = endpoint.socketAddress
        try systemCall("bind tcp \(endpoint)") {
            withUnsafePointer(to: &a) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
        }
        try systemCall("listen tcp \(endpoint)") { Glibc.listen(fd, backlog) }
        return s
    }

    /// The address this socket is bound to.
    public var local: IPv4Endpoint {
        var bound = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &bound) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        return IPv4Endpoint(bound)
    }

    /// The next waiting connection (non-blocking itself) and who it is from; nil when none waits.
    public func accept() throws(SystemError) -> (socket: TCPSocket, peer: IPv4Endpoint)? {
        var peer = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let result = retryingInterrupts {
            withUnsafeMutablePointer(to: &peer) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.accept(descriptor, $0, &length) }
            }
        }
        switch result {
        case .success(let fd):
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            return (TCPSocket(descriptor: fd), IPv4Endpoint(peer))
        // The peer gave up while queued: nothing to accept this time.
        case .failure(.resourceTemporarilyUnavailable), .failure(.connectionAbort), .failure(.protocolError): return nil
        case .failure(let code): throw SystemError("accept", code)
        }
    }

    /// Connects to `endpoint`, waiting until `deadline` (`MonotonicClock.seconds()`), or until
    /// `cancel` (a descriptor, e.g. a `StopSignal`'s bell) is readable.
    public static func connect(to endpoint: IPv4Endpoint, deadline: Double, cancel: Int32? = nil) throws(SystemError) -> TCPSocket {
        let fd = try make()
        let s = TCPSocket(descriptor: fd)
        var a = endpoint.socketAddress
        let rc = withUnsafePointer(to: &a) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        if rc < 0 {
            let code = SystemError.currentErrno
            guard code == .nowInProgress || code == .interrupted else { throw SystemError("connect \(endpoint)", code) }
            try s.waitUntil(writable: true, deadline: deadline, cancel: cancel, "connect \(endpoint)")
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
            if error != 0 { throw SystemError("connect \(endpoint)", Errno(rawValue: error)) }
        }
        return s
    }

    public func send(_ bytes: UnsafeRawBufferPointer) -> IOResult { StreamIO.send(descriptor, bytes) }

    /// Receives up to `buffer.count` bytes.
    public func receive(into buffer: UnsafeMutableRawBufferPointer) -> IOResult { StreamIO.receive(descriptor, into: buffer) }

    // MARK: A client's whole exchange, bounded by a deadline

    /// Sends all of `bytes` by `deadline` (or until `cancel` is readable).
    public func sendAll(_ bytes: [UInt8], deadline: Double, cancel: Int32? = nil) throws(SystemError) {
        var sent = 0
        while sent < bytes.count {
            let r = bytes.withUnsafeBytes { send(UnsafeRawBufferPointer(rebasing: $0[sent...])) }
            switch r {
            case .done(let n): sent += n
            case .wouldBlock: try waitUntil(writable: true, deadline: deadline, cancel: cancel, "send")
            case .endOfStream: throw SystemError("send", .brokenPipe)
            case .failed(let code): throw SystemError("send", code)
            }
        }
    }

    /// Receives until the peer ends the stream or `limit` bytes came (then one more byte is
    /// asked for, so that a longer answer shows as `limit + 1` bytes), by `deadline` (or until
    /// `cancel` is readable).
    public func receiveAll(limit: Int, deadline: Double, cancel: Int32? = nil) throws(SystemError) -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16_384)
        while bytes.count <= limit {
            let want = min(chunk.count, limit + 1 - bytes.count)
            switch chunk.withUnsafeMutableBytes({ receive(into: UnsafeMutableRawBufferPointer(rebasing: $0[..<want])) }) {
            case .done(let n): bytes += chunk[..<n]
            case .wouldBlock: try waitUntil(writable: false, deadline: deadline, cancel: cancel, "receive")
            case .endOfStream: return bytes
            case .failed(let code): throw SystemError("receive", code)
            }
        }
        return bytes
    }

    /// No more will be sent: the peer reads the end of the stream.
    public func shutdownWrite() { _ = shutdown(descriptor, Int32(SHUT_WR)) }

    private func waitUntil(writable: Bool, deadline: Double, cancel: Int32?, _ operation: String) throws(SystemError) {
        while true {
            let left = deadline - MonotonicClock.seconds()
            guard left > 0 else { throw SystemError(operation, .timedOut) }
            var poller = Poller(capacity: 2)
            poller.add(descriptor, read: !writable, write: writable)
            if let cancel { poller.add(cancel, read: true) }
            try poller.wait(seconds: min(left, 60))
            if cancel != nil, poller.events(at: 1).readable { throw SystemError(operation, .canceled) }
            if poller.events(at: 0).any { return }
        }
    }
}
