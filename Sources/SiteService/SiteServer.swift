import Calls
import Control
import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import HummingbirdWebSocket
import Logging
import SiteAdmin
import NIOCore
import Synchronization

/// The site service's HTTPS server: the API under `/api/v1` (docs/api.md). Each route is a small
/// handler taking and giving one Codable type through `Wire`; refusals are `Problem`s.
public final class SiteServer: Sendable {
    public let database: SiteDatabase
    public let editor: SiteEditor
    private let sessions = Mutex<[String: (account: Account, csrf: String, expires: Double)]>([:])
    private let limiter = Mutex(LoginLimiter.standard)
    /// A session lasts this long after login (seconds): a working day.
    public static let sessionLifetime = 12 * 3600.0
    /// The largest request body taken; a site document's text (`PUT /site`) may be larger.
    public static let maxBody = 64 * 1024
    public static let sessionCookie = "intercom_session"
    /// Seconds from connecting to the end of the first request's head (TLS handshake included).
    public static let firstRequestTimeout: Int64 = 10
    /// Seconds a connection may send nothing between requests before it is closed.
    public static let idleTimeout: Int64 = 30

    /// The terminal the service sends notifications and sees the site through; nil: none set.
    public let member: SiteMember?
    /// Notification previews for the page (espeak-ng's voice kept between them).
    let previewSounds = PreviewSounds()

    public init(database: SiteDatabase, editor: SiteEditor, member: SiteMember? = nil) {
        self.database = database
        self.editor = editor
        self.member = member
    }

    private static func now() -> Double { Date().timeIntervalSince1970 }

    // MARK: Wire types of the API

    public struct Health: Codable, Sendable { public var status: String; public var software: String }
    public struct Login: Codable, Sendable { public var name: String; public var password: String }
    public struct SessionInfo: Codable, Sendable, Equatable {
        public var name: String
        public var role: Role?
        public var scopes: [TokenScope]?
        /// Sent back in `X-CSRF-Token` with every change made under the session cookie.
        public var csrfToken: String?
    }
    public struct NewToken: Codable, Sendable { public var name: String; public var scopes: [TokenScope] }
    public struct CreatedToken: Codable, Sendable { public var token: APIToken; public var secret: String }
    public struct NewAccount: Codable, Sendable { public var name: String; public var role: Role; public var password: String }
    public struct List<T: Codable & Sendable>: Codable, Sendable { public var items: [T] }

    // MARK: Routes

