/// A connected control client: a number for the log and the peer's credentials.
public struct ControlClientInfo: Sendable, Equatable, CustomStringConvertible {
    /// Counts up from 1 for each accepted connection of one server.
    public let number: Int
    /// nil only if the kernel did not report them (it always does for Unix stream sockets).
    public let credentials: PeerCredentials?
    public var description: String { "control client \(number) (\(credentials.map(String.init(describing:)) ?? "credentials unknown"))" }
}

/// What the daemon implements to serve control requests. Every method is called on the control
/// server's thread, one call at a time, and must return quickly (hand work to the call engine,
/// never wait for the network or the audio): while it runs, no other client is served.
public protocol ControlHandler: AnyObject, Sendable {
    /// Carries out a command. `client.credentials` is the hook for permission checks (e.g. only a
    /// technicians' group may run some commands): refuse with `.notPermitted`.
    func handle(_ command: ControlCommand, from client: ControlClientInfo) -> Result<ControlReply, ControlFailure>

    /// Whether `client` may subscribe to events; nil allows it. Default: everyone may.
    func subscriptionRefusal(for client: ControlClientInfo) -> ControlFailure?

    /// A client connected (for the log). Default: nothing.
    func clientConnected(_ client: ControlClientInfo)

    /// A client went away or was dropped; `reason` says why (for the log). Default: nothing.
    func clientDisconnected(_ client: ControlClientInfo, reason: String)

    /// The server hit a system error it works around or stops on (poll, accept). Default: nothing.
    func serverError(_ message: String)
}

extension ControlHandler {
    public func subscriptionRefusal(for client: ControlClientInfo) -> ControlFailure? { nil }
    public func clientConnected(_ client: ControlClientInfo) {}
    public func clientDisconnected(_ client: ControlClientInfo, reason: String) {}
    public func serverError(_ message: String) {}
}
