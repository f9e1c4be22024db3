import Foundation
import Glibc
@testable import SiteService
import XCTest

/// The site service's parts without the network: passwords, the database, the login limit.
final class SiteServiceTests: XCTestCase {
    private var dir = ""

    override func setUpWithError() throws {
        dir = NSTemporaryDirectory() + "site-service-\(getpid())-\(UInt32.random(in: .min ... .max))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(atPath: dir) }

    func testPasswordsAreSaltedScryptHashesAndOnlyTheRightOneFits() throws {
        let a = try PasswordHash.make("Empfang-2026!")
        let b = try PasswordHash.make("Empfang-2026!")
        XCTAssertNotEqual(a, b, "salted: the same password hashes differently")
        XCTAssertTrue(a.hasPrefix("scrypt$15$8$1$"), a)
        XCTAssertTrue(PasswordHash.verify("Empfang-2026!", against: a))
        XCTAssertFalse(PasswordHash.verify("Empfang-2026?", against: a))
        XCTAssertFalse(PasswordHash.verify("Empfang-2026!", against: "scrypt$15$8$1$AAAA$BBBB"), "not a hash of ours")
        XCTAssertFalse(PasswordHash.verify("x", against: "scrypt$40$8$1$AAAA$BBBB"), "a cost out of bounds is refused, not computed")
        XCTAssertFalse(PasswordHash.verify("x", against: ""))
    }

    func testAccountsTokensAndTheAuditLogLiveInOnePrivateFile() throws {
        let path = dir + "/site.sqlite"
        let db = try SiteDatabase(path: path)
        var st = stat()
        XCTAssertEqual(stat(path, &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o600, "owner only")
        let anna = try db.addAccount(name: "anna", role: .manager, password: "correct horse", by: "test", now: 100)
        XCTAssertEqual(try db.login(name: "anna", password: "correct horse"), anna)
        XCTAssertNil(try db.login(name: "anna", password: "correct horsE"))
        XCTAssertNil(try db.login(name: "otto", password: "correct horse"))
        XCTAssertThrowsError(try db.addAccount(name: "anna", role: .viewer, password: "another one!", by: "test", now: 101)) { error in
            XCTAssertEqual(error as? SiteServiceError, .conflict("name", "an account \"anna\" exists"))
        }
        XCTAssertThrowsError(try db.addAccount(name: "bert", role: .viewer, password: "short", by: "test", now: 101)) { error in
            XCTAssertEqual(error as? SiteServiceError, .invalid("password", "at least 10 characters"))
        }
        XCTAssertThrowsError(try db.addAccount(name: "a b", role: .viewer, password: "long enough!", by: "test", now: 101))

        let made = try db.createToken(name: "Praxissoftware", scopes: [.notify, .read], by: "anna", now: 102)
        XCTAssertEqual(try db.token(secret: made.secret), made.token)
        XCTAssertNil(try db.token(secret: made.secret + "x"))
        XCTAssertTrue(try db.revokeToken(id: made.token.id, by: "anna", now: 103))
        XCTAssertFalse(try db.revokeToken(id: made.token.id, by: "anna", now: 104), "once")
        XCTAssertNil(try db.token(secret: made.secret), "revoked")
        XCTAssertEqual(try db.tokens().first?.revokedAt, 103)

        // The file holds neither a password nor a token: only their hashes.
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        XCTAssertNil(bytes.range(of: Data("correct horse".utf8)))
        XCTAssertNil(bytes.range(of: Data(made.secret.utf8)))

        XCTAssertEqual(try db.auditLog(limit: 10).map(\.action), ["token.revoke", "token.create", "account.add"])
        // Reopened: the same.
        XCTAssertEqual(try SiteDatabase(path: path).accounts(), [anna])
    }

    /// Five failed logins a minute per address, then none until the oldest is a minute old.
    func testFailedLoginsAreLimitedPerAddress() {
        var limit = LoginLimiter(allowed: 5, window: 60)
        for i in 0..<5 {
            XCTAssertTrue(limit.mayTry("10.0.0.5", now: Double(i)))
            limit.failed("10.0.0.5", now: Double(i))
        }
        XCTAssertFalse(limit.mayTry("10.0.0.5", now: 10))
        XCTAssertTrue(limit.mayTry("10.0.0.6", now: 10), "another address is not held up")
        XCTAssertFalse(limit.mayTry("10.0.0.5", now: 59.9))
        XCTAssertTrue(limit.mayTry("10.0.0.5", now: 60.5), "the oldest failure is a minute old")
        XCTAssertEqual(limit.refused, 2)
        limit.failed("10.0.0.5", now: 61)
        limit.succeeded("10.0.0.5")
        XCTAssertTrue(limit.mayTry("10.0.0.5", now: 62))
    }
}
