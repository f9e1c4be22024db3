import Foundation
import Posix
import Site
import SiteSecurity
import XCTest

/// The signed site document: only a whole, well-signed, newer document for this site that reads as
/// a site is adopted; every other kind is refused by reason, counted, described once, and the
/// document held stays.
final class SiteDocumentTests: XCTestCase {
    private let admin = try! AdministratorKey(seed: Array(repeating: 3, count: 32))
    private let site = "praxis-am-markt"

    /// A stand-in for the site reader: a body reads as a site when it starts with "site".
    private func gate() -> SiteDocumentGate<String> {
        SiteDocumentGate(siteID: site, verifier: admin.verifier) { body in
            let text = String(decoding: body, as: UTF8.self)
            return text.hasPrefix("site") ? .success(text) : .failure(SiteReadError("rooms.labor.address: missing"))
        }
    }

    private func signed(_ version: UInt64, _ body: String = "site rooms", by key: AdministratorKey? = nil, site: String? = nil) -> [UInt8] {
        SignedSiteDocument(site: site ?? self.site, version: version, body: Array(body.utf8), signedWith: key ?? admin).encoded()
    }

    /// What a new gate decides of `bytes`.
    private func firstOffer(_ bytes: [UInt8]) -> SiteDocumentGate<String>.Decision {
        var g = gate()
        return g.offer(bytes, from: "a terminal")
    }

    private func adopted(_ decision: SiteDocumentGate<String>.Decision) -> UInt64? {
        if case .adopt(let held) = decision { return held.version }
        return nil
    }

    private func refusal(_ decision: SiteDocumentGate<String>.Decision) -> SiteDocumentRefusal? {
        if case .refuse(let reason, _) = decision { return reason }
        return nil
    }

    func testANewerSignedDocumentIsAdoptedAndTheSameOneAgainIsNothingNew() {
        var g = gate()
        XCTAssertEqual(adopted(g.offer(signed(1), from: "admin")), 1)
        XCTAssertEqual(adopted(g.offer(signed(2, "site rooms and buttons"), from: "empfang")), 2)
        XCTAssertEqual(g.held?.site, "site rooms and buttons")
        guard case .alreadyHeld = g.offer(signed(2, "site rooms and buttons"), from: "labor") else {
            return XCTFail("the document held, offered again, is nothing new")
        }
        XCTAssertEqual(g.refusedTotal, 0)
    }

    func testEveryKindOfBadDocumentIsRefusedCountedAndTheLastGoodOneKept() {
        var g = gate()
        let good = signed(5)
        XCTAssertEqual(adopted(g.offer(good, from: "admin")), 5)

        let thief = AdministratorKey()  // a key the site never trusted
        var unsigned = SignedSiteDocument(site: site, version: 9, body: Array("site x".utf8), signedWith: admin)
        unsigned.signature = Data()
        var bodyChanged = SignedSiteDocument(site: site, version: 9, body: Array("site x".utf8), signedWith: admin)
        bodyChanged.body = Data("site y".utf8)
        var versionChanged = SignedSiteDocument(site: site, version: 5, body: Array("site rooms".utf8), signedWith: admin)
        versionChanged.version = 9
        var futureFormat = SignedSiteDocument(site: site, version: 9, body: Array("site x".utf8), signedWith: admin)
        futureFormat.format = 2
        let huge = signed(9, "site " + String(repeating: "x", count: SignedSiteDocument.maximumBytes))
        let newer = signed(9, "site x")

        let cases: [(String, [UInt8], Int?, SiteDocumentRefusal)] = [
            ("oversized", huge, nil, .oversized),
            ("truncated against its announcement", Array(newer.prefix(newer.count - 20)), newer.count, .truncated),
            ("truncated, no announcement", Array(newer.prefix(newer.count - 20)), nil, .malformed),
            ("not JSON", Array("rooms = []".utf8), nil, .malformed),
            ("empty", [], nil, .malformed),
            ("a future envelope format", futureFormat.encoded(), nil, .unknownFormat),
            ("another practice's", signed(9, "site x", site: "praxis-nebenan"), nil, .otherSite),
            ("unsigned", unsigned.encoded(), nil, .unsigned),
            ("signed by another key", signed(9, "site x", by: thief), nil, .badSignature),
            ("body changed after signing", bodyChanged.encoded(), nil, .badSignature),
            ("version changed after signing", versionChanged.encoded(), nil, .badSignature),
            ("older", signed(4), nil, .older),
            ("well signed, not a site", signed(9, "rooms without a site"), nil, .unreadable),
        ]
        for (name, bytes, announced, expected) in cases {
            XCTAssertEqual(refusal(g.offer(bytes, from: "labor", announcedLength: announced)), expected, name)
            XCTAssertEqual(g.held?.version, 5, "\(name): the last good document stays")
            XCTAssertEqual(g.held?.encoded, good, name)
        }
        XCTAssertEqual(g.refusedTotal, cases.count)
        XCTAssertEqual(g.refusals[.malformed], 3)
        XCTAssertEqual(g.refusals[.badSignature], 3)
        // The good newer one is still taken afterwards.
        XCTAssertEqual(adopted(g.offer(newer, from: "labor", announcedLength: newer.count)), 9)
    }

