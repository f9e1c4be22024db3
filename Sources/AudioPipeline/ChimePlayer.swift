import Frames
import RealTime

/// The call chime as a mixer input: a fixed sound played once from the start whenever a control
/// thread asks, cut short when asked to stop. Its samples are copied in at `init`; the audio
/// thread only reads them and two atomic counters, so starting it never allocates or locks.
/// Being mixed like any far end, the chime is also in the echo reference: it is not sent back.
public final class ChimePlayer: FrameSource, @unchecked Sendable {
    // @unchecked: `position` and `seen` belong to the audio thread, `startsPosted` to the calls
    // thread; they meet only in the atomic `request`.
    private let samples: UnsafeMutableBufferPointer<Int16>
    /// The newest request: 2n = the n-th start, 2n + 1 = stop after it. One writer (the calls
    /// thread) and one counter, so a stop and a start in quick succession keep their order.
    private let request = Counter()
    private var startsPosted = 0
    private var seen = 0
    private var position = Int.max
    /// Chimes started (for the statistics and tests).
    public var started: Int { request.load / 2 }

    public init(samples: [Int16]) {
        self.samples = .allocate(capacity: max(1, samples.count))
        _ = self.samples.initialize(from: samples.isEmpty ? [0] : samples)
    }

    deinit { samples.deallocate() }

    /// Plays the chime from its start (one control thread).
    public func start() {
        startsPosted += 1
        request.store(2 * startsPosted)
    }
    /// Stops it at the next frame (the same control thread).
    public func stop() { request.store(2 * startsPosted + 1) }

    public func readFrame(into buffer: UnsafeMutablePointer<Int16>, count: Int) -> Bool {
        let r = request.load
        if r != seen {
            seen = r
            position = r & 1 == 0 ? 0 : Int.max
        }
        guard position < samples.count else { return false }
        let n = min(count, samples.count - position)
        buffer.update(from: samples.baseAddress! + position, count: n)
        if n < count { (buffer + n).update(repeating: 0, count: count - n) }
        position += n
        return true
    }
}
