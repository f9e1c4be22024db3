// An IPv4 address and port as the call engine names them: plain value, no sockets. The media
// side (Transport.UDPEndpoint) has the same two fields, so the integrator converts field by field.

/// An IPv4 address (host byte order) and a UDP port.
public struct IPv4Endpoint: Hashable, Sendable, Codable, CustomStringConvertible {
    public var address: UInt32
    public var port: UInt16

    public init(address: UInt32, port: UInt16) {
        self.address = address
        self.port = port
    }

    /// Parses "a.b.c.d:port".
    public init?(_ text: String) {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, let port = UInt16(parts[1]) else { return nil }
        let octets = parts[0].split(separator: ".", omittingEmptySubsequences: false)
        guard octets.count == 4 else { return nil }
        var address: UInt32 = 0
        for octet in octets {
            guard let value = UInt8(octet) else { return nil }
            address = address << 8 | UInt32(value)
        }
        self.init(address: address, port: port)
    }

    /// 224.0.0.0/4.
    public var isMulticast: Bool { address >> 28 == 0xE }

    /// The same host with another port.
    public func with(port: UInt16) -> IPv4Endpoint { IPv4Endpoint(address: address, port: port) }

    public var description: String {
        "\(address >> 24).\(address >> 16 & 255).\(address >> 8 & 255).\(address & 255):\(port)"
    }
}
