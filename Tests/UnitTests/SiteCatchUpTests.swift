import Calls
@testable import IntercomDaemon
import XCTest

/// A terminal behind on the site document takes no call or notification yet: not in its first
/// moments after a start, not while it knows of a newer document, and not forever.
final class SiteCatchUpTests: XCTestCase {
    private func stamp(_ version: UInt64, _ digest: UInt64 = 1) -> SiteStamp { SiteStamp(version: version, digest: digest, length: 100) }

    func testItWaitsAfterAStartAndWhileANewerDocumentIsKnownAtMostTheHoldTime() {
        var c = SiteCatchUp(started: 100, listenSeconds: 1.5)
        c.holds(stamp(4))
        XCTAssertTrue(c.behind(now: 100.5), "just started: still hearing what the others hold")
        XCTAssertFalse(c.behind(now: 101.6), "heard nothing newer")

        c.heard(stamp(4), now: 102)
        c.heard(stamp(3), now: 102)
        XCTAssertFalse(c.behind(now: 102), "the same or older documents hold nothing back")

        c.heard(stamp(5), now: 103)
        XCTAssertTrue(c.behind(now: 103.1), "a newer document is known: it may revoke the sender")
        c.heard(stamp(6), now: 105)
        XCTAssertTrue(c.behind(now: 112.9), "a still newer one does not restart the hold")
        XCTAssertFalse(c.behind(now: 113.1), "held back \(SiteCatchUp.holdSeconds) s at most")

        c.holds(stamp(6))
        c.heard(stamp(6, 9), now: 120)
        XCTAssertTrue(c.behind(now: 120.1), "the same version with a greater digest is newer (the gate keeps it)")
        c.holds(stamp(6, 9))
        XCTAssertFalse(c.behind(now: 120.2), "held: calls are taken at once")
    }
}
