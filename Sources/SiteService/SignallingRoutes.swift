import Calls
import Control
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import ServiceLifecycle

// The API's part that goes through the service's member terminal (`SiteMember`): notifications
// sent, presence, history, and the event stream. Replies are the control socket's own types.

extension SiteServer {
    /// `POST /notifications`: the notification type to send (`[notifications.<type>]`).
    public struct NewNotification: Codable, Sendable { public var type: String }

    /// `POST /calls`: the rooms the service's terminal calls, and how (`call` when absent).
    public struct NewCall: Codable, Sendable {
        public var rooms: [String]
        public var kind: CallKind?
    }
    /// `POST /notifications/acknowledge`: the oldest waiting notification (or missed call), or all.
    public struct Acknowledgement: Codable, Sendable { public var all: Bool? }

    func addSignalling(to api: RouterGroup<SiteContext>) {
        api.post("notifications") { request, context in
            let who = try self.require(context, .manager, .technician, scope: .notify)
            let body = try await Self.decode(NewNotification.self, request)
            guard NotificationType.isValidID(body.type) else {
                throw Problem.badInput("type", "\"type\" must be a notification type's id (1-32 of a-z, 0-9, - and _)")
            }
            let reply = try await self.member(context).run(.perform(.notify(type: body.type)), field: "type")
            if case .notificationSent(let id, let to) = reply {
                try? self.database.audit(actor: who.actor, action: "notification.sent",
                                         detail: "\(body.type) (\(id)) to \(to.map(\.description).joined(separator: ", "))", now: Date().timeIntervalSince1970)
            }
            return try Self.json(reply, status: .created)
        }
        api.post("notifications/acknowledge") { request, context in
            let who = try self.require(context, .manager, .technician, scope: .notify)
            let all = try await Self.decodeIfSent(Acknowledgement.self, request)?.all ?? false
            _ = try await self.member(context).run(.perform(.acknowledge(all: all)), field: "all")
            try? self.database.audit(actor: who.actor, action: "notification.acknowledged", detail: all ? "all" : "the oldest", now: Date().timeIntervalSince1970)
            return Response(status: .noContent)
        }
        // Calls at the service's terminal (with audio: the one on the service's box, where
        // the person sits who talks; one without audio refuses them, 409).
        api.post("calls") { request, context in
            let who = try self.require(context, .manager, .technician, scope: .calls)
            let body = try await Self.decode(NewCall.self, request)
            guard !body.rooms.isEmpty else { throw Problem.badInput("rooms", "\"rooms\" is empty: name the rooms to call") }
            var rooms: [RoomID] = []
            for text in body.rooms {
                guard let room = RoomID(text) else {
                    throw Problem.badInput("rooms", "\"rooms\" holds \"\(text.prefix(40))\", not a room id (1-32 of a-z, 0-9, - and _)")
                }
                if !rooms.contains(room) { rooms.append(room) }
            }
            let kind = body.kind ?? .normal
            let reply = try await self.member(context).run(.perform(.callRooms(rooms, kind: kind)), field: "rooms")
            if case .callPlaced(let id, let to) = reply {
                try? self.database.audit(actor: who.actor, action: "call.placed",
                                         detail: "\(kind.rawValue) \(id) to \(to.map(\.description).joined(separator: ", "))", now: Date().timeIntervalSince1970)
            }
            return try Self.json(reply, status: .created)
        }
        for (path, command) in [("calls/answer", CallCommand.answer), ("calls/decline", .decline), ("calls/hangup", .hangUp)] {
            api.post(RouterPath(path)) { _, context in
                let who = try self.require(context, .manager, .technician, scope: .calls)
                _ = try await self.member(context).run(.perform(command))
                try? self.database.audit(actor: who.actor, action: path.replacingOccurrences(of: "/", with: "."), detail: "", now: Date().timeIntervalSince1970)
                return Response(status: .noContent)
            }
        }
        api.get("status") { _, context in
            try self.require(context, .manager, .technician, .viewer, scope: .read)
            return try Self.json(try await self.member(context).run(.status))
        }
        api.get("presence") { _, context in
            try self.require(context, .manager, .technician, .viewer, scope: .read)
            return try Self.json(try await self.member(context).run(.rooms))
        }
        api.get("history") { request, context in
            try self.require(context, .manager, .technician, .viewer, scope: .read)
            return try Self.json(try await self.member(context).run(.history(limit: try Self.limit(request))))
        }
        api.get("events") { request, context in
            try self.require(context, .manager, .technician, .viewer, scope: .read)
            let member = try self.member(context)
            return Self.eventStream(member.events, after: try Self.lastEventID(request))
        }
        // The same events over a WebSocket (`eventSocket`): here only what is not an upgrade.
        api.get("events/socket") { request, context -> Response in
            try self.require(context, .manager, .technician, .viewer, scope: .read)
            guard Self.sameOrigin(request) else {
                try? self.database.audit(actor: context.identity?.actor ?? "?", action: "refused", detail: "events/socket from another origin", now: Date().timeIntervalSince1970)
                throw Problem.forbidden("a page of another origin may not read the events")
            }
            _ = try self.member(context)
            _ = try Self.lastEventID(request)
            throw Problem(.upgradeRequired, "websocket-only", "This is a WebSocket", detail: "connect with a WebSocket client (Upgrade: websocket)")
        }
    }