    public func router() -> Router<SiteContext> {
        let router = Router(context: SiteContext.self)
        router.add(middleware: ProblemMiddleware())
        router.add(middleware: Authenticator(server: self))
        // The page: three files of our own, built in; nothing is fetched from elsewhere.
        for (path, bytes, type) in [("/", PackageResources.index_html, "text/html; charset=utf-8"),
                                    ("/app.js", PackageResources.app_js, "text/javascript; charset=utf-8"),
                                    ("/app.css", PackageResources.app_css, "text/css; charset=utf-8")] {
            router.get(RouterPath(path)) { _, _ in
                Response(status: .ok, headers: Self.pageHeaders(type), body: .init(byteBuffer: .init(bytes: bytes)))
            }
        }
        let api = router.group("api/v1")
        api.get("health") { _, _ in try Self.json(Health(status: "ok", software: Software.version)) }
        // The document is kept in the repository (Sources/SiteService/Resources) and built in.
        api.get("openapi.yaml") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/yaml"], body: .init(byteBuffer: .init(bytes: PackageResources.openapi_yaml)))
        }
        api.post("session") { request, context in try await self.login(request, context) }
        api.get("session") { _, context in
            switch try Self.who(context) {
            case .person(let a, _, let csrf): try Self.json(SessionInfo(name: a.name, role: a.role, csrfToken: csrf))
            case .software(let t): try Self.json(SessionInfo(name: t.name, scopes: t.scopes))
            }
        }
        api.delete("session") { _, context in
            guard case .person(_, let id, _) = try Self.who(context) else { throw Problem.forbidden("a token has no session") }
            _ = self.sessions.withLock { $0.removeValue(forKey: id) }
            var response = Response(status: .noContent)
            response.setCookie(.init(name: Self.sessionCookie, value: "", maxAge: 0, path: "/", secure: true, httpOnly: true, sameSite: .strict))
            return response
        }
        api.get("accounts") { _, context in
            try self.require(context, .manager)
            return try Self.json(List(items: try self.database.accounts()))
        }
        api.post("accounts") { request, context in
            let who = try self.require(context, .manager)
            let new = try await Self.decode(NewAccount.self, request)
            do {
                return try Self.json(try self.database.addAccount(name: new.name, role: new.role, password: new.password, by: who.actor, now: Self.now()),
                                     status: .created)
            } catch let error as SiteServiceError { throw Problem(error) }
        }
        api.get("tokens") { _, context in
            try self.require(context, .manager)
            return try Self.json(List(items: try self.database.tokens()))
        }
        api.post("tokens") { request, context in
            let who = try self.require(context, .manager)
            let new = try await Self.decode(NewToken.self, request)
            do {
                let made = try self.database.createToken(name: new.name, scopes: new.scopes, by: who.actor, now: Self.now())
                return try Self.json(CreatedToken(token: made.token, secret: made.secret), status: .created)
            } catch let error as SiteServiceError { throw Problem(error) }
        }
        api.delete("tokens/:id") { _, context in
            let who = try self.require(context, .manager)
            guard let id = context.parameters.get("id").flatMap(Int64.init) else { throw Problem.badInput("id", "\"id\" must be a token's number") }
            guard try self.database.revokeToken(id: id, by: who.actor, now: Self.now()) else { throw Problem.notFound("no live token \(id)") }
            return Response(status: .noContent)
        }
        api.get("audit") { request, context in
            try self.require(context, .manager, .technician)
            return try Self.json(List(items: try self.database.auditLog(limit: try Self.limit(request))))
        }
        api.get("site") { _, context in
            try self.require(context, .manager, .technician, .viewer, scope: .read)
            return try Self.json(try await self.editor.view())
        }
        api.put("site") { request, context in
            let who = try self.require(context, .manager)
            let body = try await Self.decode(SiteEditor.NewText.self, request, limit: SiteEditor.maxText)
            return try Self.json(try await self.editor.change(base: body.version, text: body.text, dryRun: try Self.dryRun(request),
                                                              actor: who.actor, action: "site.change"))
        }
        api.patch("site") { request, context in
            let who = try self.require(context, .manager)
            let body = try await Self.decode(SiteEditor.Edits.self, request)
            return try Self.json(try await self.editor.edit(base: body.version, edits: body.edits, dryRun: try Self.dryRun(request), actor: who.actor))
        }
        api.get("site/versions") { request, context in
            try self.require(context, .manager, .technician)
            return try Self.json(List(items: try await self.editor.versions(limit: try Self.limit(request))))
        }
        api.post("site/versions/:version/restore") { request, context in
            let who = try self.require(context, .manager)
            guard let version = context.parameters.get("version").flatMap(UInt64.init) else {
                throw Problem.badInput("version", "\"version\" must be a version number")
            }
            return try Self.json(try await self.editor.restore(version: version, dryRun: try Self.dryRun(request), actor: who.actor))
        }
        api.get("terminals") { _, context in
            try self.require(context, .manager, .technician, .viewer, scope: .read)
            return try Self.json(List(items: try await self.terminals().rows))
        }
        // The same rows for Prometheus (docs/metrics.md), behind a token with read.
        api.get("metrics") { _, context in
            try self.require(context, .manager, .technician, .viewer, scope: .read)
            async let held = self.editor.view()
            let (rows, heard) = try await self.terminals()
            let view = try await held
            let text = SiteMetrics.exposition(site: view.site, version: view.version, terminals: rows, memberConnected: heard)
            return Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"], body: .init(byteBuffer: .init(bytes: text)))
        }
        api.post("terminals/:room/approve") { request, context in
            let who = try self.require(context, .manager)
            let body = try await Self.decode(SiteEditor.Approval.self, request)
            return try Self.json(try await self.editor.approve(room: context.parameters.get("room") ?? "", code: body.code, actor: who.actor))
        }
        api.post("terminals/:room/revoke") { _, context in
            let who = try self.require(context, .manager)
            return try Self.json(try await self.editor.revoke(room: context.parameters.get("room") ?? "", actor: who.actor))
        }
        // A terminal's device loopback test from the page: started by a manager or technician (a
        // chirp sounds in that room, so only while no call runs there), its state and plot for
        // anyone who may read. The service signs an order for that terminal alone (`SiteOrder`).
        api.post("terminals/:room/loopback") { _, context in
            let who = try self.require(context, .manager, .technician)
            let room = context.parameters.get("room") ?? ""
            let reply = try await self.editor.order(.loopback, room: room)
            try? self.database.audit(actor: who.actor, action: "terminal.loopback", detail: room, now: Date().timeIntervalSince1970)
            return try Self.json(try TerminalLoopback(room: room, reply), status: .accepted)
        }
        api.get("terminals/:room/loopback") { _, context in
            try self.require(context, .manager, .technician, .viewer, scope: .read)
            let room = context.parameters.get("room") ?? ""
            return try Self.json(try TerminalLoopback(room: room, try await self.editor.order(.loopbackResult, room: room)))
        }
        // The whole site's history, every terminal's made one (the member's alone: GET /history).
        api.get("history/site") { request, context in
            try self.require(context, .manager, .technician, .viewer, scope: .read)
            return try Self.json(try await self.editor.siteHistory(limit: try Self.limit(request)))
        }
        // The plot alone, as an image: the page shows it in an <img>, where an SVG runs nothing.
        api.get("terminals/:room/loopback/plot") { _, context in
            try self.require(context, .manager, .technician, .viewer, scope: .read)
            let room = context.parameters.get("room") ?? ""
            guard let plot = try TerminalLoopback(room: room, try await self.editor.order(.loopbackResult, room: room)).plot else {
                throw Problem.notFound("\(room) has no finished loopback test to plot")
            }
            return Response(status: .ok, headers: [.contentType: "image/svg+xml", .cacheControl: "no-store"],
                            body: .init(byteBuffer: .init(string: plot)))
        }
        addSignalling(to: api)
        addPreview(to: api)
        return router
    }

    /// Every room's terminal, asked at once, with the member's view of it and when it was last
    /// seen; `heard`: the member answered.
    private func terminals() async throws -> (rows: [SiteEditor.Terminal], heard: Bool) {
        async let listed = editor.terminals()
        async let heard = try? await member?.run(.site)
        var terminals = try await listed
        let overview: SiteOverview? = if case .site(let o)? = await heard { o } else { nil }
        let seen = (try? database.lastSeen()) ?? [:]
        let now = Self.now()
        for i in terminals.indices {
            terminals[i].add(overview?.terminals.first { $0.room == terminals[i].room }, lastSeen: seen[terminals[i].room], now: now)
        }
        return (terminals, overview != nil)
    }

    /// The page's own files only (and the previews it makes into blobs to play), never framed,
    /// never sniffed as another type.
    private static func pageHeaders(_ type: String) -> HTTPFields {
        [.contentType: type, .contentSecurityPolicy: "default-src 'self'; media-src blob:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
         HTTPField.Name("X-Content-Type-Options")!: "nosniff", .cacheControl: "no-cache"]
    }

    /// `?dry_run=true`: plan and check only.
    private static func dryRun(_ request: Request) throws -> Bool {
        switch request.uri.queryParameters.get("dry_run") {
        case nil, "false": false
        case "true": true
        default: throw Problem.badInput("dry_run", "\"dry_run\" must be true or false")
        }
    }

    /// `?limit=N`, 1...10000, 100 when absent.
    static func limit(_ request: Request) throws -> Int {
        let limit = request.uri.queryParameters.get("limit").map { Int($0) } ?? 100
        guard let limit, (1...10_000).contains(limit) else { throw Problem.badInput("limit", "\"limit\" must be an integer, 1...10000") }
        return limit
    }

    private func login(_ request: Request, _ context: SiteContext) async throws -> Response {
        let now = Self.now()
        let peer = context.peer
        guard limiter.withLock({ $0.mayTry(peer, now: now) }) else {
            try database.audit(actor: "?", action: "login.limited", detail: peer, now: now)
            throw Problem.tooManyLogins
        }
        let login = try await Self.decode(Login.self, request)
        guard let account = try database.login(name: login.name, password: login.password) else {
            limiter.withLock { $0.failed(peer, now: now) }
            try database.audit(actor: login.name.prefix(64).description, action: "login.refused", detail: peer, now: now)
            throw Problem(.unauthorized, "wrong-login", "Wrong name or password", detail: "the name or the password is wrong")
        }
        limiter.withLock { $0.succeeded(peer) }
        let id = SiteDatabase.randomSecret(), csrf = SiteDatabase.randomSecret()
        sessions.withLock { s in
            s = s.filter { $0.value.expires > now }
            s[id] = (account, csrf, now + Self.sessionLifetime)
        }
        try database.audit(actor: account.name, action: "login", detail: peer, now: now)
        var response = try Self.json(SessionInfo(name: account.name, role: account.role, csrfToken: csrf))
        response.setCookie(.init(name: Self.sessionCookie, value: id, maxAge: Int(Self.sessionLifetime), path: "/", secure: true,
                                 httpOnly: true, sameSite: .strict))
        return response
    }

    /// The session a cookie names, if live.
    func session(_ id: String, now: Double) -> Identity? {
        sessions.withLock { s in
            guard let found = s[id], found.expires > now else { return nil }
            return .person(found.account, session: id, csrf: found.csrf)
        }
    }

    /// Logins refused by the limit since start (the audit log has each, and every other refusal).
    public var refusedLogins: Int { limiter.withLock { $0.refused } }

    // MARK: Helpers

    private static func who(_ context: SiteContext) throws -> Identity {
        guard let identity = context.identity else { throw Problem.unauthenticated }
        return identity
    }

    /// A person with one of `roles`, or a token with `scope` (never without one: the page's
    /// functions are people's). The refusal is written to the audit log.
    @discardableResult
    func require(_ context: SiteContext, _ roles: Role..., scope: TokenScope? = nil) throws -> Identity {
        let identity = try Self.who(context)
        guard Self.may(identity, roles, scope: scope) else {
            try? database.audit(actor: identity.actor, action: "refused", detail: context.endpointPath ?? "?", now: Self.now())
            let needs = roles.map(\.rawValue) + (scope.map { ["a token with scope \($0.rawValue)"] } ?? [])
            throw Problem.forbidden("\(identity.actor) may not do this (needs \(needs.joined(separator: " or ")))")
        }
        return identity
    }

    static func may(_ identity: Identity, _ roles: [Role], scope: TokenScope?) -> Bool {
        switch identity {
        case .person(let account, _, _): roles.contains(account.role)
        case .software(let token): scope.map(token.scopes.contains) ?? false
        }
    }

    /// A browser's cross-origin request (its `Origin` is not this host) is refused: another
    /// site's page cannot read the events with the manager's cookie. Software sends no `Origin`.
    static func sameOrigin(_ request: Request) -> Bool {
        guard let origin = request.headers[.origin] else { return true }
        guard let host = URL(string: origin)?.host, let authority = request.head.authority else { return false }
        let ours = authority.hasPrefix("[") ? String(authority.prefix { $0 != "]" }.dropFirst()) : String(authority.prefix { $0 != ":" })
        return host == ours
    }

    static func decode<T: Decodable>(_ type: T.Type, _ request: Request, limit: Int = maxBody) async throws -> T {
        try parse(T.self, try await collect(request, limit: limit))
    }

    /// A body that may be left out (an empty one reads as nil).
    static func decodeIfSent<T: Decodable>(_ type: T.Type, _ request: Request) async throws -> T? {
        let body = try await collect(request, limit: maxBody)
        return body.readableBytes == 0 ? nil : try parse(T.self, body)
    }

    private static func collect(_ request: Request, limit: Int) async throws -> ByteBuffer {
        do {
            return try await request.body.collect(upTo: limit)
        } catch {
            throw Problem(.contentTooLarge, "too-large", "The request is too large", detail: "at most \(limit) bytes")
        }
    }

    private static func parse<T: Decodable>(_ type: T.Type, _ body: ByteBuffer) throws -> T {
        do {
            return try Wire.decode(T.self, from: body.readableBytesView)
        } catch {
            throw Problem.badInput(Wire.field(of: error), Wire.describe(error))
        }
    }

    static func json(_ value: some Encodable, status: HTTPResponse.Status = .ok) throws -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: .init(bytes: try Wire.encode(value))))
    }
}

