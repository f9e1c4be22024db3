#if canImport(Glibc)
import Glibc
#endif

/// A non-blocking IPv4 UDP socket bound to a loopback endpoint (thin wrapper, owned by one thread at a time).
struct UDPSocket {
    let fd: Int32
    let local: LoopbackEndpoint

    init(bindingTo endpoint: LoopbackEndpoint) throws(RelayError) {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw RelayError.system(call: "socket", errno: errno) }
        // Large buffers: a test may fire hundreds of datagrams in one go; the kernel must not drop them before we do.
        var size: Int32 = 4 << 20
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        var address = endpoint.socketAddress
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else {
            let e = errno
            _ = Glibc.close(fd)
            throw RelayError.system(call: "bind \(endpoint)", errno: e)
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        self.fd = fd
        local = LoopbackEndpoint(unchecked: actual)
    }

    /// Next datagram and its source, or nil when none is waiting.
    func receive(into buffer: inout [UInt8]) -> (count: Int, from: sockaddr_in)? {
        var source = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        while true {
            let n = buffer.withUnsafeMutableBytes { bytes in
                withUnsafeMutablePointer(to: &source) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        recvfrom(fd, bytes.baseAddress, bytes.count, 0, $0, &length)
                    }
                }
            }
            if n >= 0 { return (n, source) }
            // ECONNREFUSED: an earlier send hit a closed port; harmless for a relay, keep reading.
            if errno == EINTR || errno == ECONNREFUSED { continue }
            return nil
        }
    }

    /// True when the whole datagram was handed to the kernel.
    func send(_ payload: [UInt8], to destination: sockaddr_in) -> Bool {
        var address = destination
        let n = payload.withUnsafeBytes { bytes in
            withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, bytes.baseAddress, bytes.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
        return n == payload.count
    }

    func close() { _ = Glibc.close(fd) }
}

/// CLOCK_MONOTONIC in nanoseconds: the time base of the relay's impairment models.
func monotonicNanoseconds() -> UInt64 {
    var t = timespec()
    clock_gettime(CLOCK_MONOTONIC, &t)
    return UInt64(t.tv_sec) * 1_000_000_000 + UInt64(t.tv_nsec)
}
