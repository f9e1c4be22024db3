import Calls
import Synchronization

/// Events on their way from any publishing thread to the server thread. A mutex held for an
/// append or a swap: the publishers are the call engine and the store, never the audio thread.
final class EventQueue: Sendable {
    private struct State {
        var events: [CallEvent] = []
        var lost = 0
    }

    private let state = Mutex(State())
    let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    /// Appends `event`, or counts it as lost when full. True when the queue was empty before, i.e.
    /// the server needs a wake-up (it drains everything on each wake-up).
    func push(_ event: CallEvent) -> Bool {
        state.withLock { s in
            let wasEmpty = s.events.isEmpty && s.lost == 0
            if s.events.count < capacity { s.events.append(event) } else { s.lost += 1 }
            return wasEmpty
        }
    }

    /// Everything queued, oldest first, and how many were lost since the last call.
    func takeAll() -> (events: [CallEvent], lost: Int) {
        state.withLock { s in
            let taken = (s.events, s.lost)
            s.events = []
            s.lost = 0
            return taken
        }
    }

    var count: Int { state.withLock { $0.events.count } }
}
