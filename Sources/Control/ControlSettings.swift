/// Every bound of the control socket in one place; the defaults suit one terminal's staff and tools.
public struct ControlSettings: Sendable, Equatable {
    /// The path intercomd listens on and intercomctl connects to unless told otherwise.
    public static let defaultSocketPath = "/run/intercomd/control.sock"

    public var socketPath: String = ControlSettings.defaultSocketPath
    /// Permissions of the socket file (connecting needs write permission on it).
    public var mode: UInt32 = 0o660
    /// Group owning the socket file (name or number); nil keeps the daemon's group.
    public var group: String? = nil
    /// Connected clients at once; one more gets an error line and is closed.
    public var maxClients: Int = 32
    /// A request line longer than this gets an error response and the client is disconnected.
    public var maxLineBytes: Int = 64 * 1024
    /// Responses and events waiting for a client that does not read; beyond it the client is dropped.
    public var maxQueuedOutputBytes: Int = 256 * 1024
    /// Events published but not yet handed to subscribers; beyond it new events are counted as lost.
    public var maxPendingEvents: Int = 4096
    /// A client that sends nothing for this long is closed, unless it subscribed (0: never).
    public var idleTimeout: Double = 300
    /// A client whose queued output does not move for this long is dropped (a dead reader).
    public var stalledOutputTimeout: Double = 10
    /// Bytes read from one client per wake-up, so one flooding client cannot starve the others.
    public var readChunkBytes: Int = 16 * 1024
    /// Pending connections the kernel holds before accept.
    public var backlog: Int32 = 64

    public init(socketPath: String = ControlSettings.defaultSocketPath) {
        self.socketPath = socketPath
    }
}
