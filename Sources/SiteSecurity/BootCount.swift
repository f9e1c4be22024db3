import Foundation
import Posix

/// How many times this terminal has started, kept beside its key. A terminal's announcements are
/// ordered by (starts, count within the start) with no clock (docs/identity.md), so the number
/// must rise at every start, also after a crash: it is written and synced before the first
/// announcement goes out.
public enum BootCount {
    /// The file beside the key at `identityKey`.
    public static func path(besideKey identityKey: String) -> String { identityKey + ".starts" }

    /// Reads the count at `path` (0 when there is none yet), writes one more, and returns that.
    /// A file that is not a count is an error, never replaced: peers would refuse every
    /// announcement of a count lower than the last they took.
    public static func next(path: String) throws(SiteKeyError) -> UInt64 {
        let bytes: [UInt8]?
        do { bytes = try WholeFile.read(path) } catch { throw SiteKeyError("\(path): \(error.cannotText)") }
        var last: UInt64 = 0
        if let bytes {
            guard let text = String(validating: bytes, as: UTF8.self),
                  let n = UInt64(text.trimmingCharacters(in: .whitespacesAndNewlines)), n < UInt64.max else {
                throw SiteKeyError("\(path): not a count of starts")
            }
            last = n
        }
        let next = last + 1
        WholeFile.removeLeftovers(of: path)
        do {
            try WholeFile.replace(path, mode: 0o600, syncDirectory: true) { fd in
                try Array("\(next)\n".utf8).withUnsafeBytes { try WholeFile.write(fd, $0) }
            }
        } catch let error as SystemError {
            throw SiteKeyError("\(path): \(error.cannotText)")
        } catch {
            throw SiteKeyError("\(path): \(error)")
        }
        return next
    }
}
