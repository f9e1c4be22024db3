import Calls
import Control
import Foundation
import Synchronization

/// One event the site service passes on: a terminal's event as its control socket says it
/// (`ControlEvent`, the one form), or the service's own word on its member's connection.
public enum SiteEvent: Sendable, Equatable, Codable {
    case terminal(ControlEvent)
    /// The member's control socket was reached (`connected`) or lost: events between a loss and
    /// the next connection were not seen.
    case member(connected: Bool, detail: String?)

    private enum Keys: String, CodingKey { case event, connected, detail }

    public var name: String {
        switch self {
        case .terminal(.call(let e)): e.name
        case .terminal(.eventsLost): "events_lost"
        case .member: "member"
        }
    }

    public func encode(to encoder: Encoder) throws {
        switch self {
        case .terminal(let event): try event.encode(to: encoder)
        case .member(let connected, let detail):
            var c = encoder.container(keyedBy: Keys.self)
            try c.encode("member", forKey: .event)
            try c.encode(connected, forKey: .connected)
            try c.encodeIfPresent(detail, forKey: .detail)
        }
    }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: Keys.self)
        if try c.decode(String.self, forKey: .event) == "member" {
            self = .member(connected: try c.decode(Bool.self, forKey: .connected), detail: try c.decodeIfPresent(String.self, forKey: .detail))
        } else {
            self = .terminal(try ControlEvent(from: decoder))
        }
    }
}

/// The newest events, numbered, for the event streams: a client that comes back with the last
/// id it saw gets what it missed. Appending never waits for a reader; a reader that falls more
/// than `capacity` behind is told how many it lost.
public final class EventLog: Sendable {
    public struct Entry: Sendable, Equatable {
        public var id: UInt64
        /// The event as sent (`SiteEvent` encoded once, for every stream).
        public var json: [UInt8]
        public var name: String
    }

    public static let standardCapacity = 10_000
    public let capacity: Int
    /// Ids go on from one run of the service to the next: the first is the start time in
    /// microseconds (below 2^53, so JavaScript reads it exactly), then one more each event.
    public let firstID: UInt64
    private let state: Mutex<State>

    private struct State {
        var ring: [Entry] = []
        /// Where the oldest entry is once the ring is full.
        var start = 0
        var nextID: UInt64
        var waiters: [Int: AsyncStream<Void>.Continuation] = [:]
        var nextWaiter = 0
    }

    public init(capacity: Int = standardCapacity, firstID: UInt64 = UInt64(Date().timeIntervalSince1970 * 1e6)) {
        self.capacity = capacity
        self.firstID = firstID
        state = Mutex(State(nextID: firstID))
    }

    @discardableResult
    public func append(_ event: SiteEvent) -> UInt64 {
        let json = (try? Wire.encode(event)) ?? Array(#"{"event":"unencodable"}"#.utf8)
        return state.withLock { s in
            let entry = Entry(id: s.nextID, json: json, name: event.name)
            s.nextID += 1
            if s.ring.count < capacity { s.ring.append(entry) } else {
                s.ring[s.start] = entry
                s.start = (s.start + 1) % capacity
            }
            for w in s.waiters.values { w.yield() }
            return entry.id
        }
    }

    /// Where a stream starts: after `lastSeen` (a client's `Last-Event-ID`) when this run gave
    /// it; after everything of this run for another run's id (what that run had is gone with it);
    /// from now on for none, or an id never given.
    public func cursor(resuming lastSeen: UInt64?) -> UInt64 {
        state.withLock { s in
            guard let lastSeen, lastSeen < s.nextID else { return s.nextID - 1 }
            return max(lastSeen, firstID - 1)
        }
    }

    /// Up to `limit` entries after `cursor`, oldest first, and how many after it are no longer
    /// kept (a reader that fell behind).
    public func after(_ cursor: UInt64, limit: Int = .max) -> (entries: [Entry], lost: UInt64) {
        state.withLock { s in
            let count = s.ring.count
            guard count > 0 else { return ([], 0) }
            let oldest = s.ring[s.start].id
            let lost = cursor + 1 < oldest ? oldest - cursor - 1 : 0
            let from = cursor + 1 < oldest ? 0 : Int(cursor + 1 - oldest)
            let n = min(count - from, limit)
            guard n > 0 else { return ([], lost) }
            return ((from..<from + n).map { s.ring[(s.start + $0) % count] }, lost)
        }
    }

    /// A wake-up each time something is appended (coalesced: a slow reader gets one, then reads
    /// everything new with `after`), until the stream is dropped.
    public func wakeUps() -> AsyncStream<Void> {
        let (stream, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let key = state.withLock { s in
            let key = s.nextWaiter
            s.nextWaiter += 1
            s.waiters[key] = continuation
            return key
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.waiters.removeValue(forKey: key) }
        }
        return stream
    }
}
