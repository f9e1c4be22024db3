import Calls
import Control
@testable import IntercomDaemon
import Posix
import SiteSecurity
import XCTest

/// How the calls thread seals and opens signalling, through `SignalProtection` with real keys:
/// the document's approvals switch it from the site key to terminal keys and back; approved
/// terminals find each other from one announcement and its answer; a pending terminal sends
/// nothing; a revoked one is refused at once; a rotated session is announced and still opens
/// what was on its way.
final class SignalProtectionTests: XCTestCase {
    private let a = RoomID("desk1")!, b = RoomID("desk2")!, c = RoomID("desk3")!
    private let peers = [SignallingPeer(room: RoomID("desk2")!, address: .loopback(port: 2)),
                         SignallingPeer(room: RoomID("desk3")!, address: .loopback(port: 3))]

    private func hello(from room: RoomID, id: UInt32) -> [UInt8] {
        SignalCodec.encode(Envelope(sender: room, messageID: id, message: .hello(doNotDisturb: false, call: nil)))
    }

    private func opened(_ r: SignalProtection.Received) -> Envelope? {
        if case .envelope(let e) = r { return e }
        return nil
    }

    func testApprovalsSwitchToTerminalKeysPairsFindEachOtherAndARevocationHoldsAtOnce() throws {
        let site = try SiteKey(bytes: Array(repeating: 7, count: 32))
        let keys = [a, b, c].map { _ in TerminalIdentity() }
        func protection(_ i: Int) -> SignalProtection {
            let room = [a, b, c][i]
            return SignalProtection(room: room, siteSeal: SignalSeal(siteKey: site, room: room.value, knownRooms: ["desk1", "desk2", "desk3"]),
                                    terminal: .init(identity: keys[i], boot: 1))
        }
        let (pa, pb, pc) = (protection(0), protection(1), protection(2))
        XCTAssertEqual(pa.mode, .siteKey)
        XCTAssertEqual(pa.use(terminalKeys: [:], now: 0), .init(), "nothing approved: the site key stays")
        XCTAssertEqual(pa.mode, .siteKey)

        // desk1 and desk2 approved, desk3 pending.
        let approved = ["desk1": keys[0].publicIdentity, "desk2": keys[1].publicIdentity]
        let announceA = try XCTUnwrap(pa.use(terminalKeys: approved, now: 0).announcement, "switching announces at once")
        let announceB = try XCTUnwrap(pb.use(terminalKeys: approved, now: 0).announcement)
        let pending = pc.use(terminalKeys: approved, now: 0)
        XCTAssertNil(pending.announcement, "a pending terminal announces nothing")
        XCTAssertTrue(pending.fellSilent, "and falls silent")
        XCTAssertFalse(pc.use(terminalKeys: approved, now: 1).fellSilent, "once: the next version leaves it as it is")
        XCTAssertEqual([pa.mode, pb.mode, pc.mode], [.terminalKeys, .terminalKeys, .terminalKeys])
        XCTAssertTrue(pc.silent)
        XCTAssertEqual(pc.hello(hello(from: c, id: 1), to: peers).count, 0, "a pending terminal sends nothing")
        XCTAssertNil(pa.seal(hello(from: a, id: 1), for: b), "no session of desk2 heard yet: held back")
        XCTAssertEqual(pa.awaitingSession.load, 1)
        _ = announceB

        // desk1's announcements name the document it holds; the silent desk3 still learns of it.
        let held = SiteStamp(version: 7, digest: 0xD1, length: 900)
        pa.holds(held)
        guard case .siteHint(let hinter, let stamp) = pc.receive(try XCTUnwrap(pa.hello(hello(from: a, id: 1), to: peers).first?.datagram)) else {
            return XCTFail("a silent terminal hears which document an announcement names")
        }
        XCTAssertEqual(hinter, a)
        XCTAssertEqual(stamp, held)

        // desk2 hears desk1's announcement and answers; desk1 takes the answer.
        guard case .announcement(let room, let answer?, _) = pb.receive(announceA) else { return XCTFail("desk2 takes desk1's announcement and answers it") }
        XCTAssertEqual(room, a)
        // desk1 had not heard desk2's session either, so it answers too; desk2 knows that one.
        guard case .announcement(_, let again?, _) = pa.receive(answer) else { return XCTFail("desk1 takes the answer") }
        guard case .announcement(_, nil, _) = pb.receive(again) else { return XCTFail("desk2 does not answer a session it holds") }
        let sealed = try XCTUnwrap(pa.seal(hello(from: a, id: 2), for: b))
        XCTAssertEqual(opened(pb.receive(sealed))?.sender, a)
        XCTAssertNil(opened(pb.receive(sealed)), "a replay is refused")
        XCTAssertEqual(pb.refused.replay.load, 1)
        XCTAssertNil(opened(pc.receive(sealed)), "sealed for desk2, not for desk3")

        // A hello round: the announcement to all, then one seal per room whose session is held.
        let round = pa.hello(hello(from: a, id: 3), to: peers)
        XCTAssertEqual(round.map { $0.to }, [peers.map(\.address), [peers[0].address]])

        // A forged announcement for desk2 (another key) is refused; desk2's session stays.
        let forged = TerminalSeal(identity: TerminalIdentity(), room: "desk2", boot: 99, directory: [:]).announcement()
        guard case .refused = pa.receive(forged) else { return XCTFail("a forged announcement is refused") }
        XCTAssertEqual(pa.refused.badSignature.load, 1)
        XCTAssertNotNil(opened(pa.receive(try XCTUnwrap(pb.seal(hello(from: b, id: 1), for: a)))))

        // Rotation: announced, and what desk2 sealed to the old session still opens within the minute.
        let inFlight = try XCTUnwrap(pb.seal(hello(from: b, id: 2), for: a))
        XCTAssertNil(pa.tick(now: TerminalSeal.sessionSeconds - 1))
        let rotated = try XCTUnwrap(pa.tick(now: TerminalSeal.sessionSeconds))
        XCTAssertEqual(pa.sessionRenewals.load, 1, "counted")
        XCTAssertNotNil(opened(pa.receive(inFlight)), "sealed to the previous session, on its way")
        guard case .announcement = pb.receive(rotated) else { return XCTFail("desk2 takes the new session") }
        XCTAssertNotNil(opened(pa.receive(try XCTUnwrap(pb.seal(hello(from: b, id: 3), for: a)))))
        let late = try XCTUnwrap(pb.seal(hello(from: b, id: 4), for: a))
        _ = pa.tick(now: TerminalSeal.sessionSeconds + TerminalSeal.previousKeptSeconds)
        XCTAssertNotNil(opened(pa.receive(late)), "sealed to the new session: opens after the old one is erased")

        // desk2 revoked: refused at desk1 at once; desk2 falls silent.
        let fromB = try XCTUnwrap(pb.seal(hello(from: b, id: 5), for: a))
        let revoked = ["desk1": keys[0].publicIdentity]
        XCTAssertEqual(pa.use(terminalKeys: revoked, now: 4000), .init(distrusted: ["desk2"]), "desk1 no longer trusts desk2")
        XCTAssertEqual(pb.use(terminalKeys: revoked, now: 4000), .init(distrusted: ["desk2"], fellSilent: true), "desk2 falls silent")
        XCTAssertTrue(pb.silent)
        let before = pa.refused.unknownSender.load
        XCTAssertNil(opened(pa.receive(fromB)))
        XCTAssertEqual(pa.refused.unknownSender.load, before + 1)
        XCTAssertNil(pa.seal(hello(from: a, id: 9), for: b), "nothing is sealed to the revoked terminal")

        // Nothing approved any more: back to the site key.
        XCTAssertEqual(pa.use(terminalKeys: [:], now: 5000), .init())
        XCTAssertEqual(pa.mode, .siteKey)
    }

