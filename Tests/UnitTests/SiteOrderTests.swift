import Posix
import SiteSecurity
import XCTest

/// The administrator's orders to one terminal: only the site's key signs one, it is good at one
/// site and one room, only while fresh, and only once.
final class SiteOrderTests: XCTestCase {
    private let key = AdministratorKey()
    private let now = 1_800_000_000.0

    private func order(_ action: SiteOrder.Action = .loopback, room: String = "labor", site: String = "praxis",
                       at: Double? = nil, nonce: String? = nil) -> SiteOrder {
        SiteOrder(site: site, room: room, action: action, issuedAt: at ?? now, nonce: nonce ?? SiteOrder.newNonce())
    }

    func testASignedOrderOpensUnderItsKeyAndNoOther() {
        let o = order()
        let signed = SignedSiteOrder.sign(o, with: key)
        XCTAssertEqual(try SignedSiteOrder.open(signed, verifier: key.verifier).get(), o)
        XCTAssertEqual(SignedSiteOrder.open(signed, verifier: AdministratorKey().verifier).failureValue, .badSignature, "another site's key")
        var tampered = signed
        if let i = tampered.firstIndex(of: UInt8(ascii: "l")) { tampered[i] = UInt8(ascii: "L") }  // one letter of the body
        XCTAssertEqual(SignedSiteOrder.open(tampered, verifier: key.verifier).failureValue, .badSignature, "a changed body")
        XCTAssertEqual(SignedSiteOrder.open(Array(signed.suffix(64)), verifier: key.verifier).failureValue, .malformed, "a signature alone")
        XCTAssertEqual(SignedSiteOrder.open(signed + [UInt8](repeating: 0, count: 4096), verifier: key.verifier).failureValue, .malformed)
        // Well signed, but not an order.
        let junk = Array("not json".utf8)
        XCTAssertEqual(SignedSiteOrder.open(junk + key.sign(Array("intercomd site order v1\0".utf8) + junk), verifier: key.verifier).failureValue, .malformed)
        XCTAssertEqual(SiteOrder.newNonce().count, 32)
        XCTAssertNotEqual(SiteOrder.newNonce(), SiteOrder.newNonce())
    }

    func testAnOrderIsTakenForItsSiteAndRoomWhileFreshAndOnce() {
        var guardian = SiteOrderGuard(site: "praxis", room: "labor")
        let o = order(nonce: "a1")
        XCTAssertEqual(try guardian.take(o, now: now + 3).get(), o)
        XCTAssertEqual(guardian.take(o, now: now + 4).failureValue, .replayed, "the same order again")
        XCTAssertEqual(guardian.take(order(.loopbackResult, nonce: "a1"), now: now + 4).failureValue, .replayed, "the same nonce, whatever it says")
        XCTAssertEqual(guardian.take(order(room: "empfang"), now: now).failureValue, .otherRoom)
        XCTAssertEqual(guardian.take(order(site: "nachbarpraxis"), now: now).failureValue, .otherSite)
        let limit = SiteOrderGuard.maximumAge
        XCTAssertEqual(guardian.take(order(at: now - limit - 1), now: now).failureValue, .stale, "too old")
        XCTAssertEqual(guardian.take(order(at: now + limit + 1), now: now).failureValue, .stale, "from the future")
        XCTAssertNoThrow(try guardian.take(order(at: now - limit + 1), now: now).get())
        XCTAssertNoThrow(try guardian.take(order(at: now + limit - 1), now: now).get())
        // Once stale, an order is refused as such: its nonce need not be kept.
        XCTAssertEqual(guardian.take(o, now: now + limit + 10).failureValue, .stale)
    }

    /// A history reply opens only with the one-time key the order named, and only for that order.
    func testAReplySealedToTheOrdersKeyOpensWithThatKeyAloneAndForThatOrderAlone() throws {
        let oneTime = OrderReplySeal.OneTimeKey()
        let o = SiteOrder(site: "praxis", room: "labor", action: .history, issuedAt: now, replyKey: oneTime.publicKeyBase64)
        let reply = Array(#"{"result":{"entries":[],"notifications":[]}}"#.utf8)
        let sealed = try XCTUnwrap(OrderReplySeal.seal(reply, for: o))
        XCTAssertNil(sealed.firstRange(of: Array("entries".utf8)), "nothing of it readable on the wire")
        XCTAssertEqual(OrderReplySeal.open(sealed, with: oneTime, for: o), reply)
        XCTAssertNil(OrderReplySeal.open(sealed, with: OrderReplySeal.OneTimeKey(), for: o), "another key")
        var other = o
        other.nonce = SiteOrder.newNonce()
        XCTAssertNil(OrderReplySeal.open(sealed, with: oneTime, for: other), "bound to its order's nonce")
        var tampered = sealed
        tampered[tampered.count - 1] ^= 1
        XCTAssertNil(OrderReplySeal.open(tampered, with: oneTime, for: o))
        XCTAssertNil(OrderReplySeal.seal(reply, for: order()), "an order naming no key gets nothing sealed")
        var bad = o
        bad.replyKey = "not a key"
        XCTAssertNil(OrderReplySeal.seal(reply, for: bad))
        // The key is in what the administrator signed: a changed key breaks the signature.
        let signed = SignedSiteOrder.sign(o, with: key)
        XCTAssertEqual(try SignedSiteOrder.open(signed, verifier: key.verifier).get().replyKey, oneTime.publicKeyBase64)
    }

    func testAFloodOfOrdersKeepsMemoryBoundedAndRefusesEveryReplayWhileFresh() {
        var guardian = SiteOrderGuard(site: "praxis", room: "labor")
        let orders = (0..<SiteOrderGuard.capacity).map { order(nonce: "n\($0)") }
        for o in orders { XCTAssertNoThrow(try guardian.take(o, now: now).get()) }
        for o in orders { XCTAssertEqual(guardian.take(o, now: now).failureValue, .replayed) }
        // One more: the oldest nonce makes room (a real site gives a few orders a minute).
        XCTAssertNoThrow(try guardian.take(order(nonce: "more"), now: now).get())
        XCTAssertEqual(guardian.take(orders[1], now: now).failureValue, .replayed)
    }
}
