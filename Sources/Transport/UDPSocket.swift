import Glibc

// The only file that makes socket calls for media. IPv4 only for now (the installations' LANs).

public struct SocketError: Error, CustomStringConvertible, Equatable {
    public let operation: String
    public let code: Int32
    /// The system's text for `code` (strerror).
    public let message: String

    init(_ operation: String, _ code: Int32 = errno) {
        self.operation = operation
        self.code = code
        message = String(cString: strerror(code))
    }

    public var description: String { "udp: \(operation) failed: \(message) (\(code))" }
}

/// An IPv4 address and port.
public struct UDPEndpoint: Sendable, Hashable, CustomStringConvertible {
    /// Address in host byte order, e.g. 0x7F000001 for 127.0.0.1.
    public let address: UInt32
    public let port: UInt16

    public init(address: UInt32, port: UInt16) {
        self.address = address
        self.port = port
    }

    /// Parses "a.b.c.d:port".
    public init?(_ text: String) {
        let parts = text.split(separator: ":")
        guard parts.count == 2, let port = UInt16(parts[1]) else { return nil }
        let octets = parts[0].split(separator: ".", omittingEmptySubsequences: false).compactMap { UInt8($0) }
        guard octets.count == 4 else { return nil }
        address = octets.reduce(0) { $0 << 8 | UInt32($1) }
        self.port = port
    }

    public static func loopback(port: UInt16) -> UDPEndpoint { UDPEndpoint(address: 0x7F00_0001, port: port) }

    public var isMulticast: Bool { address >> 28 == 0xE }

    public var description: String {
        "\(address >> 24).\(address >> 16 & 255).\(address >> 8 & 255).\(address & 255):\(port)"
    }

    var sockaddr: sockaddr_in {
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_port = port.bigEndian
        a.sin_addr = in_addr(s_addr: address.bigEndian)
        return a
    }

    init(_ a: sockaddr_in) {
        address = UInt32(bigEndian: a.sin_addr.s_addr)
        port = UInt16(bigEndian: a.sin_port)
    }
}

/// A non-blocking UDP socket. `send` and `receive` do not allocate: the network threads call them per packet.
public final class UDPSocket: @unchecked Sendable {
    // @unchecked: the descriptor is immutable; the kernel serialises concurrent calls.
    public let descriptor: Int32
    public let local: UDPEndpoint

    /// Binds to `endpoint` (port 0: the kernel picks one). `reuse` lets several receivers share a
    /// multicast port.
    public init(bind endpoint: UDPEndpoint, reuse: Bool = false) throws {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SocketError("socket") }
        descriptor = fd
        do {
            if reuse { try Self.option(fd, SOL_SOCKET, SO_REUSEADDR, Int32(1), "SO_REUSEADDR") }
            var a = endpoint.sockaddr
            let rc = withUnsafePointer(to: &a) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard rc == 0 else { throw SocketError("bind \(endpoint)") }
            var bound = sockaddr_in()
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            _ = withUnsafeMutablePointer(to: &bound) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
            }
            local = UDPEndpoint(bound)
        } catch {
            close(fd)
            throw error
        }
    }

    deinit { close(descriptor) }

    /// Marks outgoing packets with a DiffServ code point (46 = EF, expedited forwarding, for voice).
    public func setDSCP(_ dscp: UInt8) throws {
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
    public func configureMulticastSending(interface: UInt32, ttl: UInt8, loopback: Bool) throws {
        var ifAddress = in_addr(s_addr: interface.bigEndian)
        guard setsockopt(descriptor, Int32(IPPROTO_IP), IP_MULTICAST_IF, &ifAddress, socklen_t(MemoryLayout<in_addr>.size)) == 0 else {
            throw SocketError("IP_MULTICAST_IF")
        }
        try Self.option(descriptor, Int32(IPPROTO_IP), IP_MULTICAST_TTL, Int32(ttl), "IP_MULTICAST_TTL \(ttl)")
        try Self.option(descriptor, Int32(IPPROTO_IP), IP_MULTICAST_LOOP, loopback ? 1 : 0, "IP_MULTICAST_LOOP")
    }

    /// Receives the multicast `group` on the interface with address `interface`.
    public func joinMulticast(group: UInt32, interface: UInt32) throws {
        let code = membership(IP_ADD_MEMBERSHIP, group: group, interface: interface)
        guard code == 0 else {
            throw SocketError("join multicast group \(UDPEndpoint(address: group, port: 0).description.dropLast(2))", code)
        }
    }

    /// Joins (`join`) or leaves the multicast `group` on `interface`; returns 0 or the errno
    /// (EADDRINUSE: already a member). Allocates nothing, unlike `joinMulticast`'s error.
    public func setMembership(_ join: Bool, group: UInt32, interface: UInt32) -> Int32 {
        membership(join ? IP_ADD_MEMBERSHIP : IP_DROP_MEMBERSHIP, group: group, interface: interface)
    }

    private func membership(_ option: Int32, group: UInt32, interface: UInt32) -> Int32 {
        var request = ip_mreq(imr_multiaddr: in_addr(s_addr: group.bigEndian), imr_interface: in_addr(s_addr: interface.bigEndian))
        return setsockopt(descriptor, Int32(IPPROTO_IP), option, &request, socklen_t(MemoryLayout<ip_mreq>.size)) == 0 ? 0 : errno
    }

    /// The interface multicast is sent through (`configureMulticastSending`); 0 (any) if not set.
    public var multicastInterface: UInt32 {
        var a = in_addr()
        var length = socklen_t(MemoryLayout<in_addr>.size)
        guard getsockopt(descriptor, Int32(IPPROTO_IP), IP_MULTICAST_IF, &a, &length) == 0 else { return 0 }
        return UInt32(bigEndian: a.s_addr)
    }

    /// Sends one datagram; returns bytes sent or a negative errno (-EAGAIN when the socket buffer is full).
    @inline(__always)
    public func send(_ bytes: UnsafeRawBufferPointer, to endpoint: UDPEndpoint) -> Int {
        var a = endpoint.sockaddr
        let n = withUnsafePointer(to: &a) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                sendto(descriptor, bytes.baseAddress, bytes.count, Int32(MSG_DONTWAIT), $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        return n < 0 ? -Int(errno) : n
    }

    /// Receives one datagram if one is waiting: its length and sender, or nil (nothing waiting or an error).
    @inline(__always)
    public func receive(into buffer: UnsafeMutableRawBufferPointer) -> (count: Int, from: UDPEndpoint)? {
        var a = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let n = withUnsafeMutablePointer(to: &a) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                recvfrom(descriptor, buffer.baseAddress, buffer.count, Int32(MSG_DONTWAIT), $0, &length)
            }
        }
        return n < 0 ? nil : (n, UDPEndpoint(a))
    }

    /// Waits up to `milliseconds` for a datagram; true if one is waiting.
    public func waitReadable(milliseconds: Int32) -> Bool {
        var p = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        return poll(&p, 1, milliseconds) > 0
    }

    private static func option(_ fd: Int32, _ level: Int32, _ name: Int32, _ value: Int32, _ what: String) throws {
        var v = value
        guard setsockopt(fd, level, name, &v, socklen_t(MemoryLayout<Int32>.size)) == 0 else { throw SocketError(what) }
    }
}
