import Calls
import Control
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdWebSocket
import NIOCore
import ServiceLifecycle

// The event log (`EventLog`) to clients, two ways with one reader: Server-Sent Events
// (`GET /events`) and a WebSocket (`GET /events/socket`). Each client reads at its own pace on
// its own connection; appending never waits for one, and one far behind is told what it lost.

extension SiteServer {
    /// Seconds between keep-alives on a quiet stream (proxies close quiet connections).
    static let keepAlive = 15.0
    /// Events written at a time: a client far behind catches up in slices.
    static let eventSlice = 500

    /// Where a client resumes: `Last-Event-ID` (what `EventSource` sends when it reconnects) or
    /// `?last_event_id=` (a browser's WebSocket cannot set headers).
    static func lastEventID(_ request: Request) throws -> UInt64? {
        let query: String? = request.uri.queryParameters.get("last_event_id").map { String($0) }
        let text = request.headers[HTTPField.Name("Last-Event-ID")!] ?? query
        guard let text else { return nil }
        guard let id = UInt64(text) else { throw Problem.badInput("last_event_id", "the last event id must be an event's id (digits)") }
        return id
    }

    /// A client's place in the log.
    struct EventReader {
        let log: EventLog
        var cursor: UInt64

        init(_ log: EventLog, after lastSeen: UInt64?) {
            self.log = log
            cursor = log.cursor(resuming: lastSeen)
        }

        /// The next slice after the cursor, and how many before it are gone; empty when nothing is new.
        mutating func next() -> (entries: [EventLog.Entry], lost: UInt64) {
            let (entries, lost) = log.after(cursor, limit: SiteServer.eventSlice)
            if let last = entries.last { cursor = last.id } else if lost > 0 { cursor += lost }
            return (entries, lost)
        }
    }

    /// Runs `body` with a tick at once, on each new event and every `keepAlive` s. The ticks end
    /// when the service stops (the server waits for every connection to end).
    static func withTicks(_ log: EventLog, _ body: (AsyncStream<Void>) async throws -> Void) async throws {
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
                try await body(ticks)
                group.cancelAll()
            }
        } onGracefulShutdown: {
            tick.finish()
        }
    }

    /// Server-Sent Events: `id`, `event` (its name) and `data` (its JSON) for each; a comment
    /// line as keep-alive.
    static func eventStream(_ log: EventLog, after lastSeen: UInt64?) -> Response {
        let body = ResponseBody { writer in
            var reader = EventReader(log, after: lastSeen)
            var buffer = ByteBuffer()
            buffer.writeString("retry: 1000\n\n")
            try await writer.write(buffer)
            try await withTicks(log) { ticks in
                for await _ in ticks {
                    var wrote = false
                    while true {
                        let (entries, lost) = reader.next()
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
            try await writer.finish(nil)
        }
        return Response(status: .ok, headers: [.contentType: "text/event-stream", .cacheControl: "no-store",
                                               HTTPField.Name("X-Accel-Buffering")!: "no"], body: body)
    }

    /// One WebSocket text message per event: `{"id": ..., "event": name, "data": {...}}` (the
    /// same id, name and JSON as the Server-Sent Events). Keep-alive is the WebSocket's own ping.
    /// What the client sends is read and dropped; its close ends the stream.
    static func eventSocket(_ log: EventLog, after lastSeen: UInt64?, inbound: WebSocketInboundStream,
                            outbound: WebSocketOutboundWriter) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for try await _ in inbound {}
            }
            group.addTask {
                var reader = EventReader(log, after: lastSeen)
                try await withTicks(log) { ticks in
                    for await _ in ticks {
                        while true {
                            let (entries, lost) = reader.next()
                            if lost > 0, let json = try? Wire.encode(SiteEvent.terminal(.eventsLost(Int(lost)))) {
                                try await outbound.write(.text(#"{"event":"events_lost","data":"# + String(decoding: json, as: UTF8.self) + "}"))
                            }
                            for e in entries {
                                try await outbound.write(.text(#"{"id":\#(e.id),"event":"\#(e.name)","data":"# + String(decoding: e.json, as: UTF8.self) + "}"))
                            }
                            if entries.count < eventSlice { break }
                        }
                    }
                }
            }
            // Whichever ends first (the client closed, or the service stops) ends both.
            try await group.next()
            group.cancelAll()
        }
    }
}
