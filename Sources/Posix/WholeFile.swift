import Glibc

/// Files read or replaced whole (configuration, call history and state, WAV recordings): the one
/// place the project does that, with EINTR and short transfers handled by `systemCall`.
/// Operations in the errors are verbs ("open", "write /x/.h.tmp-1"): callers name the path.
public enum WholeFile {
    /// The bytes of `path`; nil when it does not exist.
    public static func read(_ path: String) throws(SystemError) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            let code = SystemError.currentErrno
            if code == .noSuchFileOrDirectory { return nil }
            throw SystemError("open", code)
        }
        defer { _ = close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = try systemCall("read") { chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) } }
            if n == 0 { return bytes }
            bytes.append(contentsOf: chunk[0..<n])
        }
    }

    /// Writes every byte of `bytes` to `fd` at its position.
    public static func write(_ fd: Int32, _ bytes: UnsafeRawBufferPointer,
                             _ operation: @autoclosure () -> String = "write") throws(SystemError) {
        var done = 0
        while done < bytes.count {
            done += try systemCall(operation()) { Glibc.write(fd, bytes.baseAddress! + done, bytes.count - done) }
        }
    }

    /// Writes every byte of `bytes` to `fd` at `offset`, leaving its position alone.
    public static func write(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int,
                             _ operation: @autoclosure () -> String = "write") throws(SystemError) {
        var done = 0
        while done < bytes.count {
            done += try systemCall(operation()) {
                pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset + done))
            }
        }
    }

    /// Replaces `path` so that after a crash at any moment it holds either the old or the new
    /// content: `fill` writes a temporary file next to `path`, which is synced and renamed
    /// over `path`; with `syncDirectory` the directory is synced too, so that the rename survives
    /// power loss. `mode`, when given, is set before anything is written, whatever the umask. On
    /// failure `path` is untouched and the temporary file removed (one a crash leaves behind,
    /// `removeLeftovers` removes). `fill`'s own errors pass through; the system's are `SystemError`s.
    public static func replace(_ path: String, mode: mode_t?, syncDirectory: Bool,
                               fill: (Int32) throws -> Void) throws {
        let temporary = leftoverPrefix(of: path) + "\(getpid())-\(String(UInt32.random(in: .min ... .max), radix: 16))"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode ?? 0o644)
        guard fd >= 0 else { throw SystemError("create temporary file \(temporary)", SystemError.currentErrno) }
        var closed = false
        var renamed = false
        defer {
            if !closed { _ = close(fd) }
            if !renamed { _ = unlink(temporary) }
        }
        if let mode { try systemCall("set mode of \(temporary)") { fchmod(fd, mode) } }
        try fill(fd)
        try systemCall("sync \(temporary)") { fsync(fd) }
        closed = true
        guard close(fd) == 0 else { throw SystemError("close \(temporary)", SystemError.currentErrno) }
        guard rename(temporary, path) == 0 else { throw SystemError("rename \(temporary) over it", SystemError.currentErrno) }
        renamed = true
        guard syncDirectory else { return }
        let slash = path.lastIndex(of: "/")
        let directory = slash.map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "."
        let dfd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard dfd >= 0 else { throw SystemError("open directory \(directory) to sync it", SystemError.currentErrno) }
        defer { _ = close(dfd) }
        try systemCall("sync directory \(directory)") { fsync(dfd) }
    }

    /// Removes the temporary files that writers of `path` killed mid-write left behind (a process
    /// that replaces `path` calls this at its start, before it writes).
    public static func removeLeftovers(of path: String) {
        let prefix = leftoverPrefix(of: path)
        let slash = prefix.lastIndex(of: "/")!
        let directory = String(prefix[..<slash]), start = String(prefix[prefix.index(after: slash)...])
        guard let listing = opendir(directory) else { return }
        var found: [String] = []
        while let entry = readdir(listing) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name.hasPrefix(start) { found.append(name) }
        }
        closedir(listing)
        for name in found { _ = unlink("\(directory)/\(name)") }
    }

    /// The temporary files of `path` are `<directory>/.<name>.tmp-<pid>-<tag>`: hidden, and
    /// one writer's never another's.
    static func leftoverPrefix(of path: String) -> String {
        let slash = path.lastIndex(of: "/")
        let directory = slash.map { $0 == path.startIndex ? "" : String(path[..<$0]) } ?? "."
        let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
        return "\(directory)/.\(name).tmp-"
    }
}

extension SystemError {
    /// "cannot <operation>: <the system's text>", the way file errors read in the project.
    public var cannotText: String { "cannot \(operation): \(String(cString: strerror(errno.rawValue)))" }
}
