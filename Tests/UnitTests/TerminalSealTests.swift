import Foundation
import SignalTools
import SiteSecurity
import TestSupport
import XCTest

/// Signalling sealed per pair of terminals (`TerminalSeal`, docs/identity.md): readable by one,
/// attributable to one, fresh without clocks, dead with its session keys; and a seeded simulation
/// of terminals that start again, rotate, lose and repeat datagrams, with one revoked and an
/// eavesdropper replaying what it recorded.
final class TerminalSealTests: XCTestCase {
    /// Keys and seals made from one seeded generator.
    private final class Maker: @unchecked Sendable {
        let rng: Locked<SplitMix64>
        init(seed: UInt64) { rng = Locked(SplitMix64(seed: seed)) }
        func bytes() -> [UInt8] {
            var g = rng.value
            defer { rng.value = g }
            return (0..<4).flatMap { _ in withUnsafeBytes(of: g.next()) { Array($0) } }
        }
        func identity() -> TerminalIdentity { try! TerminalIdentity(seed: bytes()) }
        func seal(_ identity: TerminalIdentity, _ room: String, boot: UInt64 = 1, _ directory: [String: PublicIdentity]) -> TerminalSeal {
            TerminalSeal(identity: identity, room: room, boot: boot, directory: directory, newSessionKey: { [self] in bytes() })
        }
        /// Terminals a and b that have heard each other's announcement.
        func pair() throws -> (TerminalIdentity, TerminalIdentity, [String: PublicIdentity], TerminalSeal, TerminalSeal) {
            let ia = identity(), ib = identity()
            let directory = ["a": ia.publicIdentity, "b": ib.publicIdentity]
            let a = seal(ia, "a", directory), b = seal(ib, "b", directory)
            _ = try b.heard(a.announcement()).get()
            _ = try a.heard(b.announcement()).get()
            return (ia, ib, directory, a, b)
        }
    }

    private func failure<T>(_ r: Result<T, TerminalSeal.Failure>) -> TerminalSeal.Failure? {
        if case .failure(let f) = r { return f }
        return nil
    }

    private func opened(_ r: Result<(sender: String, plaintext: [UInt8]), TerminalSeal.Failure>) -> (String, String)? {
        guard case .success(let o) = r else { return nil }
        return (o.sender, String(decoding: o.plaintext, as: UTF8.self))
    }

    func testTwoTerminalsThatHeardEachOthersAnnouncementSealBothWaysAndNoOtherOpens() throws {
        let m = Maker(seed: 1)
        let ia = m.identity(), ib = m.identity(), ic = m.identity()
        let directory = ["a": ia.publicIdentity, "b": ib.publicIdentity, "c": ic.publicIdentity]
        let a = m.seal(ia, "a", directory), b = m.seal(ib, "b", directory), c = m.seal(ic, "c", directory)
        XCTAssertNil(a.seal(Array("x".utf8), for: "b"), "nothing is sealed before the peer's session is known")
        for (from, to) in [(a, b), (b, a), (a, c), (c, a), (b, c), (c, b)] { _ = try to.heard(from.announcement()).get() }

        let toB = try XCTUnwrap(a.seal(Array("hello b".utf8), for: "b"))
        XCTAssertEqual(opened(b.open(toB))?.0, "a")
        XCTAssertEqual(opened(b.open(toB))?.1, nil)
        XCTAssertEqual(failure(b.open(toB)), .replay)
        XCTAssertNotNil(failure(c.open(toB)), "sealed for b, it does not open at c")
        XCTAssertEqual(opened(a.open(try XCTUnwrap(b.seal(Array("hello a".utf8), for: "a"))))?.1, "hello a")

        var tampered = try XCTUnwrap(a.seal(Array("pay 10".utf8), for: "b"))
        tampered[tampered.count - 20] ^= 1
        XCTAssertEqual(failure(b.open(tampered)), .authentication)
        // Out of order within the window: each opens once.
        let three = try (1...3).map { try XCTUnwrap(a.seal(Array("n\($0)".utf8), for: "b")) }
        XCTAssertEqual([three[2], three[0], three[1]].map { opened(b.open($0))?.1 }, ["n3", "n1", "n2"])
        XCTAssertEqual(failure(b.open(Array("garbage".utf8))), .notSealed)
        XCTAssertEqual(failure(b.open(Array(toB.prefix(20)))), .malformed)
        // A datagram that claims another sender names a pairing that sender does not have.
        var forged = toB
        forged[4] = UInt8(ascii: "c")
        XCTAssertNotNil(failure(b.open(forged)))
    }

