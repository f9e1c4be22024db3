import Synchronization

/// A small value kept across restarts (do-not-disturb and the like), written atomically like
/// the history (same file mode). Safe to use from several threads.
public final class StateStore<Value: Codable & Sendable>: Sendable {
    public let path: String
    /// Set when the file on disk was not valid: it was moved aside and the default used.
    public let loadProblem: StoreLoadProblem?
    private let state: Mutex<Value>

    /// Loads `path`, or starts with `initial` when it does not exist (nothing is written yet).
    public init(path: String, default initial: Value) throws(StoreError) {
        self.path = path
        let (loaded, problem) = try StoreFile.load(Value.self, path: path)
        loadProblem = problem
        state = Mutex(loaded ?? initial)
    }

    public var value: Value { state.withLock { $0 } }

    /// Changes the value and writes the file; on a failed write the new value is kept in memory.
    public func update(_ change: (inout Value) -> Void) throws(StoreError) {
        try state.withLock { (v: inout Value) throws(StoreError) in
            change(&v)
            try StoreFile.writeAtomically(path: path, bytes: try StoreFile.encode(v, path: path))
        }
    }

    public func set(_ newValue: Value) throws(StoreError) {
        try update { $0 = newValue }
    }
}

/// What a terminal keeps across restarts besides its history. Missing fields read as their
/// defaults, so fields can be added without invalidating older files.
public struct TerminalState: Codable, Sendable, Equatable {
    public var doNotDisturb: Bool

    public init(doNotDisturb: Bool = false) {
        self.doNotDisturb = doNotDisturb
    }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        doNotDisturb = try c.decodeIfPresent(Bool.self, forKey: .doNotDisturb) ?? false
    }
}