    /// With neither key a terminal sends and takes nothing but what announcements say of the
    /// site, each refusal counted; only lab mode talks in the clear.
    /// The accelerated soak's daemon (`[testing] time_scale = 10`) renews its session key ten
    /// times as often.
    func testATimeScaleShortensTheSessionKeysLife() throws {
        let key = TerminalIdentity()
        let p = SignalProtection(room: a, siteSeal: nil, terminal: .init(identity: key, boot: 1), timeScale: 10)
        _ = p.use(terminalKeys: ["desk1": key.publicIdentity], now: 0)
        XCTAssertNil(p.tick(now: TerminalSeal.sessionSeconds / 10 - 1))
        XCTAssertNotNil(p.tick(now: TerminalSeal.sessionSeconds / 10))
        XCTAssertNotNil(p.tick(now: TerminalSeal.sessionSeconds / 5))
        XCTAssertEqual(p.sessionRenewals.load, 2)
    }

    /// A terminal pending approval (or revoked) renews nothing, and so waits for nothing: before,
    /// its renewal deadline stayed in the past after the first hour and the calls thread spun.
    func testASilentTerminalHasNoDeadline() throws {
        let key = TerminalIdentity(), other = TerminalIdentity()
        let p = SignalProtection(room: a, siteSeal: nil, terminal: .init(identity: key, boot: 1))
        _ = p.use(terminalKeys: ["desk2": other.publicIdentity], now: 0)  // desk1 not approved
        XCTAssertTrue(p.silent)
        XCTAssertNil(p.tick(now: TerminalSeal.sessionSeconds * 2))
        XCTAssertNil(p.nextDeadline, "nothing to wait for while silent")
        _ = p.use(terminalKeys: ["desk1": key.publicIdentity, "desk2": other.publicIdentity], now: 10_000)
        XCTAssertFalse(p.silent)
        XCTAssertEqual(try XCTUnwrap(p.nextDeadline), TerminalSeal.sessionSeconds, "approved: its renewal is due (at once, as it was)")
    }

    func testWithNoKeyNothingGoesOutOrComesInOutsideLabMode() throws {
        let plain = hello(from: a, id: 1)
        let secure = SignalProtection(room: a, siteSeal: nil, terminal: .init(identity: TerminalIdentity(), boot: 1))
        XCTAssertEqual(secure.use(terminalKeys: [:], now: 0), .init())
        XCTAssertEqual(secure.mode, .unkeyed)
        XCTAssertTrue(secure.silent)
        XCTAssertEqual(secure.hello(plain, to: peers).count, 0, "no hello")
        XCTAssertNil(secure.seal(plain, for: b), "no message")
        guard case .refused = secure.receive(plain) else { return XCTFail("a clear message is refused") }
        XCTAssertEqual(secure.refused.silent.load, 1)

        let lab = SignalProtection(room: a, siteSeal: nil, terminal: nil, lab: true)
        XCTAssertEqual(lab.mode, .clear)
        XCTAssertFalse(lab.silent)
        XCTAssertEqual(lab.seal(plain, for: b), plain)
        guard case .clear(let taken) = lab.receive(plain) else { return XCTFail("lab mode takes the clear") }
        XCTAssertEqual(taken, plain)
    }
}