/// Every refusal is a problem document, the router's own too (no such path, no such method).
struct ProblemMiddleware: RouterMiddleware {
    func handle(_ request: Request, context: SiteContext, next: (Request, SiteContext) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let problem as Problem {
            throw problem
        } catch let error as HTTPError {
            throw Problem(error.status, "http-\(error.status.code)", error.status.reasonPhrase,
                          detail: error.body ?? "\(request.method) \(request.uri.path): \(error.status.reasonPhrase.lowercased())")
        }
    }
}

/// Finds who is asking (session cookie or bearer token) and, under a cookie, refuses a change
/// without the session's cross-site token: another site's page cannot make the browser change
/// anything here.
struct Authenticator: RouterMiddleware {
    let server: SiteServer

    func handle(_ request: Request, context: SiteContext, next: (Request, SiteContext) async throws -> Response) async throws -> Response {
        var context = context
        context.identity = try identify(request, peer: context.peer)
        return try await next(request, context)
    }

    /// Who sent `request`: nil without credentials; a wrong token or a change without the
    /// session's CSRF token is audited and thrown.
    func identify(_ request: Request, peer: String) throws -> Identity? {
        let now = Date().timeIntervalSince1970
        if let authorization = request.headers[.authorization], authorization.hasPrefix("Bearer ") {
            guard let token = try server.database.token(secret: String(authorization.dropFirst("Bearer ".count))) else {
                try? server.database.audit(actor: "?", action: "token.refused", detail: peer, now: now)
                throw Problem.unauthenticated
            }
            return .software(token)
        }
        guard let id = request.cookies[SiteServer.sessionCookie]?.value, let identity = server.session(id, now: now) else { return nil }
        if request.method != .get, request.method != .head, case .person(_, _, let csrf) = identity {
            guard request.headers[HTTPField.Name("X-CSRF-Token")!] == csrf else {
                try? server.database.audit(actor: identity.actor, action: "csrf.refused", detail: request.uri.path, now: now)
                throw Problem.forbidden("a change needs the session's X-CSRF-Token header")
            }
        }
        return identity
    }
}

