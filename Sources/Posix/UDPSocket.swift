import Glibc

/// A non-blocking IPv4 UDP socket: the only socket type for datagrams (media, signalling, the
/// test relay). `send` and `receive` allocate nothing: the network threads call them per packet.
public final class UDPSocket: Sendable {
    public let descriptor: Int32
    public let local: IPv4Endpoint

    /// Binds to `endpoint` (port 0: the kernel picks one). `reuse` lets several receivers share a
    /// multicast port; `bufferBytes` sets both kernel buffers (a test relay takes bursts).
    public init(bind endpoint: IPv4Endpoint, reuse: Bool = false, bufferBytes: Int32? = nil) throws(SystemError) {
        let fd = try systemCall("socket") {
            socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        }
        do throws(SystemError) {
            if reuse { try Self.option(fd, SOL_SOCKET, SO_REUSEADDR, 1, "SO_REUSEADDR") }
            if let bufferBytes {
                try Self.option(fd, SOL_SOCKET, SO_RCVBUF, bufferBytes, "SO_RCVBUF")
                try Self.option(fd, SOL_SOCKET, SO_SNDBUF, bufferBytes, "SO_SNDBUF")
            }
            var a = endpoint.socketAddress
            try systemCall("bind \(endpoint)") {
                withUnsafePointer(to: &a) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
                }
            }
            var bound = sockaddr_in()
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            try systemCall("getsockname") {
                withUnsafeMutablePointer(to: &bound) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
                }
            }
            descriptor = fd
            local = IPv4Endpoint(bound)
        } catch {
            close(fd)
            throw error
        }
    }

    deinit { close(descriptor) }

    /// Marks outgoing packets with a DiffServ code point (46 = EF, expedited forwarding, for voice).
    public func setDSCP(_ dscp: UInt8) throws(SystemError) {
        try Self.option(descriptor, Int32(IPPROTO_IP), IP_TOS, Int32(dscp) << 2, "IP_TOS dscp \(dscp)")
    }

    /// Current DSCP of outgoing packets.
    public var dscp: UInt8 {
        var v: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        getsockopt(descriptor, Int32(IPPROTO_IP), IP_TOS, &v, &length)
        return UInt8(truncatingIfNeeded: v >> 2)
    }

    /// Sends multicast through `interface` with the given TTL; `loopback` lets this host's own
    /// sockets receive it (off on terminals: a room must not hear itself).
    public func configureMulticastSending(interface: UInt32, ttl: UInt8, loopback: Bool) throws(SystemError) {
        var ifAddress = in_addr(s_addr: interface.bigEndian)
        try systemCall("IP_MULTICAST_IF") {
            setsockopt(descriptor, Int32(IPPROTO_IP), IP_MULTICAST_IF, &ifAddress, socklen_t(MemoryLayout<in_addr>.size))
        }
        try Self.option(descriptor, Int32(IPPROTO_IP), IP_MULTICAST_TTL, Int32(ttl), "IP_MULTICAST_TTL \(ttl)")
        try Self.option(descriptor, Int32(IPPROTO_IP), IP_MULTICAST_LOOP, loopback ? 1 : 0, "IP_MULTICAST_LOOP")
    }

    /// Receives the multicast `group` on the interface with address `interface`.
    public func joinMulticast(group: UInt32, interface: UInt32) throws(SystemError) {
        if case .failure(let code) = setMembership(true, group: group, interface: interface) {
            throw SystemError("join multicast group \(IPv4Endpoint.dotted(group))", code)
        }
    }

    /// Joins (`join`) or leaves the multicast `group` on `interface` (EADDRINUSE: already a
    /// member). Allocates nothing, unlike `joinMulticast`'s error.
    public func setMembership(_ join: Bool, group: UInt32, interface: UInt32) -> Result<Void, Errno> {
        var request = ip_mreq(imr_multiaddr: in_addr(s_addr: group.bigEndian), imr_interface: in_addr(s_addr: interface.bigEndian))
        return retryingInterrupts {
            setsockopt(descriptor, Int32(IPPROTO_IP), join ? IP_ADD_MEMBERSHIP : IP_DROP_MEMBERSHIP, &request,
                       socklen_t(MemoryLayout<ip_mreq>.size))
        }.map { _ in () }
    }

    /// The interface multicast is sent through (`configureMulticastSending`); 0 (any) if not set.
    public var multicastInterface: UInt32 {
        var a = in_addr()
        var length = socklen_t(MemoryLayout<in_addr>.size)
        guard getsockopt(descriptor, Int32(IPPROTO_IP), IP_MULTICAST_IF, &a, &length) == 0 else { return 0 }
        return UInt32(bigEndian: a.s_addr)
    }

    /// Sends one datagram; the bytes sent, or the errno (EAGAIN when the socket buffer is full).
    @inline(__always)
    public func send(_ bytes: UnsafeRawBufferPointer, to endpoint: IPv4Endpoint) -> Result<Int, Errno> {
        var a = endpoint.socketAddress
        return retryingInterrupts {
            withUnsafePointer(to: &a) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(descriptor, bytes.baseAddress, bytes.count, Int32(MSG_DONTWAIT), $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
    }

    /// Receives one datagram if one is waiting: its length and sender, or nil (nothing waiting,
    /// or an error). A refused earlier send (ECONNREFUSED, an ICMP answer to a closed port) is
    /// passed over: the next datagram may be waiting behind it.
    @inline(__always)
    public func receive(into buffer: UnsafeMutableRawBufferPointer) -> (count: Int, from: IPv4Endpoint)? {
        var a = sockaddr_in()
        while true {
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let result = retryingInterrupts {
                withUnsafeMutablePointer(to: &a) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        recvfrom(descriptor, buffer.baseAddress, buffer.count, Int32(MSG_DONTWAIT), $0, &length)
                    }
                }
            }
            switch result {
            case .success(let n): return (n, IPv4Endpoint(a))
            case .failure(.connectionRefused): continue
            case .failure: return nil
            }
        }
    }

    /// Waits up to `milliseconds` for a datagram; true if one is waiting.
    public func waitReadable(milliseconds: Int32) -> Bool {
        Poller.waitReadable(descriptor, timeoutMs: milliseconds)
    }

    private static func option(_ fd: Int32, _ level: Int32, _ name: Int32, _ value: Int32, _ what: String) throws(SystemError) {
        var v = value
        try systemCall(what) { setsockopt(fd, level, name, &v, socklen_t(MemoryLayout<Int32>.size)) }
    }
}
