import Crypto
import Foundation
import GRDB

/// Who may do what on the page and through the API.
public enum Role: String, Sendable, Codable, CaseIterable {
    /// Changes the site: rooms, buttons, notifications, terminals, accounts and tokens.
    case manager
    /// Reads everything and runs tests (loopback, test notification); changes nothing else.
    case technician
    /// Reads presence, calls and history.
    case viewer
}

/// A person who logs in to the page.
public struct Account: Sendable, Equatable, Codable {
    public var id: Int64
    public var name: String
    public var role: Role
}

/// An API token as the page lists it: never the token itself, which is shown once when made.
public struct APIToken: Sendable, Equatable, Codable {
    public var id: Int64
    public var name: String
    public var scopes: [TokenScope]
    public var createdBy: String
    public var createdAt: Double
    public var revokedAt: Double?
}

/// What a token may do: practice software sends notifications and reads presence; a monitoring
/// system reads status.
public enum TokenScope: String, Sendable, Codable, CaseIterable {
    case notify
    case calls
    case read
}

/// A version of the site document: who made it, when and how (`site.change`, `site.edit`,
/// `site.restore`, or `site.found` for one signed before the service knew it).
public struct SiteVersion: Sendable, Equatable, Codable {
    public var version: UInt64
    public var at: Double
    public var actor: String
    public var action: String
}

/// One line of the audit log: who did what, when.
public struct AuditEntry: Sendable, Equatable, Codable {
    public var id: Int64
    public var at: Double
    public var actor: String
    public var action: String
    public var detail: String
}

/// The site service's database: accounts, API tokens and the audit log in one SQLite file (mode
/// 0600), through GRDB. Every method is one transaction; GRDB's queue serialises writers.
public final class SiteDatabase: Sendable {
    private let queue: DatabaseQueue
    public let path: String

