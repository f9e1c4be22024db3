import Calls
import Control

/// The site's history on the page: every terminal's own, asked at once (each reply sealed for the
/// service: `OrderReplySeal`), made one. Each call once, as its caller's terminal recorded it (with
/// every callee's outcome), or as a callee's did when the caller's did not answer; each
/// notification once, from its sender's terminal likewise; the newest first.
public struct SiteHistory: Codable, Sendable, Equatable {
    public struct Call: Codable, Sendable, Equatable {
        /// The room whose terminal recorded it.
        public var room: String
        public var entry: HistoryEntry
    }
    public struct Notification: Codable, Sendable, Equatable {
        public var room: String
        public var record: NotificationRecord
    }
    public struct Unanswered: Codable, Sendable, Equatable {
        public var room: String
        public var detail: String
    }

    public var calls: [Call]
    public var notifications: [Notification]
    /// Rooms whose terminal gave no history, and why: their part may be missing.
    public var unanswered: [Unanswered]

    /// What each room's terminal answered (`.history`), made one and cut to the newest `limit` of each.
    init(answers: [(room: String, outcome: Result<ControlReply, Unanswered>)], limit: Int) {
        var calls: [CallID: Call] = [:], notifications: [NotificationID: Notification] = [:]
        var unanswered: [Unanswered] = []
        for (room, outcome) in answers {
            switch outcome {
            case .failure(let why): unanswered.append(why)
            case .success(.history(let entries, let records)):
                for e in entries where calls[e.callID] == nil || (e.direction == .outgoing && calls[e.callID]?.entry.direction != .outgoing) {
                    calls[e.callID] = Call(room: room, entry: e)
                }
                for r in records {
                    let id = r.notification.id
                    if notifications[id] == nil || (r.direction == .outgoing && notifications[id]?.record.direction != .outgoing) {
                        notifications[id] = Notification(room: room, record: r)
                    }
                }
            case .success(let other): unanswered.append(Unanswered(room: room, detail: "answered \(other)"))
            }
        }
        self.calls = Array(calls.values.sorted { $0.entry.started > $1.entry.started }.prefix(limit))
        self.notifications = Array(notifications.values.sorted { $0.record.notification.sent > $1.record.notification.sent }.prefix(limit))
        self.unanswered = unanswered
    }
}

extension SiteHistory.Unanswered: Error {}