    func testARefusedDocumentIsDescribedOnceWithItsReasonHoweverOftenItComes() {
        var g = gate()
        let forged = signed(3, "site x", by: AdministratorKey())
        var lines: [String] = []
        for _ in 0..<50 {
            if case .refuse(_, let describe?) = g.offer(forged, from: "labor") { lines.append(describe) }
        }
        XCTAssertEqual(g.refusals[.badSignature], 50, "each copy counted")
        XCTAssertEqual(lines.count, 1, "described once")
        XCTAssertTrue(lines[0].contains("badSignature") && lines[0].contains("labor"), lines[0])
        // What is described names no key material.
        XCTAssertFalse(lines[0].contains(Data(admin.verifier.publicKey).base64EncodedString()))
    }

    func testTwoDocumentsSignedUnderOneVersionConvergeOnTheSameOneWhicheverCameFirst() {
        let a = signed(7, "site a"), b = signed(7, "site b")
        var first = gate(), second = gate()
        _ = first.offer(a, from: "admin"); _ = first.offer(b, from: "empfang")
        _ = second.offer(b, from: "admin"); _ = second.offer(a, from: "empfang")
        XCTAssertEqual(first.held?.encoded, second.held?.encoded)
        XCTAssertEqual(first.held?.version, 7)
        // The one that came second and lost is refused; where it won, it replaced the first.
        XCTAssertEqual((first.refusals[.conflicting] ?? 0) + (second.refusals[.conflicting] ?? 0), 1)
    }

    func testKeyFilesAreWrittenTightAndTooOpenOrExistingFilesAreRefused() throws {
        let dir = NSTemporaryDirectory() + "site-keys-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let key = AdministratorKey()
        try key.write(to: dir + "/admin.key")
        try key.verifier.write(to: dir + "/admin.pub")
        let mode = try XCTUnwrap(FileManager.default.attributesOfItem(atPath: dir + "/admin.key")[.posixPermissions] as? Int)
        XCTAssertEqual(mode, 0o600)

        let read = try AdministratorKey(path: dir + "/admin.key")
        XCTAssertEqual(read.verifier, key.verifier)
        XCTAssertEqual(try SiteVerifier(path: dir + "/admin.pub"), key.verifier)
        XCTAssertEqual(key.verifier.fingerprint.count, 16)

        XCTAssertThrowsError(try key.write(to: dir + "/admin.key")) { error in
            XCTAssertTrue("\(error)".contains("exists already"), "\(error)")
        }
        chmod(dir + "/admin.key", 0o640)
        XCTAssertThrowsError(try AdministratorKey(path: dir + "/admin.key")) { error in
            XCTAssertTrue("\(error)".contains("too open"), "\(error)")
        }
        chmod(dir + "/admin.pub", 0o666)
        XCTAssertThrowsError(try SiteVerifier(path: dir + "/admin.pub")) { error in
            XCTAssertTrue("\(error)".contains("too open"), "\(error)")
        }
    }

