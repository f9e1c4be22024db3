import Posix
// Messages awaiting an ack: resent with a doubling interval until acked or `giveUpAfter` passes.

struct PendingMessage: Sendable {
    var room: RoomID
    var address: IPv4Endpoint
    var messageID: UInt32
    var message: SignalMessage
    var datagram: [UInt8]
    var firstSent: Double
    var nextSend: Double
    var interval: Double
}

struct ReliableOutbox: Sendable {
    private(set) var pending: [PendingMessage] = []

    mutating func add(_ message: PendingMessage) { pending.append(message) }

    /// Messages to `room` go to `address` from their next sending on (the room moved).
    mutating func readdress(room: RoomID, to address: IPv4Endpoint) {
        for i in pending.indices where pending[i].room == room { pending[i].address = address }
    }

    /// Removes and returns the message this ack is for; nil for an unknown or repeated ack.
    mutating func acknowledge(room: RoomID, messageID: UInt32) -> PendingMessage? {
        guard let i = pending.firstIndex(where: { $0.room == room && $0.messageID == messageID }) else { return nil }
        return pending.remove(at: i)
    }

    /// Stops resending messages that no longer matter (e.g. invites of a call that ended).
    mutating func cancel(where predicate: (PendingMessage) -> Bool) {
        pending.removeAll(where: predicate)
    }

    /// Messages to send again now, and those given up (removed).
    mutating func due(now: Double, timing: CallTiming) -> (resend: [PendingMessage], gaveUp: [PendingMessage]) {
        var resend: [PendingMessage] = []
        var gaveUp: [PendingMessage] = []
        var keep: [PendingMessage] = []
        for var m in pending {
            if now >= m.firstSent + timing.giveUpAfter {
                gaveUp.append(m)
                continue
            }
            if now >= m.nextSend {
                m.interval = min(m.interval * 2, timing.retransmitMaxInterval)
                m.nextSend = now + m.interval
                resend.append(m)
            }
            keep.append(m)
        }
        pending = keep
        return (resend, gaveUp)
    }

    /// `room` was just heard: what waits for its ack and was last sent at least `initial` ago goes
    /// again now, its interval starting over (a room back from a restart gets it at once, not
    /// after the rest of a long backoff).
    mutating func expedite(room: RoomID, now: Double, initial: Double) -> [PendingMessage] {
        var out: [PendingMessage] = []
        for i in pending.indices where pending[i].room == room && pending[i].nextSend - pending[i].interval <= now - initial {
            pending[i].interval = initial
            pending[i].nextSend = now + initial
            out.append(pending[i])
        }
        return out
    }

    func nextDeadline(timing: CallTiming) -> Double? {
        pending.map { min($0.nextSend, $0.firstSent + timing.giveUpAfter) }.min()
    }
}

/// Message ids recently handled, per sender: a copy arriving again is acked but not handled twice.
/// Set membership, not a sliding sequence window, so reordering and a restarted sender (new
/// random id start) are both harmless.
struct DedupeWindow: Sendable {
    private var seen: [RoomID: (ids: Set<UInt32>, order: [UInt32], next: Int)] = [:]
    let capacity: Int

    init(capacity: Int) { self.capacity = max(1, capacity) }

    /// True the first time `id` is seen from `room` (within the window), then false.
    mutating func firstTime(_ id: UInt32, from room: RoomID) -> Bool {
        var entry = seen[room] ?? (ids: [], order: [], next: 0)
        guard !entry.ids.contains(id) else { return false }
        if entry.order.count < capacity {
            entry.order.append(id)
        } else {
            // Ring buffer: forget the oldest id.
            entry.ids.remove(entry.order[entry.next])
            entry.order[entry.next] = id
            entry.next = (entry.next + 1) % capacity
        }
        entry.ids.insert(id)
        seen[room] = entry
        return true
    }
}

/// A bounded set that forgets its oldest members.
struct RecentSet<Element: Hashable & Sendable>: Sendable {
    private var members: Set<Element> = []
    private var order: [Element] = []
    let capacity: Int

    init(capacity: Int) { self.capacity = max(1, capacity) }

    func contains(_ e: Element) -> Bool { members.contains(e) }

    mutating func insert(_ e: Element) {
        guard members.insert(e).inserted else { return }
        order.append(e)
        if order.count > capacity { members.remove(order.removeFirst()) }
    }
}

/// Serial-number order of per-sender message ids (RFC 1982 style): `a` was sent after `b`.
func isAfter(_ a: UInt32, _ b: UInt32) -> Bool { Int32(bitPattern: a &- b) > 0 }
