import Posix

extension IPv4Endpoint {
    /// Parses "127.x.y.z:port" for the relay, which refuses every address off this machine.
    public static func loopbackOnly(parsing text: String) throws(RelayError) -> IPv4Endpoint {
        let endpoint: IPv4Endpoint
        do {
            endpoint = try parse(text)
        } catch {
            // Host names (even "localhost") and IPv6 are refused rather than resolved: no chance of leaving the machine.
            let parts = text.split(separator: ":", omittingEmptySubsequences: false)
            let hasPort = parts.count >= 2 && UInt16(parts.last!) != nil
            throw hasPort && (try? parseAddress(String(parts[0]))) == nil ? .notLoopback(text) : .malformedEndpoint(text)
        }
        return try endpoint.requireLoopback()
    }

    /// Itself, or `RelayError.notLoopback` outside 127.0.0.0/8.
    public func requireLoopback() throws(RelayError) -> IPv4Endpoint {
        guard isLoopback else { throw .notLoopback(description) }
        return self
    }
}

/// Why a relay could not be set up.
public enum RelayError: Error, Equatable, CustomStringConvertible {
    /// The address is not IPv4 loopback (127.0.0.0/8); only loopback may be used.
    case notLoopback(String)
    /// Not of the form "127.0.0.1:port".
    case malformedEndpoint(String)
    /// A system call failed.
    case system(SystemError)
    /// `start()` was called on a relay that is running or has been stopped.
    case notRestartable

    public var description: String {
        switch self {
        case .notLoopback(let s): "\(s): only IPv4 loopback addresses (127.0.0.0/8) are accepted"
        case .malformedEndpoint(let s): "\(s): expected an address of the form 127.0.0.1:port"
        case .system(let e): e.description
        case .notRestartable: "a relay can be started only once"
        }
    }
}
