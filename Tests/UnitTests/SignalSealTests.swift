import Foundation
import SiteSecurity
import XCTest

/// Signalling sealed with keys from the site key: only an authentic, fresh, first copy opens.
final class SignalSealTests: XCTestCase {
    private let key = try! SiteKey(bytes: Array(repeating: 7, count: 32))
    private let rooms: Set<String> = ["empfang", "labor", "kueche"]

    /// A clock the test moves.
    final class Clock: @unchecked Sendable {
        var now: UInt64 = 1_790_000_000_000_000
        var read: @Sendable () -> UInt64 { { [self] in now } }
    }

    private func pair(_ clock: Clock) -> (empfang: SignalSeal, labor: SignalSeal) {
        (SignalSeal(siteKey: key, room: "empfang", knownRooms: rooms, clock: clock.read),
         SignalSeal(siteKey: key, room: "labor", knownRooms: rooms, clock: clock.read))
    }

    func testASealedDatagramOpensOnceAtTheOtherRoomAndIsNotReadableOnTheWay() throws {
        let clock = Clock()
        let (a, b) = pair(clock)
        let message = Array("IC invite to labor".utf8)
        let sealed = a.seal(message, for: .room("labor"))
        XCTAssertEqual(sealed.count, message.count + SignalSeal.overhead + "empfang".utf8.count)
        XCTAssertNil(sealed.firstRange(of: Array("invite".utf8)), "encrypted, not only signed")
        let opened = try b.open(sealed).get()
        XCTAssertEqual(opened.sender, "empfang")
        XCTAssertEqual(opened.plaintext, message)
        XCTAssertEqual(b.open(sealed).failure, .replay, "the same datagram again")
    }

    func testChangedWrongKeyUnknownSenderAndPlainDatagramsAreRefused() {
        let clock = Clock()
        let (a, b) = pair(clock)
        let sealed = a.seal(Array("hello".utf8), for: .room("labor"))
        // The scope, the counter, the ciphertext, the tag (a changed sender id names another room:
        // unknown or another key).
        for i in [3, 5 + 7, 5 + 7 + 7, sealed.count / 2 + 5, sealed.count - 1] {
            var bent = sealed
            bent[i] ^= 0x01
            XCTAssertEqual(b.open(bent).failure, .authentication, "byte \(i) changed")
        }
        let other = SignalSeal(siteKey: try! SiteKey(bytes: Array(repeating: 8, count: 32)), room: "empfang",
                               knownRooms: rooms, clock: clock.read)
        XCTAssertEqual(b.open(other.seal(Array("hello".utf8), for: .room("labor"))).failure, .authentication, "another site's key")
        let stranger = SignalSeal(siteKey: key, room: "keller", knownRooms: rooms, clock: clock.read)
        XCTAssertEqual(b.open(stranger.seal([1], for: .room("labor"))).failure, .unknownSender, "not in the directory")
        XCTAssertEqual(a.open(a.seal([1], for: .room("labor"))).failure, .unknownSender, "this room itself")
        XCTAssertEqual(b.open(Array("IC\u{1}plain".utf8)).failure, .notSealed)
        var v1 = sealed
        v1[2] = 1
        XCTAssertEqual(b.open(v1).failure, .malformed, "the version before the recipient was sealed with it")
        XCTAssertEqual(b.open(Array(sealed.prefix(20))).failure, .malformed)
    }

    func testReorderedDatagramsOpenOnceAndOldOnesAreReplays() throws {
        let clock = Clock()
        let (a, b) = pair(clock)
        let burst = (0..<70).map { a.seal([UInt8($0)], for: .room("labor")) }  // one clock tick: counters +1 each
        XCTAssertNoThrow(try b.open(burst[69]).get())
        XCTAssertNoThrow(try b.open(burst[10]).get(), "59 behind: inside the window")
        XCTAssertEqual(b.open(burst[10]).failure, .replay)
        XCTAssertEqual(b.open(burst[5]).failure, .replay, "64 behind: outside the window")
    }

    func testAFirstDatagramMustBeFreshAndARestartedSenderIsAccepted() throws {
        let clock = Clock()
        let (a, b) = pair(clock)
        let old = a.seal([1], for: .room("labor"))
        clock.now += 61_000_000
        let receiverAfterRestart = SignalSeal(siteKey: key, room: "labor", knownRooms: rooms, clock: clock.read)
        XCTAssertEqual(receiverAfterRestart.open(old).failure, .stale, "a replay 61 s old after the receiver restarted")
        XCTAssertNoThrow(try b.open(a.seal([2], for: .room("labor"))).get())
        clock.now += 1_000_000  // the sender takes a second to restart
        let senderAfterRestart = SignalSeal(siteKey: key, room: "empfang", knownRooms: rooms, clock: clock.read)
        XCTAssertNoThrow(try b.open(senderAfterRestart.seal([3], for: .room("labor"))).get(), "its counter went on rising with the clock")
    }

    func testAKeyFileMustBeLongEnoughAndPrivate() throws {
        let path = NSTemporaryDirectory() + "site-\(UUID().uuidString.prefix(8)).key"
        defer { unlink(path) }
        try Data(Array(repeating: 1, count: 32)).base64EncodedString().write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o644)
        XCTAssertThrowsError(try SiteKey(path: path)) { XCTAssertTrue("\($0)".contains("readable by every user"), "\($0)") }
        chmod(path, 0o640)
        XCTAssertNoThrow(try SiteKey(path: path))
        try Data(Array(repeating: 1, count: 16)).base64EncodedString().write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o600)
        XCTAssertThrowsError(try SiteKey(path: path)) { XCTAssertTrue("\($0)".contains("at least 32"), "\($0)") }
        XCTAssertThrowsError(try SiteKey(path: path + ".missing"))
    }

    /// A datagram sealed for one room opens there only: taken on its way and sent to another
    /// room, it fails authentication. One sealed for every room (a hello) opens at each, once.
    func testADatagramSealedForOneRoomDoesNotOpenAtAnotherAndOneForEveryRoomOpensAtEach() throws {
        let clock = Clock()
        let (a, b) = pair(clock)
        let kueche = SignalSeal(siteKey: key, room: "kueche", knownRooms: rooms, clock: clock.read)
        let invite = a.seal(Array("IC invite to labor".utf8), for: .room("labor"))
        XCTAssertEqual(kueche.open(invite).failure, .authentication, "redirected to another room")
        let opened = try b.open(invite).get()
        XCTAssertFalse(opened.forEveryRoom)
        let hello = a.seal(Array("IC hello".utf8), for: .everyRoom)
        XCTAssertEqual(hello.count, invite.count - "IC invite to labor".utf8.count + "IC hello".utf8.count)
        for receiver in [b, kueche] {
            let h = try receiver.open(hello).get()
            XCTAssertTrue(h.forEveryRoom)
            XCTAssertEqual(h.plaintext, Array("IC hello".utf8))
            XCTAssertEqual(receiver.open(hello).failure, .replay)
        }
        var narrowed = hello
        narrowed[3] = 0
        XCTAssertEqual(kueche.open(narrowed).failure, .authentication, "the scope is authenticated")
    }
}

private extension Result {
    var failure: Failure? { if case .failure(let f) = self { f } else { nil } }
}