    public init(path: String) throws {
        self.path = path
        let existed = FileManager.default.fileExists(atPath: path)
        if !existed {
            // Created owner-only before SQLite writes anything into it.
            let fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw SiteServiceError.storage("\(path): \(String(cString: strerror(errno)))") }
            close(fd)
        }
        var configuration = Configuration()
        configuration.foreignKeysEnabled = true
        queue = try DatabaseQueue(path: path, configuration: configuration)
        try Self.migrator.migrate(queue)
    }

    private static var migrator: DatabaseMigrator {
        var m = DatabaseMigrator()
        m.registerMigration("v1") { db in
            try db.create(table: "account") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("name", .text).notNull().unique()
                t.column("role", .text).notNull()
                t.column("passwordHash", .text).notNull()
                t.column("createdAt", .double).notNull()
            }
            try db.create(table: "token") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("name", .text).notNull()
                t.column("scopes", .text).notNull()
                // SHA-256 of the token: a stolen database holds no usable token.
                t.column("hash", .blob).notNull().unique()
                t.column("createdBy", .text).notNull()
                t.column("createdAt", .double).notNull()
                t.column("revokedAt", .double)
            }
            try db.create(table: "audit") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("at", .double).notNull()
                t.column("actor", .text).notNull()
                t.column("action", .text).notNull()
                t.column("detail", .text).notNull()
            }
        }
        m.registerMigration("v2") { db in
            // Each version of the site document the service signed (or found signed), for undo.
            try db.create(table: "siteVersion") { t in
                t.primaryKey("version", .integer)
                t.column("at", .double).notNull()
                t.column("actor", .text).notNull()
                t.column("action", .text).notNull()
                t.column("text", .text).notNull()
            }
        }
        m.registerMigration("v3") { db in
            // When each room's terminal was last seen online (`LastSeen`).
            try db.create(table: "terminalSeen") { t in
                t.primaryKey("room", .text)
                t.column("at", .double).notNull()
            }
        }
        return m
    }

    // MARK: Terminals last seen

    /// Notes `rooms` as seen online at `now`.
    public func markSeen(_ rooms: [String], now: Double) throws {
        guard !rooms.isEmpty else { return }
        try queue.write { db in
            for room in rooms {
                try db.execute(sql: "INSERT INTO terminalSeen (room, at) VALUES (?, ?) ON CONFLICT(room) DO UPDATE SET at = excluded.at",
                               arguments: [room, now])
            }
        }
    }

    /// Room → when its terminal was last seen online (Unix time).
    public func lastSeen() throws -> [String: Double] {
        try queue.read { db in
            var out: [String: Double] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT room, at FROM terminalSeen") { out[row["room"]] = row["at"] }
            return out
        }
    }

    // MARK: Site versions

    /// Records a version of the site document and the audit line for it, in one transaction.
    public func recordSiteVersion(_ version: SiteVersion, text: String, detail: String) throws {
        try queue.write { db in
            try db.execute(sql: "INSERT OR REPLACE INTO siteVersion (version, at, actor, action, text) VALUES (?, ?, ?, ?, ?)",
                           arguments: [Int64(version.version), version.at, version.actor, version.action, text])
            try Self.audit(db, actor: version.actor, action: version.action, detail: detail, now: version.at)
        }
    }

    /// The versions known, newest first.
    public func siteVersions(limit: Int) throws -> [SiteVersion] {
        try queue.read { db in
            try Row.fetchAll(db, sql: "SELECT version, at, actor, action FROM siteVersion ORDER BY version DESC LIMIT ?", arguments: [limit]).map { row in
                SiteVersion(version: UInt64(row["version"] as Int64), at: row["at"], actor: row["actor"], action: row["action"])
            }
        }
    }

    /// The document's text at `version`, if the service knows it.
    public func siteText(version: UInt64) throws -> String? {
        guard let v = Int64(exactly: version) else { return nil }
        return try queue.read { db in try String.fetchOne(db, sql: "SELECT text FROM siteVersion WHERE version = ?", arguments: [v]) }
    }

    // MARK: Accounts

    @discardableResult
    public func addAccount(name: String, role: Role, password: String, by actor: String, now: Double) throws -> Account {
        guard AccountName.isValid(name) else { throw SiteServiceError.invalid("name", "1-64 letters, digits, '.', '-' or '_'") }
        // Counted in code points, as JSON Schema's minLength counts.
        guard password.unicodeScalars.count >= PasswordHash.minimumLength else {
            throw SiteServiceError.invalid("password", "at least \(PasswordHash.minimumLength) characters")
        }
        let hash = try PasswordHash.make(password)
        return try queue.write { db in
            guard try Row.fetchOne(db, sql: "SELECT 1 FROM account WHERE name = ?", arguments: [name]) == nil else {
                throw SiteServiceError.conflict("name", "an account \"\(name)\" exists")
            }
            try db.execute(sql: "INSERT INTO account (name, role, passwordHash, createdAt) VALUES (?, ?, ?, ?)",
                           arguments: [name, role.rawValue, hash, now])
            let account = Account(id: db.lastInsertedRowID, name: name, role: role)
            try Self.audit(db, actor: actor, action: "account.add", detail: "\(name) (\(role.rawValue))", now: now)
            return account
        }
    }

    /// The account whose name and password these are; nil for a wrong name or password alike.
    public func login(name: String, password: String) throws -> Account? {
        let row = try queue.read { db in
            try Row.fetchOne(db, sql: "SELECT id, name, role, passwordHash FROM account WHERE name = ?", arguments: [name])
        }
        guard let row else {
            // As slow as a wrong password: the time does not tell which names exist.
            _ = PasswordHash.verify(password, against: Self.decoy)
            return nil
        }
        guard PasswordHash.verify(password, against: row["passwordHash"]), let role = Role(rawValue: row["role"]) else { return nil }
        return Account(id: row["id"], name: row["name"], role: role)
    }

    private static let decoy = (try? PasswordHash.make("not a password of anyone's")) ?? ""

    public func accounts() throws -> [Account] {
        try queue.read { db in
            try Row.fetchAll(db, sql: "SELECT id, name, role FROM account ORDER BY name").compactMap { row in
                Role(rawValue: row["role"]).map { Account(id: row["id"], name: row["name"], role: $0) }
            }
        }
    }

    // MARK: Tokens

    /// Makes a token; the returned secret is shown once and kept only as its hash.
    public func createToken(name: String, scopes: [TokenScope], by actor: String, now: Double) throws -> (token: APIToken, secret: String) {
        guard (1...64).contains(name.unicodeScalars.count) else { throw SiteServiceError.invalid("name", "1-64 characters") }
        guard !scopes.isEmpty else { throw SiteServiceError.invalid("scopes", "at least one of \(TokenScope.allCases.map(\.rawValue).joined(separator: ", "))") }
        let secret = "ict_" + Self.randomSecret()
        let scopeText = scopes.map(\.rawValue).joined(separator: " ")
        return try queue.write { db in
            try db.execute(sql: "INSERT INTO token (name, scopes, hash, createdBy, createdAt) VALUES (?, ?, ?, ?, ?)",
                           arguments: [name, scopeText, Self.digest(secret), actor, now])
            let token = APIToken(id: db.lastInsertedRowID, name: name, scopes: scopes, createdBy: actor, createdAt: now, revokedAt: nil)
            try Self.audit(db, actor: actor, action: "token.create", detail: "\(name) [\(scopeText)]", now: now)
            return (token, secret)
        }
    }

    /// The live token this secret is, or nil.
    public func token(secret: String) throws -> APIToken? {
        try queue.read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM token WHERE hash = ? AND revokedAt IS NULL", arguments: [Self.digest(secret)]).map(Self.token)
        }
    }

    public func tokens() throws -> [APIToken] {
        try queue.read { db in try Row.fetchAll(db, sql: "SELECT * FROM token ORDER BY id").map(Self.token) }
    }

    /// Revokes a token; false when there is no live token with this id.
    public func revokeToken(id: Int64, by actor: String, now: Double) throws -> Bool {
        try queue.write { db in
            try db.execute(sql: "UPDATE token SET revokedAt = ? WHERE id = ? AND revokedAt IS NULL", arguments: [now, id])
            guard db.changesCount == 1 else { return false }
            try Self.audit(db, actor: actor, action: "token.revoke", detail: "token \(id)", now: now)
            return true
        }
    }

    private static func token(_ row: Row) -> APIToken {
        APIToken(id: row["id"], name: row["name"],
                 scopes: (row["scopes"] as String).split(separator: " ").compactMap { TokenScope(rawValue: String($0)) },
                 createdBy: row["createdBy"], createdAt: row["createdAt"], revokedAt: row["revokedAt"])
    }

    /// 256 random bits, base64url: token secrets, session ids, cross-site tokens.
    public static func randomSecret() -> String {
        SymmetricKey(size: .bits256).withUnsafeBytes { Data($0) }.base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    private static func digest(_ secret: String) -> Data { Data(SHA256.hash(data: Array(secret.utf8))) }

    // MARK: Audit

    /// Records something done or refused that is not a change of the database's own (a login, a
    /// refused request).
    public func audit(actor: String, action: String, detail: String, now: Double) throws {
        try queue.write { db in try Self.audit(db, actor: actor, action: action, detail: detail, now: now) }
    }

    /// The newest `limit` entries, newest first.
    public func auditLog(limit: Int) throws -> [AuditEntry] {
        try queue.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM audit ORDER BY id DESC LIMIT ?", arguments: [limit]).map { row in
                AuditEntry(id: row["id"], at: row["at"], actor: row["actor"], action: row["action"], detail: row["detail"])
            }
        }
    }

    private static func audit(_ db: Database, actor: String, action: String, detail: String, now: Double) throws {
        try db.execute(sql: "INSERT INTO audit (at, actor, action, detail) VALUES (?, ?, ?, ?)", arguments: [now, actor, action, detail])
    }
}

/// Account names: what a person types at the login, and what the audit log shows.
public enum AccountName {
    public static func isValid(_ name: String) -> Bool {
        // ASCII only: what every keyboard types and the audit log shows unambiguously.
        (1...64).contains(name.utf8.count) && name.utf8.allSatisfy { c in
            (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c == 46 || c == 45 || c == 95
        }
    }
}

/// The site service's one error type: what the API answers as a problem document (RFC 9457).
public enum SiteServiceError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A field of the request is not acceptable: its name and what it must be.
    case invalid(String, String)
    /// A field names something that exists already.
    case conflict(String, String)
    case storage(String)

    public var description: String {
        switch self {
        case .invalid(let field, let what): "\(field): must be \(what)"
        case .conflict(let field, let what): "\(field): \(what)"
        case .storage(let what): what
        }
    }
}