    func testAnnouncementsAreTakenOnlyUnderTheApprovedKeyAndOnlyWhenNewer() throws {
        let m = Maker(seed: 2)
        let ia = m.identity(), ib = m.identity(), thief = m.identity()
        let directory = ["a": ia.publicIdentity, "b": ib.publicIdentity]
        let a = m.seal(ia, "a", directory), b = m.seal(ib, "b", directory)
        XCTAssertEqual(failure(b.heard(m.seal(thief, "a", directory).announcement())), .badSignature, "room a's announcement under another key")
        XCTAssertEqual(failure(b.heard(m.seal(thief, "x", directory).announcement())), .unknownSender)
        XCTAssertEqual(failure(b.heard(b.announcement())), .unknownSender, "its own")
        let first = a.announcement()
        XCTAssertEqual(try b.heard(first).get().newSession, true)
        XCTAssertEqual(try b.heard(a.announcement()).get().newSession, false, "the same session again changes nothing")
        a.rotate()
        XCTAssertEqual(try b.heard(a.announcement()).get().newSession, true)
        XCTAssertEqual(failure(b.heard(first)), .older, "an older session replayed is refused")
        // A restart counts again from 1, under a higher boot count: newer whatever the clock says.
        let again = m.seal(ia, "a", boot: 2, directory)
        XCTAssertEqual(try b.heard(again.announcement()).get().newSession, true)
        // Another session key under a's name, not signed by a; the same session again with a
        // broken signature changes nothing, so it is not even checked.
        var bad = again.announcement()
        bad[4 + 1 + 16 + SessionAnnouncement.siteBytes + 4] ^= 1  // in the session key
        XCTAssertEqual(failure(b.heard(bad)), .badSignature)
        var same = again.announcement()
        same[same.count - 1] ^= 1
        XCTAssertEqual(try b.heard(same).get().newSession, false)
        XCTAssertEqual(failure(b.heard(Array(bad.prefix(30)))), .malformed)
    }

    func testACopyOfATerminalsDiskOpensNothingRecordedAndARestartedTerminalRefusesReplays() throws {
        let m = Maker(seed: 3)
        let (ia, ib, directory, a, b) = try m.pair()
        let recordedToA = try XCTUnwrap(b.seal(Array("patient in room 2".utf8), for: "a"))
        let recordedToB = try XCTUnwrap(a.seal(Array("call 7".utf8), for: "b"))
        XCTAssertNotNil(opened(b.open(recordedToB)))

        // Someone with a's key file (a stolen SD card) starts it elsewhere: a new session.
        let stolen = m.seal(ia, "a", boot: 2, directory)
        _ = try stolen.heard(b.announcement()).get()
        XCTAssertEqual(failure(stolen.open(recordedToA)), .unknownSession, "what was sealed to a's earlier session stays closed")

        // b starts again: what was sealed to its earlier session is refused, however old or new.
        let b2 = m.seal(ib, "b", boot: 2, directory)
        _ = try b2.heard(a.announcement()).get()
        XCTAssertEqual(failure(b2.open(recordedToB)), .unknownSession)
    }

    func testARotatedSessionOpensUntilForgottenAndThenNothingUnderItDoes() throws {
        let m = Maker(seed: 4)
        let (_, _, _, a, b) = try m.pair()
        let beforeRotation = try XCTUnwrap(b.seal(Array("one".utf8), for: "a"))
        a.rotate()
        let inFlight = try XCTUnwrap(b.seal(Array("two".utf8), for: "a"))  // b has not heard yet
        XCTAssertEqual(opened(a.open(inFlight))?.1, "two", "sealed to the previous session, it still opens")
        let afterRotation = try XCTUnwrap(a.seal(Array("three".utf8), for: "b"))
        XCTAssertEqual(failure(b.open(afterRotation)), .unknownSession, "b has not heard a's new session")
        _ = try b.heard(a.announcement()).get()
        XCTAssertEqual(opened(b.open(afterRotation))?.1, "three")
        a.forgetPrevious()
        XCTAssertEqual(failure(a.open(beforeRotation)), .unknownSession, "the forgotten session opens nothing more")
    }

    func testARevokedTerminalIsRefusedAtOnceAndNothingIsSealedForIt() throws {
        let m = Maker(seed: 5)
        let (ia, _, _, a, b) = try m.pair()
        let fromB = try XCTUnwrap(b.seal(Array("x".utf8), for: "a"))
        a.setDirectory(["a": ia.publicIdentity])
        XCTAssertEqual(failure(a.open(fromB)), .unknownSender)
        XCTAssertNil(a.seal(Array("y".utf8), for: "b"))
        XCTAssertEqual(failure(a.heard(b.announcement())), .unknownSender)
        // The room given to a new box: the old box's sessions do not come back with it.
        let newBox = m.identity()
        a.setDirectory(["a": ia.publicIdentity, "b": newBox.publicIdentity])
        XCTAssertEqual(failure(a.open(fromB)), .unknownSender)
        XCTAssertEqual(failure(a.heard(b.announcement())), .badSignature)
    }

    /// Five terminals; each step one of: an announcement to some of the others (some lost), a
    /// message sealed for a peer, a datagram delivered (in any order, duplicated, or dropped), a
    /// terminal started again, a rotation or a forgetting, one terminal revoked everywhere, an
    /// eavesdropper replaying anything it recorded anywhere. After every open: the plaintext is
    /// the one sealed by that sender for exactly this terminal, opened once per start of it, and
    /// nothing the revoked terminal sealed opens after its revocation.
    func testASeededSimulationOfTerminalsRestartsLossReplaysAndARevocation() throws {
        for seed in UInt64(1)...30 {
            let first = try simulate(seed: seed)
            XCTAssertEqual(first, try simulate(seed: seed), "seed \(seed): the same seed decides the same")
        }
    }

