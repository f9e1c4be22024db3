import SiteSecurity
import TOMLKit

/// `[enrolment]` of a site document (docs/identity.md): which terminal, by its public key, each
/// room has, and the keys revoked (never approved again) or retired (a swapped box's). Written by
/// `intercom-site approve` and `revoke` into the site folder's enrolment.toml, signed with the rest.
///
/// ```toml
/// [enrolment]
/// revoked = ["<base64 key>"]
/// [enrolment.approved]
/// empfang = "<base64 key>"
/// ```
public struct SiteEnrolment: Sendable, Equatable {
    public var approved: [String: PublicIdentity] = [:]
    public var revoked: Set<PublicIdentity> = []
    public var retired: Set<PublicIdentity> = []

    public init(approved: [String: PublicIdentity] = [:], revoked: Set<PublicIdentity> = [], retired: Set<PublicIdentity> = []) {
        self.approved = approved
        self.revoked = revoked
        self.retired = retired
    }

    /// Reads the section; each problem goes to `report` with its key. `rooms`: the document's.
    static func read(_ value: TOMLValueConvertible, rooms: Set<String>, report: ([String], String) -> Void) -> SiteEnrolment {
        var section = SiteEnrolment()
        guard let table = value.table else {
            report(["enrolment"], "expected a table ([enrolment] with approved, revoked, retired), got \(TOMLRead.describe(value))")
            return section
        }
        func key(_ text: String, at path: [String]) -> PublicIdentity? {
            do throws(SiteKeyError) { return try PublicIdentity(text: text) } catch { report(path, error.description); return nil }
        }
        func keys(_ name: String) -> Set<PublicIdentity> {
            guard let v = table[name] else { return [] }
            do throws(ValueProblem) {
                return Set(try TOMLRead.strings(v).compactMap { key($0, at: ["enrolment", name]) })
            } catch { report(["enrolment", name], error.text); return [] }
        }
        for name in table.keys where !["approved", "revoked", "retired"].contains(name) {
            report(["enrolment", name], "unknown key (an [enrolment] has approved, revoked and retired)")
        }
        section.revoked = keys("revoked")
        section.retired = keys("retired")
        if let approved = table["approved"] {
            if let rooms_ = approved.table {
                for (room, v) in rooms_ {
                    let path = ["enrolment", "approved", room]
                    guard rooms.contains(room) else { report(path, "\(TOMLWrite.string(room)) is not a room in [rooms]"); continue }
                    do throws(ValueProblem) {
                        if let identity = key(try TOMLRead.string(v), at: path) { section.approved[room] = identity }
                    } catch { report(path, error.text) }
                }
            } else {
                report(["enrolment", "approved"], "expected a table of room = \"<public key>\", got \(TOMLRead.describe(approved))")
            }
        }
        var holder: [PublicIdentity: String] = [:]
        for (room, identity) in section.approved.sorted(by: { $0.key < $1.key }) {
            let path = ["enrolment", "approved", room]
            if let other = holder[identity] { report(path, "the terminal \(identity) is approved for \(other) too: one terminal, one room") }
            holder[identity] = room
            if section.revoked.contains(identity) { report(path, "the terminal \(identity) is revoked") }
            if section.retired.contains(identity) { report(path, "the terminal \(identity) is also listed as retired") }
        }
        return section
    }

    /// The section as TOML, keys sorted so that the same decisions give the same text.
    public func rendered() -> String {
        func list(_ keys: Set<PublicIdentity>) -> String { "[" + keys.map { TOMLWrite.string($0.text) }.sorted().joined(separator: ", ") + "]" }
        var out = "\n[enrolment]\nrevoked = \(list(revoked))\nretired = \(list(retired))\n\n[enrolment.approved]\n"
        for (room, identity) in approved.sorted(by: { $0.key < $1.key }) { out += "\(TOMLWrite.key(room)) = \(TOMLWrite.string(identity.text))\n" }
        return out
    }
}
