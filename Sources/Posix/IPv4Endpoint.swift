import Glibc

/// An IPv4 address (host byte order) and a UDP port: the one address type of the project, used by
/// the configuration, the call engine, the sockets and the test tools alike.
public struct IPv4Endpoint: Hashable, Sendable, Codable, CustomStringConvertible {
    /// Host byte order: 0x7F000001 is 127.0.0.1.
    public let address: UInt32
    /// 0 asks the kernel for a port when binding.
    public let port: UInt16

    public init(address: UInt32, port: UInt16) {
        self.address = address
        self.port = port
    }

    /// Parses "a.b.c.d:port" (`parse`), or nil.
    public init?(_ text: String) {
        guard let e = try? Self.parse(text) else { return nil }
        self = e
    }

    /// Parses "a.b.c.d:port" strictly: four decimal numbers 0...255 and a port 0...65535, digits
    /// only, no leading zeros (inet_aton would read "010" as octal 8), no spaces, nothing more.
    public static func parse(_ text: String) throws(IPv4ParseError) -> IPv4Endpoint {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2 else {
            throw IPv4ParseError(text, parts.count == 1 ? "has no port (a.b.c.d:port)" : "has more than one ':' (a.b.c.d:port)")
        }
        let address = try parseAddress(parts[0], whole: text)
        guard let port = decimal(parts[1]), port <= 65535 else {
            throw IPv4ParseError(text, "port \"\(parts[1])\" is not a number 0...65535")
        }
        return IPv4Endpoint(address: address, port: UInt16(port))
    }

    /// Parses a dotted address "a.b.c.d" as strictly as `parse` does.
    public static func parseAddress(_ text: String) throws(IPv4ParseError) -> UInt32 {
        try parseAddress(Substring(text), whole: text)
    }

    private static func parseAddress(_ text: Substring, whole: String) throws(IPv4ParseError) -> UInt32 {
        let octets = text.split(separator: ".", omittingEmptySubsequences: false)
        guard octets.count == 4 else {
            throw IPv4ParseError(whole, "an IPv4 address has four numbers (a.b.c.d), not \(octets.count)")
        }
        var address: UInt32 = 0
        for octet in octets {
            guard let value = decimal(octet), value <= 255 else {
                throw IPv4ParseError(whole, "\"\(octet)\" is not a number 0...255")
            }
            address = address << 8 | UInt32(value)
        }
        return address
    }

    /// Digits only, 1 to 5 of them, no leading zero but for "0" itself.
    private static func decimal(_ text: Substring) -> Int? {
        let digits = text.utf8
        guard (1...5).contains(digits.count), digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
              digits.count == 1 || digits.first != 0x30 else { return nil }
        return digits.reduce(0) { $0 * 10 + Int($1 - 0x30) }
    }

    public static func loopback(port: UInt16) -> IPv4Endpoint { IPv4Endpoint(address: 0x7F00_0001, port: port) }

    /// 224.0.0.0/4.
    public var isMulticast: Bool { address >> 28 == 0xE }
    /// 127.0.0.0/8.
    public var isLoopback: Bool { address >> 24 == 127 }

    /// The same host with another port.
    public func with(port: UInt16) -> IPv4Endpoint { IPv4Endpoint(address: address, port: port) }

    /// "a.b.c.d" without the port.
    public var host: String { Self.dotted(address) }

    public var description: String { "\(host):\(port)" }

    public static func dotted(_ a: UInt32) -> String { "\(a >> 24).\(a >> 16 & 255).\(a >> 8 & 255).\(a & 255)" }

    public var socketAddress: sockaddr_in {
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_port = port.bigEndian
        a.sin_addr = in_addr(s_addr: address.bigEndian)
        return a
    }

    public init(_ a: sockaddr_in) {
        address = UInt32(bigEndian: a.sin_addr.s_addr)
        port = UInt16(bigEndian: a.sin_port)
    }
}

/// Why a text is not an IPv4 address (and port); `problem` names what is wrong.
public struct IPv4ParseError: Error, Equatable, Sendable, CustomStringConvertible {
    public let text: String
    public let problem: String
    init(_ text: String, _ problem: String) {
        self.text = text
        self.problem = problem
    }
    public var description: String { "\"\(text)\": \(problem)" }
}