    private func simulate(seed: UInt64) throws -> [String] {
        let m = Maker(seed: seed &* 7919)
        var rng = SplitMix64(seed: seed)
        let rooms = ["a", "b", "c", "d", "e"]
        let identities = Dictionary(uniqueKeysWithValues: rooms.map { ($0, m.identity()) })
        var directory = identities.mapValues(\.publicIdentity)
        var boots = Dictionary(uniqueKeysWithValues: rooms.map { ($0, UInt64(1)) })
        var seals = Dictionary(uniqueKeysWithValues: rooms.map { ($0, m.seal(identities[$0]!, $0, directory)) })
        var instance = Dictionary(uniqueKeysWithValues: rooms.map { ($0, 0) })
        var inFlight: [(to: String, bytes: [UInt8])] = []
        var recorded: [[UInt8]] = []
        var sealedBy: [String: (sender: String, recipient: String)] = [:]
        var openedOnce: Set<String> = []
        var revoked: String?
        var log: [String] = []
        var k = 0
        for _ in 0..<600 {
            let live = rooms.filter { $0 != revoked }
            switch Int.random(in: 0..<100, using: &rng) {
            case 0..<10:
                let from = live.randomElement(using: &rng)!
                let announcement = seals[from]!.announcement()
                for to in rooms where to != from && Int.random(in: 0..<4, using: &rng) > 0 { inFlight.append((to, announcement)) }
            case 10..<45:
                let from = live.randomElement(using: &rng)!, to = rooms.filter { $0 != from }.randomElement(using: &rng)!
                k += 1
                let text = "\(from)>\(to)#\(k)"
                if let bytes = seals[from]!.seal(Array(text.utf8), for: to) {
                    sealedBy[text] = (from, to)
                    inFlight.append((to, bytes))
                    recorded.append(bytes)
                }
            case 45..<85:  // up to four datagrams arrive
                for _ in 0..<4 {
                    guard !inFlight.isEmpty else { break }
                    let i = Int.random(in: 0..<min(inFlight.count, 6), using: &rng)  // nearly in order
                    let d = Int.random(in: 0..<10, using: &rng) == 0 ? inFlight[i] : inFlight.remove(at: i)  // sometimes duplicated
                    if Int.random(in: 0..<10, using: &rng) == 0 { continue }  // lost
                    let seal = seals[d.to]!
                    if SessionAnnouncement.looksLikeOne(d.bytes) {
                        log.append("\(d.to) heard: \(String(describing: try? seal.heard(d.bytes).get().room))")
                        continue
                    }
                    switch seal.open(d.bytes) {
                    case .success(let o):
                        let text = String(decoding: o.plaintext, as: UTF8.self)
                        let origin = try XCTUnwrap(sealedBy[text], "seed \(seed): \(text) was never sealed")
                        XCTAssertEqual(origin.sender, o.sender, "seed \(seed): \(text) attributed to \(o.sender)")
                        XCTAssertEqual(origin.recipient, d.to, "seed \(seed): \(text) opened at \(d.to)")
                        XCTAssertTrue(openedOnce.insert("\(d.to)/\(instance[d.to]!)/\(text)").inserted, "seed \(seed): \(text) opened twice")
                        XCTAssertNotEqual(o.sender, revoked, "seed \(seed): \(text) from the revoked terminal opened")
                        log.append("\(d.to) opened \(text)")
                    case .failure(let f):
                        log.append("\(d.to) refused \(f)")
                    }
                }
            case 85..<88:  // a start or a rotation is announced at once (to whom it reaches)
                let room = live.randomElement(using: &rng)!
                boots[room]! += 1
                instance[room]! += 1
                seals[room] = m.seal(identities[room]!, room, boot: boots[room]!, directory)
                let announcement = seals[room]!.announcement()
                for to in rooms where to != room && Int.random(in: 0..<4, using: &rng) > 0 { inFlight.append((to, announcement)) }
            case 88..<95:
                let room = live.randomElement(using: &rng)!
                if Bool.random(using: &rng) {
                    seals[room]!.rotate()
                    let announcement = seals[room]!.announcement()
                    for to in rooms where to != room && Int.random(in: 0..<4, using: &rng) > 0 { inFlight.append((to, announcement)) }
                } else {
                    seals[room]!.forgetPrevious()
                }
            case 95..<97:
                if revoked == nil {
                    let room = rooms.randomElement(using: &rng)!
                    revoked = room
                    directory[room] = nil
                    for r in rooms where r != room { seals[r]!.setDirectory(directory) }
                    log.append("revoked \(room)")
                }
            default:
                if let bytes = recorded.randomElement(using: &rng) { inFlight.append((rooms.randomElement(using: &rng)!, bytes)) }
            }
        }
        let opened = log.filter { $0.contains(" opened ") }.count
        XCTAssertGreaterThan(opened, 20, "seed \(seed): the simulation delivers (\(opened) of \(sealedBy.count) sealed opened)")
        return log
    }
}
