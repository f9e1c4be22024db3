import Calls
import Control
import XCTest

/// `site`: who holds which document, and who is behind, from the announcements a terminal heard.
final class SiteOverviewTests: XCTestCase {
    private func r(_ s: String) -> RoomID { RoomID(s)! }

    func testBehindMeansKnownAndOlderThanTheNewest() throws {
        let v3 = SiteStamp(version: 3, digest: 0xABC, length: 100), v2 = SiteStamp(version: 2, digest: 0xFFF, length: 90)
        let own = SiteAnnouncement(software: "0.9.0", site: v2, appliedAt: 10)
        let heard: [RoomID: SiteAnnouncement] = [
            r("b"): SiteAnnouncement(software: "0.9.0", site: v3, appliedAt: 20),
            r("c"): SiteAnnouncement(software: "0.9.0", site: nil, appliedAt: nil),
            r("d"): SiteAnnouncement(software: "0.9.0", site: v2, appliedAt: 5),  // offline: not shown
        ]
        let o = SiteOverview(me: r("a"), own: own, directory: [r("e"), r("d"), r("c"), r("b"), r("a")], heard: heard,
                             online: [r("b"), r("c"), r("e")])
        XCTAssertEqual(o.terminals.map(\.room), ["a", "b", "c", "d", "e"], "this terminal first, then by id")
        XCTAssertEqual(o.newestVersion, 3)
        XCTAssertEqual(o.terminals.map(\.behind), [true, false, true, false, false],
                       "a holds v2 (older), c none; d is offline and e announces nothing: unknown, not behind")
        XCTAssertEqual(o.terminals[1].digest, "0000000000000abc")
        XCTAssertNil(o.terminals[3].siteVersion, "offline: nothing known")
        XCTAssertEqual(o.terminals[4].software, nil)
        // On the wire and back.
        XCTAssertEqual(try ControlReply.read(Wire.encode(ControlReply.site(o)), to: .command(.site)), .site(o))
        // The same version with another digest: the greater digest is the newer (as the gate keeps it).
        let twin = SiteStamp(version: 3, digest: 0xFFFF, length: 100)
        let o2 = SiteOverview(me: r("a"), own: SiteAnnouncement(software: "0.9.0", site: twin, appliedAt: 1), directory: [r("a"), r("b")],
                              heard: heard, online: [r("b")])
        XCTAssertEqual(o2.terminals.map(\.behind), [false, true])
    }

    /// Each terminal's health as its newest health message said (this one's: as reported), only
    /// while it is online; it travels the control socket whole.
    func testHealthIsShownForThisTerminalAndTheOnlineOnes() throws {
        let own = SiteAnnouncement(software: "0.9.0", site: nil, appliedAt: nil)
        let mine = TerminalHealth(audio: .off, xruns: 0, selfTest: .none, uptimeSeconds: 5)
        let sick = TerminalHealth(audio: .unavailable, xruns: 12, selfTest: .failed, uptimeSeconds: 7200)
        let fine = TerminalHealth(audio: .running, xruns: 0, selfTest: .passed, uptimeSeconds: 60)
        let o = SiteOverview(me: r("a"), own: own, directory: [r("a"), r("b"), r("c"), r("d")], heard: [:], online: [r("b"), r("c")],
                             ownHealth: mine, health: [r("b"): sick, r("d"): fine])
        XCTAssertEqual(o.terminals.map(\.health), [mine, sick, nil, nil], "c told nothing yet; d is offline")
        XCTAssertEqual(try ControlReply.read(Wire.encode(ControlReply.site(o)), to: .command(.site)), .site(o))
    }
}
