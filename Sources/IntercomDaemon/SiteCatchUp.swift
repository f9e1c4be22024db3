import Calls

/// Whether this terminal takes a call or a notification yet, under terminal keys (docs/identity.md):
/// not while it knows of a newer site document than the one it holds, since that one may revoke
/// the sender, and not before it has heard what the others hold after a start. So a terminal that
/// was off learns of a revocation before it accepts anything from the revoked one. A newer
/// document it cannot get holds it back for `holdSeconds` at most. No I/O: times are given.
struct SiteCatchUp: Sendable {
    /// The longest a newer document heard of holds calls and notifications back.
    static let holdSeconds = 10.0
    /// After a start: a terminal announces itself to every room at once, and each that takes it
    /// answers at once with its own announcement, naming the document it holds; on a LAN those
    /// answers are in within milliseconds. Short, since a call to a terminal in this window is
    /// not taken (the caller gives up after `give_up_after`, 1 s).
    static let listenSeconds = 0.5

    /// Before this, after a start: the peers' announcements (every hello interval) are still arriving.
    private let listenUntil: Double
    private var held: SiteStamp?
    /// The newest document heard of that is newer than the one held, and since when one was.
    private var newer: (stamp: SiteStamp, since: Double)?

    init(started: Double, listenSeconds: Double) {
        listenUntil = started + listenSeconds
    }

    /// The document this terminal holds from now on.
    mutating func holds(_ stamp: SiteStamp?) {
        held = stamp
        if let n = newer, let stamp, n.stamp <= stamp { newer = nil }
    }

    /// A peer's announcement named `stamp`.
    mutating func heard(_ stamp: SiteStamp, now: Double) {
        if let held, stamp <= held { return }
        if let n = newer {
            if stamp > n.stamp { newer = (stamp, n.since) }
        } else {
            newer = (stamp, now)
        }
    }

    /// True while calls and notifications wait.
    func behind(now: Double) -> Bool {
        if now < listenUntil { return true }
        guard let n = newer else { return false }
        return now - n.since < Self.holdSeconds
    }
}
