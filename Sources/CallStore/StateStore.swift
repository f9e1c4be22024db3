import Synchronization

/// A small value kept across restarts (do-not-disturb and the like), written atomically like
/// the history (same file mode), with memory and file under separate locks like it. Safe to use
/// from several threads.
public final class StateStore<Value: Codable & Sendable>: Sendable {
    public let path: String
    /// Set when the file on disk was not valid: it was moved aside and the default used.
    public let loadProblem: StoreLoadProblem?
    private let state: Mutex<Versioned<Value>>
    private let file = StoreFileWriter()

    /// Loads `path`, or starts with `initial` when it does not exist (nothing is written yet).
    public init(path: String, default initial: Value) throws(StoreError) {
        self.path = path
        let (loaded, problem) = try StoreFile.load(Value.self, path: path)
        loadProblem = problem
        state = Mutex(Versioned(loaded ?? initial))
    }

    public var value: Value { state.withLock { $0.value } }

    /// Changes the value and writes the file; on a failed write the new value is kept in memory.
    public func update(_ change: (inout Value) -> Void) throws(StoreError) {
        self.change(change)
        try persist()
    }

    /// Changes the value in memory only; `persist` writes it. Never touches the disk.
    public func change(_ change: (inout Value) -> Void) {
        state.withLock { $0.change(change) }
    }

    /// Writes the newest value unless it is on disk already.
    public func persist() throws(StoreError) {
        try file.write(state.withLock { $0 }, path: path) { v throws(StoreError) in try StoreFile.encode(v, path: path) }
    }

    public func set(_ newValue: Value) throws(StoreError) {
        try update { $0 = newValue }
    }
}

/// What a terminal keeps across restarts besides its history. Missing fields read as their
/// defaults, so fields can be added without invalidating older files.
public struct TerminalState: Codable, Sendable, Equatable {
    public var doNotDisturb: Bool
    /// The room's read-aloud switch; nil until someone switched it (the configuration's default holds).
    public var readAloud: Bool?

    public init(doNotDisturb: Bool = false, readAloud: Bool? = nil) {
        self.doNotDisturb = doNotDisturb
        self.readAloud = readAloud
    }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        doNotDisturb = try c.decodeIfPresent(Bool.self, forKey: .doNotDisturb) ?? false
        readAloud = try c.decodeIfPresent(Bool.self, forKey: .readAloud)
    }
}
