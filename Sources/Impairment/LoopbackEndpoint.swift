#if canImport(Glibc)
import Glibc
#endif

/// An IPv4 loopback address (127.0.0.0/8) and UDP port; the relay refuses anything else.
public struct LoopbackEndpoint: Sendable, Hashable, CustomStringConvertible {
    /// The IPv4 address in host byte order; its first octet is always 127.
    public let address: UInt32
    /// UDP port; 0 asks the kernel for an ephemeral port when binding.
    public let port: UInt16

    /// 127.0.0.1 and the given port.
    public init(port: UInt16) {
        address = 0x7F00_0001
        self.port = port
    }

    /// Parses "127.x.y.z:port"; throws `RelayError.notLoopback` or `.malformedEndpoint`.
    public init(parsing text: String) throws(RelayError) {
        guard let colon = text.lastIndex(of: ":") else { throw RelayError.malformedEndpoint(text) }
        let host = String(text[..<colon])
        guard let port = UInt16(text[text.index(after: colon)...]) else { throw RelayError.malformedEndpoint(text) }
        var raw = in_addr()
        guard inet_pton(AF_INET, host, &raw) == 1 else {
            // Host names (even "localhost") and IPv6 are refused rather than resolved: no chance of leaving the machine.
            throw RelayError.notLoopback(text)
        }
        try self.init(address: UInt32(bigEndian: raw.s_addr), port: port)
    }

    /// An endpoint from a host-order address; throws `RelayError.notLoopback` outside 127.0.0.0/8.
    public init(address: UInt32, port: UInt16) throws(RelayError) {
        guard address >> 24 == 127 else {
            throw RelayError.notLoopback("\(Self.dotted(address)):\(port)")
        }
        self.address = address
        self.port = port
    }

    public var description: String { "\(Self.dotted(address)):\(port)" }

    var socketAddress: sockaddr_in {
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_port = port.bigEndian
        a.sin_addr.s_addr = address.bigEndian
        return a
    }

    init(unchecked a: sockaddr_in) {
        address = UInt32(bigEndian: a.sin_addr.s_addr)
        port = UInt16(bigEndian: a.sin_port)
    }

    private static func dotted(_ a: UInt32) -> String {
        "\(a >> 24).\((a >> 16) & 0xFF).\((a >> 8) & 0xFF).\(a & 0xFF)"
    }
}

/// Why a relay could not be set up.
public enum RelayError: Error, Equatable, CustomStringConvertible {
    /// The address is not IPv4 loopback (127.0.0.0/8); only loopback may be used.
    case notLoopback(String)
    /// Not of the form "127.0.0.1:port".
    case malformedEndpoint(String)
    /// A socket call failed with this errno.
    case system(call: String, errno: Int32)
    /// `start()` was called on a relay that is running or has been stopped.
    case notRestartable

    public var description: String {
        switch self {
        case .notLoopback(let s): "\(s): only IPv4 loopback addresses (127.0.0.0/8) are accepted"
        case .malformedEndpoint(let s): "\(s): expected an address of the form 127.0.0.1:port"
        case .system(let call, let e): "\(call) failed: \(String(cString: strerror(e)))"
        case .notRestartable: "a relay can be started only once"
        }
    }
}
