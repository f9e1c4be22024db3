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
}
