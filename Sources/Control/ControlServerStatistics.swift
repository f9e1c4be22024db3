/// Counters of one control server, for the daemon's statistics log and for tests.
public struct ControlServerStatistics: Sendable, Equatable {
    /// Connected now.
    public var clients = 0
    public var subscribers = 0
    /// Since start.
    public var accepted = 0
    /// Turned away because `maxClients` were connected.
    public var refused = 0
    /// Disconnected by the server: a line too long, not reading, idle, or a socket error.
    public var dropped = 0
    public var requests = 0
    /// Events taken from the queue and sent to the subscribers.
    public var eventsDelivered = 0
    /// Events that found the queue full.
    public var eventsLost = 0
    /// Published, not yet taken by the server thread.
    public var eventsPending = 0
    public init() {}
}
