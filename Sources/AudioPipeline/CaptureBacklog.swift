/// The frames read from the capture device in one wake-up, of which only the newest `capacity` are
/// handed on: a live talker's audio that is already late is worse than none.
///
/// The engine reads the device empty (asking again until it has no whole frame: a sound server
/// hands a stall's backlog over one buffer at a time) and puts each frame here; when the backlog
/// is full, the oldest frame leaves first and is `stale`. What decides is what could really be
/// read now, not `snd_pcm_delay`: a stalled sound server reports the time it owes as delay before
/// it can deliver a sample of it, and dropping frames for that loses audio without catching up.
///
/// Audio thread only; storage is allocated once, in `init`.
public final class CaptureBacklog: @unchecked Sendable {
    // @unchecked: owned by the audio thread; nothing here is shared.
    public let frameSize: Int
    /// Frames kept: the most a wake-up hands on.
    public let capacity: Int
    private let storage: UnsafeMutablePointer<Int16>
    /// Capture time lost just before each kept frame (see `CaptureClock`), by slot.
    private let lostBefore: UnsafeMutablePointer<Int>
    private var first = 0
    public private(set) var count = 0

    public init(frameSize: Int, capacity: Int) {
        precondition(capacity >= 1 && frameSize >= 1)
        self.frameSize = frameSize
        self.capacity = capacity
        storage = .allocate(capacity: frameSize * capacity)
        storage.initialize(repeating: 0, count: frameSize * capacity)
        lostBefore = .allocate(capacity: capacity)
        lostBefore.initialize(repeating: 0, count: capacity)
    }

    deinit {
        storage.deallocate()
        lostBefore.deallocate()
    }

    public var isFull: Bool { count == capacity }
    public var isEmpty: Bool { count == 0 }

    /// Where the next frame read goes; `commit()` keeps it. The backlog must not be full.
    public var nextSlot: UnsafeMutablePointer<Int16> {
        precondition(!isFull, "take the oldest frame out first")
        return storage + ((first + count) % capacity) * frameSize
    }

    public func commit() {
        lostBefore[(first + count) % capacity] = 0
        count += 1
    }

    /// The oldest frame kept. The backlog must not be empty.
    public var oldest: UnsafeMutablePointer<Int16> { storage + first * frameSize }

    /// Capture time lost just before the `index`-th kept frame (0 = the oldest).
    public func setLost(_ frames: Int, beforeKept index: Int) {
        lostBefore[(first + index) % capacity] = frames
    }

    /// Capture time lost just before the oldest frame kept.
    public var lostBeforeOldest: Int { lostBefore[first] }

    /// Forgets every frame (the streams restarted: they belong to a pairing that is gone).
    public func removeAll() {
        first = 0
        count = 0
    }

    public func removeOldest() {
        precondition(!isEmpty)
        first = (first + 1) % capacity
        count -= 1
    }
}
