/// Counters of a `UDPRelay`, per direction and for the relay itself.
///
/// Accounting per direction, once the relay is stopped:
/// `model.sent == delivered + queueOverflow + sendErrors + discardedAtStop`
/// (see `ImpairmentCounters` for how `model.sent` relates to `model.received`).
public struct RelayStatistics: Sendable, Equatable, CustomStringConvertible {
    /// Per-direction relay counters next to the model's decisions.
    public struct Direction: Sendable, Equatable, CustomStringConvertible {
        /// Decisions of this direction's impairment model.
        public var model = ImpairmentCounters()
        /// Datagrams actually written to the socket.
        public var delivered: UInt64 = 0
        /// Scheduled copies dropped because the pending queue was full.
        public var queueOverflow: UInt64 = 0
        /// Scheduled copies whose sendto() failed (e.g. nobody listening: ECONNREFUSED).
        public var sendErrors: UInt64 = 0
        /// Scheduled copies still pending when the relay stopped.
        public var discardedAtStop: UInt64 = 0

        /// All counters zero.
        public init() {}

        /// True when `model.sent == delivered + queueOverflow + sendErrors + discardedAtStop`; holds after `stop()`.
        public var isBalanced: Bool {
            model.isBalanced && model.sent == delivered + queueOverflow + sendErrors + discardedAtStop
        }

        public var description: String {
            "\(model); delivered \(delivered), queue overflow \(queueOverflow), "
                + "send errors \(sendErrors), discarded at stop \(discardedAtStop)"
        }
    }

    /// Client → target.
    public var forward = Direction()
    /// Target → last client.
    public var reverse = Direction()
    /// Datagrams on the target-side socket from anyone but the target, or before any client spoke: ignored.
    public var ignored: UInt64 = 0

    /// All counters zero.
    public init() {}

    public var description: String {
        "forward: \(forward)\nreverse: \(reverse)\nignored: \(ignored)"
    }
}
