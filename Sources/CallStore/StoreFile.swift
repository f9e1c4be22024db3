import Calls
import Foundation
import Posix
import Glibc
import Synchronization

/// A store file or its directory could not be used; names the path and the system's reason.
public struct StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    public let path: String
    public let problem: String
    public init(path: String, problem: String) {
        self.path = path
        self.problem = problem
    }
    public var description: String { "\(path): \(problem)" }
}

/// A store file that was not valid on load. It was renamed to `movedTo` and the store started
/// empty (or with its default): the daemon logs this and carries on.
public struct StoreLoadProblem: Sendable, Equatable, CustomStringConvertible {
    public let path: String
    public let reason: String
    public let movedTo: String
    public var description: String { "\(path) was not valid (\(reason)); moved aside to \(movedTo); starting afresh" }
}

/// Whole-file JSON persistence: atomic replacement, corrupt files moved aside.
enum StoreFile {
    /// Stores hold who called whom: readable by the owner's group (the control tools), not by everyone.
    static let mode: mode_t = 0o640

    private static func failure(_ path: String, _ what: String, _ code: Int32 = errno) -> StoreError {
        StoreError(path: path, problem: "\(what): \(String(cString: strerror(code)))")
    }

    static func directory(of path: String) -> String {
        let d = (path as NSString).deletingLastPathComponent
        return d.isEmpty ? "." : d
    }

    /// Checks that the directory can be listed and written, and removes temporary files a
    /// crashed writer left behind.
    static func prepare(path: String) throws(StoreError) {
        let dir = directory(of: path)
        guard access(dir, R_OK | W_OK | X_OK) == 0 else { throw failure(dir, "store directory not usable") }
        WholeFile.removeLeftovers(of: path)
    }

    /// The file's bytes, or nil when it does not exist yet.
    static func read(path: String) throws(StoreError) -> [UInt8]? {
        do {
            return try WholeFile.read(path)
        } catch {
            throw StoreError(path: path, problem: error.cannotText)
        }
    }

    /// Replaces `path` with `bytes` so that after a crash at any moment the path holds either
    /// the old or the new content (`WholeFile.replace`, directory synced too). The mode is set
    /// whatever the umask: the umask must not decide who may read the history.
    static func writeAtomically(path: String, bytes: [UInt8]) throws(StoreError) {
        do {
            try WholeFile.replace(path, mode: mode, syncDirectory: true) { fd in
                try bytes.withUnsafeBytes { try WholeFile.write(fd, $0, "write a temporary file") }
            }
        } catch let error as SystemError {
            throw StoreError(path: path, problem: error.cannotText)
        } catch {
            throw StoreError(path: path, problem: "\(error)")
        }
    }

    /// Renames an invalid file to `<path>.corrupt-<UTC time>` and returns the new name.
    static func moveAside(path: String) throws(StoreError) -> String {
        var t = time(nil)
        var parts = tm()
        gmtime_r(&t, &parts)
        var text = [CChar](repeating: 0, count: 32)
        let n = strftime(&text, text.count, "%Y%m%dT%H%M%SZ", &parts)
        let stamp = String(decoding: text[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        var target = "\(path).corrupt-\(stamp)"
        var n2 = 1
        while access(target, F_OK) == 0 {
            n2 += 1
            target = "\(path).corrupt-\(stamp)-\(n2)"
        }
        guard rename(path, target) == 0 else { throw failure(path, "not valid, and cannot move it aside to \(target)") }
        return target
    }

    /// Loads and decodes `path`. Missing: nil. Not decodable: moved aside, reported, nil.
    static func load<T: Decodable>(_ type: T.Type, path: String) throws(StoreError) -> (T?, StoreLoadProblem?) {
        try prepare(path: path)
        guard let bytes = try read(path: path) else { return (nil, nil) }
        do {
            return (try Wire.decoder().decode(T.self, from: Data(bytes)), nil)
        } catch {
            let reason = bytes.isEmpty ? "empty file" : describe(error)
            let moved = try moveAside(path: path)
            return (nil, StoreLoadProblem(path: path, reason: reason, movedTo: moved))
        }
    }

    static func encode<T: Encodable>(_ value: T, path: String) throws(StoreError) -> [UInt8] {
        do {
            return try Wire.encode(value) + [UInt8(ascii: "\n")]
        } catch {
            throw StoreError(path: path, problem: "cannot encode: \(error)")
        }
    }

    private static func describe(_ error: Error) -> String {
        switch error {
        case DecodingError.dataCorrupted(let c): return "not valid JSON: \(c.debugDescription)"
        case DecodingError.keyNotFound(let k, _): return "missing field \(k.stringValue)"
        case DecodingError.typeMismatch(_, let c), DecodingError.valueNotFound(_, let c):
            return "wrong value at \(c.codingPath.map(\.stringValue).joined(separator: ".")): \(c.debugDescription)"
        default: return "\(error)"
        }
    }
}

/// A value and how often it has changed, so that a writer can tell a newer state from an older one.
struct Versioned<Value: Sendable>: Sendable {
    private(set) var value: Value
    private(set) var version: UInt64 = 1

    init(_ value: Value) { self.value = value }

    mutating func change(_ body: (inout Value) -> Void) {
        body(&value)
        version &+= 1
    }
}

/// Writes a store's file, one writer at a time, and never an older state over a newer one: two
/// threads persisting at once leave the newer version on disk whatever order they finish in.
final class StoreFileWriter: Sendable {
    /// The version on disk (0: none written by this process).
    private let written = Mutex<UInt64>(0)

    func write<Value>(_ state: Versioned<Value>, path: String,
                      encode: (Value) throws(StoreError) -> [UInt8]) throws(StoreError) {
        try written.withLock { (onDisk: inout UInt64) throws(StoreError) in
            guard state.version > onDisk else { return }
            try StoreFile.writeAtomically(path: path, bytes: try encode(state.value))
            onDisk = state.version
        }
    }
}
