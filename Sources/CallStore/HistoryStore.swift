import Calls
import Synchronization

/// The call and notification history, kept across restarts in one JSON file (mode 0640), bounded to the newest
/// `capacity` entries. Every change rewrites the file atomically, so a crash leaves the old or
/// the new history, never a mix. Safe to use from several threads; one store per file (opening
/// removes temporary files a crashed writer left, which would break a second live writer).
///
/// Memory and file have separate locks: `record` and the readers never wait for the disk, and
/// `persist` (the slow part, two fsyncs) can run on a thread of its own.
public final class HistoryStore: Sendable {
    public static let defaultCapacity = 500

    public let path: String
    public let capacity: Int
    /// Entries that ended longer ago than this (seconds) are dropped by `prune`; nil = kept by count only.
    public let maxAge: Double?
    /// Set when the file on disk was not valid: it was moved aside and the store started empty.
    public let loadProblem: StoreLoadProblem?
    private let entries: Mutex<Versioned<History>>
    private let file = StoreFileWriter()

    /// Loads `path` (a missing file is an empty history). Throws when the directory or the file
    /// cannot be used at all.
    public init(path: String, capacity: Int = defaultCapacity, maxAge: Double? = nil) throws(StoreError) {
        precondition(capacity > 0, "history capacity must be positive")
        precondition(maxAge.map { $0 > 0 } ?? true, "history age limit must be positive")
        self.path = path
        self.capacity = capacity
        self.maxAge = maxAge
        let (file, problem) = try StoreFile.load(HistoryFile.self, path: path)
        loadProblem = problem
        entries = Mutex(Versioned(History(calls: Array((file?.entries ?? []).suffix(capacity)),
                                          notifications: Array((file?.notifications ?? []).suffix(capacity)))))
    }

    /// Adds an entry (dropping the oldest beyond capacity) and writes the file. If the write
    /// fails the entry is still kept in memory and written with the next change.
    public func append(_ entry: HistoryEntry) throws(StoreError) {
        record(entry)
        try persist()
    }

    /// Adds an entry in memory only; `persist` writes it. Never touches the disk.
    public func record(_ entry: HistoryEntry) {
        entries.withLock { e in
            e.change { h in
                h.calls.append(entry)
                if h.calls.count > capacity { h.calls.removeFirst(h.calls.count - capacity) }
            }
        }
    }

    /// Adds a notification in memory, or replaces the one with its id and direction (its delivery
    /// or acknowledgement changed); `persist` writes it.
    public func record(_ notification: NotificationRecord) {
        entries.withLock { e in
            e.change { h in
                if let i = h.notifications.lastIndex(where: { $0.id == notification.id && $0.direction == notification.direction }) {
                    h.notifications[i] = notification
                } else {
                    h.notifications.append(notification)
                    if h.notifications.count > capacity { h.notifications.removeFirst(h.notifications.count - capacity) }
                }
            }
        }
    }

    /// Writes the newest history unless a newer or equal one is on disk already; returns at once
    /// when there is nothing new. Readers and `record` go on meanwhile.
    public func persist() throws(StoreError) {
        try file.write(entries.withLock { $0 }, path: path) { h throws(StoreError) in
            try StoreFile.encode(HistoryFile(entries: h.calls, notifications: h.notifications), path: path)
        }
    }

    /// Drops, in memory, the entries that ended more than `maxAge` before `now` (seconds since
    /// 1970); returns how many. `persist` writes the change.
    @discardableResult
    public func prune(now: Double) -> Int {
        guard let maxAge else { return 0 }
        return entries.withLock { e in
            // Not a prefix: a missed-call notice from a room that was offline may be older than
            // the entries before it.
            let stale = e.value.calls.filter { $0.ended < now - maxAge }.count
                + e.value.notifications.filter { $0.time < now - maxAge }.count
            guard stale > 0 else { return 0 }
            e.change { h in
                h.calls.removeAll { $0.ended < now - maxAge }
                h.notifications.removeAll { $0.time < now - maxAge }
            }
            return stale
        }
    }

    /// Marks these missed calls acknowledged, in memory; `persist` writes the change.
    public func acknowledge(_ ids: [CallID]) {
        entries.withLock { e in
            guard e.value.calls.contains(where: { ids.contains($0.callID) && $0.acknowledged == false }) else { return }
            e.change { h in
                for i in h.calls.indices where ids.contains(h.calls[i].callID) && h.calls[i].acknowledged == false {
                    h.calls[i].acknowledged = true
                }
            }
        }
    }

    /// Empties the history, in memory; `persist` writes the change.
    public func erase() {
        entries.withLock { e in e.change { $0 = History() } }
    }

    /// Calls, oldest first.
    public func all() -> [HistoryEntry] {
        entries.withLock { $0.value.calls }
    }

    /// Notifications sent and received, oldest first.
    public func notifications() -> [NotificationRecord] {
        entries.withLock { $0.value.notifications }
    }

    /// The newest `count` calls, newest first.
    public func newest(_ count: Int) -> [HistoryEntry] {
        entries.withLock { Array($0.value.calls.suffix(max(0, count)).reversed()) }
    }

    /// Incoming calls nobody here took (missed or declined, e.g. do-not-disturb) that were placed
    /// at or after `since` (seconds since 1970), newest first.
    public func missed(since: Double) -> [HistoryEntry] {
        entries.withLock { list in
            list.value.calls.reversed().filter {
                $0.direction == .incoming && ($0.outcome == .missed || $0.outcome == .declined) && $0.started >= since
            }
        }
    }
}

/// What the store holds: calls and notifications, each oldest first.
struct History: Equatable {
    var calls: [HistoryEntry] = []
    var notifications: [NotificationRecord] = []
}

/// The file's layout; `format` lets a later version change it knowingly. Format 2 keeps entries
/// and notifications in the control socket's form (`Wire`); format 1 (before 0.10) in Swift's
/// own spelling, still read (`HistoryFormat1`) and written as 2 with the next change.
struct HistoryFile: Codable {
    static let currentFormat = 2
    var format = currentFormat
    var entries: [HistoryEntry]
    var notifications: [NotificationRecord]

    init(entries: [HistoryEntry], notifications: [NotificationRecord]) {
        self.entries = entries
        self.notifications = notifications
    }

    init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        format = try c.decode(Int.self, forKey: .format)
        switch format {
        case 1:
            let old = try HistoryFormat1(from: decoder)
            entries = old.entries.map(\.entry)
            notifications = (old.notifications ?? []).map(\.record)
        case Self.currentFormat:
            entries = try c.decode([HistoryEntry].self, forKey: .entries)
            notifications = try c.decode([NotificationRecord].self, forKey: .notifications)
        default:
            throw DecodingError.dataCorruptedError(forKey: .format, in: c,
                                                   debugDescription: "format \(format), this version reads 1 and \(Self.currentFormat)")
        }
    }
}