    /// The WebSocket upgrade. A browser's WebSocket sees no status of a refused handshake, so
    /// every upgrade is taken and a refusal is the close frame's code and reason (nothing is
    /// sent before it): 4401 who is this, 4403 not allowed or another origin, 4503 no member,
    /// 4400 a bad last_event_id (docs/api.md). Each refusal is audited.
    func socketRouter() -> Router<SiteContext> {
        let router = Router(context: SiteContext.self)
        router.group("api/v1").ws("events/socket", shouldUpgrade: { _, _ in .upgrade([:]) }, onUpgrade: { inbound, outbound, context in
            let request = context.request
            let identity = try? Authenticator(server: self).identify(request, peer: context.requestContext.peer)
            let refusal: (code: UInt16, reason: String)? = if identity == nil {
                (4401, "who is this? send Authorization: Bearer <token> or the session cookie")
            } else if let identity, !Self.may(identity, [.manager, .technician, .viewer], scope: .read) {
                (4403, "may not read the events (needs a role, or a token with scope read)")
            } else if !Self.sameOrigin(request) {
                (4403, "a page of another origin may not read the events")
            } else if self.member == nil {
                (4503, "the service has no terminal to reach the site through (--member)")
            } else if (try? Self.lastEventID(request)) == nil, Self.resumes(request) {
                (4400, "last_event_id must be an event's id (digits)")
            } else {
                nil
            }
            guard let member = self.member, refusal == nil else {
                try? self.database.audit(actor: identity?.actor ?? "?", action: "refused",
                                         detail: "events/socket: \(refusal?.reason ?? "")", now: Date().timeIntervalSince1970)
                try await outbound.close(.unknown(refusal?.code ?? 4503), reason: refusal?.reason)
                return
            }
            try await Self.eventSocket(member.events, after: try? Self.lastEventID(request), inbound: inbound, outbound: outbound)
        })
        return router
    }

    private static func resumes(_ request: Request) -> Bool {
        request.headers[HTTPField.Name("Last-Event-ID")!] != nil || request.uri.queryParameters.get("last_event_id") != nil
    }

    func member(_ context: SiteContext) throws -> SiteMember {
        guard let member else {
            throw Problem(.serviceUnavailable, "no-member", "The service has no terminal to reach the site through",
                          detail: "start it with --member <a terminal's control socket> (docs/site-service.md)")
        }
        return member
    }
}
