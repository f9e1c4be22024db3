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

    /// Seconds between the event stream's keep-alive comments (proxies close quiet streams).
    static let keepAlive = 15.0
    /// Events written to one stream at a time: a client far behind catches up in slices.
    static let eventSlice = 500

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
            let lastSeen = request.headers[HTTPField.Name("Last-Event-ID")!].flatMap { UInt64($0) }
            return Self.eventStream(member.events, after: lastSeen)
        }
    }

    private func member(_ context: SiteContext) throws -> SiteMember {
        guard let member else {
            throw Problem(.serviceUnavailable, "no-member", "The service has no terminal to reach the site through",
                          detail: "start it with --member <a terminal's control socket> (docs/site-service.md)")
        }
        return member
    }

    /// Server-Sent Events: each event with its id, from after `lastSeen` (what a client that
    /// reconnects missed), then as they come. Each stream reads the log at its own pace: a slow
    /// client waits on its own connection only, and one far behind is told what it lost.
    static func eventStream(_ log: EventLog, after lastSeen: UInt64?) -> Response {
        let body = ResponseBody { writer in
            // Woken by new events and every `keepAlive` s; ends when the service stops (the
            // server waits for every response to end) or when a write finds the client gone.
            let (ticks, tick) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
            tick.yield()  // what it missed, at once
            let wakeUps = log.wakeUps()
            try await withGracefulShutdownHandler {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        while true {
                            try await Task.sleep(for: .seconds(keepAlive))
                            tick.yield()
                        }
                    }
                    group.addTask {
                        for await _ in wakeUps { tick.yield() }
                        tick.finish()
                    }
                    try await feed(log, after: log.cursor(resuming: lastSeen), on: ticks, to: &writer)
                    group.cancelAll()
                }
            } onGracefulShutdown: {
                tick.finish()
            }
            try await writer.finish(nil)
        }
        return Response(status: .ok, headers: [.contentType: "text/event-stream", .cacheControl: "no-store",
                                               HTTPField.Name("X-Accel-Buffering")!: "no"], body: body)
    }

    /// Writes what is after `cursor` at each tick (a keep-alive comment when there is nothing).
    private static func feed(_ log: EventLog, after cursor: UInt64, on ticks: AsyncStream<Void>, to writer: inout any ResponseBodyWriter) async throws {
        var cursor = cursor
        var buffer = ByteBuffer()
        buffer.writeString("retry: 1000\n\n")
        try await writer.write(buffer)
        for await _ in ticks {
            var wrote = false
            while true {
                let (entries, lost) = log.after(cursor, limit: eventSlice)
                buffer.clear()
                if lost > 0, let json = try? Wire.encode(SiteEvent.terminal(.eventsLost(Int(lost)))) {
                    buffer.writeString("event: events_lost\ndata: ")
                    buffer.writeBytes(json)
                    buffer.writeString("\n\n")
                }
                for e in entries {
                    buffer.writeString("id: \(e.id)\nevent: \(e.name)\ndata: ")
                    buffer.writeBytes(e.json)
                    buffer.writeString("\n\n")
                }
                if let last = entries.last { cursor = last.id } else if lost > 0 { cursor += lost }
                guard buffer.readableBytes > 0 else { break }
                try await writer.write(buffer)
                wrote = true
                if entries.count < eventSlice { break }
            }
            if !wrote {
                buffer.clear()
                buffer.writeString(": keep-alive\n\n")
                try await writer.write(buffer)
            }
        }
    }
}
