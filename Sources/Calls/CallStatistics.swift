// Counters for the log and the status request: every dropped datagram or message is counted here.

public struct CallStatistics: Sendable, Equatable {
    /// Datagrams the decoder rejected, by reason.
    public var decodeErrors: [SignalDecodeError: Int] = [:]
    /// Sender not in the directory (or this room itself).
    public var unknownSender = 0
    /// Sender's room id does not match the source address the directory gives it.
    public var addressMismatch = 0
    /// Copies of messages already handled (acked again, otherwise ignored).
    public var duplicates = 0
    /// Messages about calls that are over or not ours, or older than what we already know.
    public var stale = 0
    public var retransmissions = 0
    /// Messages given up after `giveUpAfter` without an ack.
    public var unreachable = 0
    /// Missed-call notices dropped because too many were pending.
    public var noticesDropped = 0
    /// Calls this room left or ended because an emergency call came in.
    public var callsBrokenByEmergency = 0

    public var decodeErrorCount: Int { decodeErrors.values.reduce(0, +) }
}
