import Synchronization

/// Lock-free hand-over of one mixer slot between a control thread (the network thread, which
/// starts and evicts remote streams) and the audio thread (which reads the active ones).
///
///     free ──activate()──► active ──requestRelease()──► releasing ──(audio thread)──► free
///
/// Whoever owns a slot may touch its source: the control thread while it is `free` (reset it for
/// a new stream), the audio thread while it is `active` or `releasing`. The release/acquire pairs
/// make everything the previous owner wrote visible to the next one.
public final class SlotHandOff: Sendable {
    private enum State: UInt8 { case free = 0, active, releasing }
    private let state = Atomic<UInt8>(State.free.rawValue)

    public init() {}

    /// Control thread: the slot holds a freshly reset source; the audio thread may read it now.
    public func activate() {
        precondition(state.load(ordering: .acquiring) == State.free.rawValue, "activate() on a slot not free")
        state.store(State.active.rawValue, ordering: .releasing)
    }

    /// Control thread: ask the audio thread to let go; `isFree` turns true once it has.
    public func requestRelease() {
        _ = state.compareExchange(expected: State.active.rawValue, desired: State.releasing.rawValue, ordering: .acquiringAndReleasing)
    }

    /// Control thread: true when the slot is its own (never activated, or released by the audio thread).
    public var isFree: Bool { state.load(ordering: .acquiring) == State.free.rawValue }

    /// True while the audio thread reads the slot (active, release not yet asked for).
    public var isActive: Bool { state.load(ordering: .relaxed) == State.active.rawValue }

    /// Audio thread, once per frame: true when the slot's source should be read. A pending release
    /// is granted here, after which the audio thread does not touch the source again.
    @inline(__always)
    public func audioThreadMayRead() -> Bool {
        switch state.load(ordering: .acquiring) {
        case State.active.rawValue: return true
        case State.releasing.rawValue:
            state.store(State.free.rawValue, ordering: .releasing)
            return false
        default: return false
        }
    }
}
