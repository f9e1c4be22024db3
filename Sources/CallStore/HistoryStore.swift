import Calls
import Synchronization

/// The call history, kept across restarts in one JSON file (mode 0640), bounded to the newest
/// `capacity` entries. Every change rewrites the file atomically, so a crash leaves the old or
/// the new history, never a mix. Safe to use from several threads; one store per file (opening
/// removes temporary files a crashed writer left, which would break a second live writer).
public final class HistoryStore: Sendable {
    public static let defaultCapacity = 500

    public let path: String
    public let capacity: Int
    /// Set when the file on disk was not valid: it was moved aside and the store started empty.
    public let loadProblem: StoreLoadProblem?
    private let entries: Mutex<[HistoryEntry]>

    /// Loads `path` (a missing file is an empty history). Throws when the directory or the file
    /// cannot be used at all.
    public init(path: String, capacity: Int = defaultCapacity) throws(StoreError) {
        precondition(capacity > 0, "history capacity must be positive")
        self.path = path
        self.capacity = capacity
        let (file, problem) = try StoreFile.load(HistoryFile.self, path: path)
        loadProblem = problem
        entries = Mutex(Array((file?.entries ?? []).suffix(capacity)))
    }

    /// Adds an entry (dropping the oldest beyond capacity) and writes the file. If the write
    /// fails the entry is still kept in memory and written with the next change.
    public func append(_ entry: HistoryEntry) throws(StoreError) {
        try entries.withLock { (list: inout [HistoryEntry]) throws(StoreError) in
            list.append(entry)
            if list.count > capacity { list.removeFirst(list.count - capacity) }
            // Written under the lock, so the file's order is the order of the calls to append.
            let bytes = try StoreFile.encode(HistoryFile(entries: list), path: path)
            try StoreFile.writeAtomically(path: path, bytes: bytes)
        }
    }

    /// Oldest first.
    public func all() -> [HistoryEntry] {
        entries.withLock { $0 }
    }

    /// The newest `count` entries, newest first.
    public func newest(_ count: Int) -> [HistoryEntry] {
        entries.withLock { Array($0.suffix(max(0, count)).reversed()) }
    }

    /// Incoming calls nobody here took (missed or declined, e.g. do-not-disturb) that were placed
    /// at or after `since` (seconds since 1970), newest first.
    public func missed(since: Double) -> [HistoryEntry] {
        entries.withLock { list in
            list.reversed().filter {
                $0.direction == .incoming && ($0.outcome == .missed || $0.outcome == .declined) && $0.started >= since
            }
        }
    }
}

/// The file's layout; `format` lets a later version change it knowingly.
struct HistoryFile: Codable {
    static let currentFormat = 1
    var format = currentFormat
    var entries: [HistoryEntry]

    init(entries: [HistoryEntry]) {
        self.entries = entries
    }

    init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        format = try c.decode(Int.self, forKey: .format)
        guard format == Self.currentFormat else {
            throw DecodingError.dataCorruptedError(forKey: .format, in: c,
                                                   debugDescription: "format \(format), this version reads \(Self.currentFormat)")
        }
        entries = try c.decode([HistoryEntry].self, forKey: .entries)
    }
}
