// Counters for the log and the status request: every dropped datagram or message is counted here.

public struct CallStatistics: Sendable, Equatable {
    /// Datagrams the decoder rejected, by reason.
    public var decodeErrors: [SignalDecodeError: Int] = [:]
    /// Sender not in the directory (or this room itself).
    public var unknownSender = 0
    /// Sender's room id does not match the source address the directory gives it.
    public var addressMismatch = 0
    /// Rooms heard at a new address under a seal of their own key, and followed there.
    public var addressChanges = 0
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
    /// Calls that ended here (counted when they end, as the history records them).
    public var callsEnded: [CallTally: Int] = [:]
    /// Notifications this room sent, received (once each) and acknowledged.
    public var notificationsSent = 0
    public var notificationsReceived = 0
    public var notificationsAcknowledged = 0
    /// Reminders sounded here: for missed calls, and for notifications (one per reminder tone,
    /// however many notifications it repeats).
    public var missedCallReminders = 0
    public var notificationReminders = 0

    public var decodeErrorCount: Int { decodeErrors.values.reduce(0, +) }
}

/// A kind of ended call, as the history records it: placed here (outgoing) or taken, and how it ended.
public struct CallTally: Sendable, Hashable {
    public var direction: HistoryEntry.Direction
    public var outcome: CallOutcome
    public init(_ direction: HistoryEntry.Direction, _ outcome: CallOutcome) {
        self.direction = direction
        self.outcome = outcome
    }
}