    /// Re-keying (`KeyHandover`): a terminal that trusts the first key follows the handovers a
    /// document carries to the newest, refuses from then on what a retired key signs (on its own
    /// or with a fork of the chain), and a terminal set up with the newest key takes the same
    /// documents. Forged links and chains too long are refused by reason.
    func testTheAdministratorsKeyIsHandedOverAndARetiredOneSignsNothingMore() {
        let second = AdministratorKey(), third = AdministratorKey()
        let toSecond = KeyHandover(site: site, from: admin, to: second.verifier)
        let toThird = KeyHandover(site: site, from: second, to: third.verifier)
        func document(_ version: UInt64, by key: AdministratorKey, _ chain: [KeyHandover]) -> [UInt8] {
            SignedSiteDocument(site: site, version: version, body: Array("site v\(version)".utf8), signedWith: key, handovers: chain).encoded()
        }
        var g = gate()
        XCTAssertEqual(adopted(g.offer(signed(1), from: "admin")), 1)
        XCTAssertEqual(refusal(g.offer(signed(2, by: second), from: "admin")), .badSignature, "a new key without its handover")
        XCTAssertEqual(adopted(g.offer(document(2, by: second, [toSecond]), from: "admin")), 2)
        XCTAssertEqual(g.verifier, second.verifier, "the gate trusts the new key now")
        XCTAssertEqual(refusal(g.offer(signed(3), from: "thief")), .badSignature, "the retired key signs nothing more")
        let fork = KeyHandover(site: site, from: admin, to: AdministratorKey().verifier)
        XCTAssertEqual(refusal(g.offer(document(3, by: admin, [fork]), from: "thief")), .badSignature,
                       "a fork from the retired key leads nowhere the gate follows")
        XCTAssertEqual(refusal(g.offer(document(3, by: admin, [toSecond, fork]), from: "thief")), .badSignature,
                       "nor does one after the real handover")
        XCTAssertEqual(refusal(firstOffer(document(3, by: admin, [toSecond, fork]))), .badHandover,
                       "a terminal still on the first key sees the fork as a broken chain")
        XCTAssertEqual(adopted(g.offer(document(3, by: second, [toSecond]), from: "admin")), 3, "the new key needs no new handover")
        XCTAssertEqual(adopted(g.offer(document(4, by: third, [toSecond, toThird]), from: "admin")), 4, "a second re-keying")
        XCTAssertEqual(g.verifier, third.verifier)

        // A terminal that was off since the first key takes the newest document in one step; one
        // installed with the newest key takes it as well.
        var late = gate()
        XCTAssertEqual(adopted(late.offer(document(4, by: third, [toSecond, toThird]), from: "empfang")), 4)
        var fresh = SiteDocumentGate<String>(siteID: site, verifier: third.verifier) { .success(String(decoding: $0, as: UTF8.self)) }
        XCTAssertEqual(adopted(fresh.offer(document(4, by: third, [toSecond, toThird]), from: "empfang")), 4)

        // A link signed by the key it hands over to, a handover for another site, a chain too long.
        var forged = toSecond
        forged.signature = Data(second.sign(Array("anything".utf8)))
        XCTAssertEqual(refusal(firstOffer(document(2, by: second, [forged]))), .badHandover)
        let otherSite = KeyHandover(site: "another-practice", from: admin, to: second.verifier)
        XCTAssertEqual(refusal(firstOffer(document(2, by: second, [otherSite]))), .badHandover)
        var keys = [admin]
        var chain: [KeyHandover] = []
        for _ in 0...KeyHandover.maximumChain {
            let next = AdministratorKey()
            chain.append(KeyHandover(site: site, from: keys.last!, to: next.verifier))
            keys.append(next)
        }
        XCTAssertEqual(refusal(firstOffer(document(2, by: keys.last!, chain))), .badHandover, "\(chain.count) handovers")
        XCTAssertEqual(adopted(firstOffer(document(2, by: keys[KeyHandover.maximumChain], Array(chain.prefix(KeyHandover.maximumChain))))), 2,
                       "\(KeyHandover.maximumChain) handovers are taken")

        // A document from before re-keying reads as before: no handovers field at all.
        XCTAssertFalse(String(decoding: signed(1), as: UTF8.self).contains("handovers"))
    }
}