/// Runs the service until SIGTERM or SIGINT.
public enum SiteService {
    /// `onListening` gets the port bound (the settings may ask for 0: any).
    public static func run(database: SiteDatabase, site: SiteFiles, certificate: SiteCertificate, member: SiteMember?, host: String, port: Int,
                           onListening: @escaping @Sendable (Int) -> Void) async throws {
        let server = SiteServer(database: database, editor: SiteEditor(files: site, database: database), member: member)
        member?.follow()
        defer { member?.stop() }
        var logger = Logger(label: "intercom-site")
        logger.logLevel = .notice
        // A connection gets `firstRequestTimeout` for its TLS handshake and first request head,
        // then may send nothing for `idleTimeout`; a slow one holds up only itself
        // (SiteServiceHTTPSTests, slow and silent clients).
        let channel = HTTP1WebSocketUpgradeChannel.Configuration(
            http1: .init(idleTimeout: .seconds(SiteServer.idleTimeout)),
            ws: .init(maxFrameSize: 4096, autoPing: .enabled(timePeriod: .seconds(SiteServer.keepAlive))))
        let tls = try certificate.serverConfiguration()
        let sockets = server.socketRouter().buildResponder()
        let app = Application(
            router: server.router(),
            server: HTTPServerBuilder { responder in
                try TLSChannel(WithFirstRequestDeadline(base: HTTP1WebSocketUpgradeChannel(responder: responder, webSocketResponder: sockets, configuration: channel),
                                                        seconds: SiteServer.firstRequestTimeout), tlsConfiguration: tls)
            },
            configuration: .init(address: .hostname(host, port: port), serverName: nil),
            services: member.map { [LastSeen(member: $0, database: database)] } ?? [],
            onServerRunning: { channel in onListening(channel.localAddress?.port ?? port) },
            logger: logger)
        try await app.runService()
    }
}
