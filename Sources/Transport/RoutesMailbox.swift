import Synchronization

/// `MediaRoutes` in fixed-size storage: what the network thread applies.
final class PostedRoutes: @unchecked Sendable {
    // @unchecked: owned by one side of the mailbox at a time.
    let sendTo = EndpointList(capacity: MediaRoutes.maxEndpoints)
    var acceptsAny = true
    let acceptFrom = EndpointList(capacity: MediaRoutes.maxEndpoints)
    let joinGroups = EndpointList(capacity: MediaRoutes.maxEndpoints)
    var outbound: SRTPSession?
    /// The session of each `acceptFrom` entry, when protected.
    let inbound = SessionList()

    /// Poster's side. Sessions replaced here are released here, on the poster's thread.
    func fill(from routes: MediaRoutes) {
        sendTo.replace(with: routes.sendTo)
        acceptsAny = routes.acceptFrom == nil
        acceptFrom.replace(with: routes.acceptFrom ?? [])
        joinGroups.replace(with: routes.joinGroups)
        outbound = routes.protection?.outbound
        inbound.replace(with: routes.protection?.inbound)
    }
}

/// Hands route sets from any number of posting threads to the network thread, newest wins: a
/// triple buffer. The poster fills its own slot and swaps it with the shared middle one; the
/// network thread swaps its slot with the middle one when a fresh set is there. Neither side waits
/// for the other, allocates or copies on the network thread's side.
final class RoutesMailbox: @unchecked Sendable {
    // @unchecked: each slot belongs to one side at a time, handed over by `middle`.
    private let slots = (PostedRoutes(), PostedRoutes(), PostedRoutes())
    /// The middle slot's index, plus `fresh` when it holds a set the network thread has not taken.
    private let middle = Atomic<Int>(0)
    private static let fresh = 4
    /// The posters' slot; the lock only orders posters, the network thread never takes it.
    private let back = Mutex(1)
    /// The network thread's slot.
    private var front = 2

    private func slot(_ i: Int) -> PostedRoutes {
        switch i {
        case 0: slots.0
        case 1: slots.1
        default: slots.2
        }
    }

    /// Any thread but the network thread's.
    func post(_ routes: MediaRoutes) {
        back.withLock { back in
            slot(back).fill(from: routes)
            // Releasing: the network thread sees the filled slot; acquiring: it is done with the
            // slot we get back (it last read it before its own releasing exchange).
            back = middle.exchange(back | Self.fresh, ordering: .acquiringAndReleasing) & 3
        }
    }

    /// Network thread: the newest set not yet taken, or nil. Valid until the next call.
    @inline(__always)
    func take() -> PostedRoutes? {
        guard middle.load(ordering: .relaxed) & Self.fresh != 0 else { return nil }
        front = middle.exchange(front, ordering: .acquiringAndReleasing) & 3
        return slot(front)
    }
}
