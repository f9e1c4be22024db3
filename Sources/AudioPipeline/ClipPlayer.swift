import Frames
import RealTime
import Synchronization

/// A mixer input fed with whole clips by an ordinary thread (the notification announcer: a tone,
/// then speech made off the audio thread): a sample ring the feeder fills in whole frames and the
/// audio thread drains, plus a flush the audio thread honours at its next frame (a notification
/// acknowledged while it is read stops at once, an emergency cuts in). A flush drops what was fed
/// before it, never what the feeder adds after: the next clip starts whole. Never allocates or locks.
public final class ClipPlayer: FrameSource, @unchecked Sendable {
    // @unchecked: `played` belongs to the audio thread; the ring and atomics are thread-safe.
    public let ring: SampleRing
    public let frameSize: Int
    /// Samples fed so far (feeder), and fed before the newest flush (any thread, only grows).
    private let fed = Atomic<Int>(0)
    private let flushedThrough = Atomic<Int>(0)
    /// Samples the audio thread has taken from the ring, played or dropped.
    private var played = 0

    public init(frameSize: Int, seconds: Double, sampleRate: Int) {
        self.frameSize = frameSize
        ring = SampleRing(minimumCapacity: Int(seconds * Double(sampleRate)))
    }

    /// Feeder side: appends what fits of `samples` from `offset`, in whole frames (the last one
    /// padded with silence); returns the new offset.
    public func feed(_ samples: [Int16], from offset: Int) -> Int {
        var at = offset
        let room = ring.availableToWrite / frameSize
        guard room > 0, at < samples.count else { return at }
        let whole = min(room, (samples.count - at) / frameSize) * frameSize
        if whole > 0 {
            samples.withUnsafeBufferPointer { _ = ring.write($0.baseAddress! + at, count: whole) }
            at += whole
            fed.wrappingAdd(whole, ordering: .releasing)
        }
        // The clip's last, partial frame, padded with silence.
        if at < samples.count, whole / frameSize < room {
            let last = Array(samples[at...]) + [Int16](repeating: 0, count: frameSize - (samples.count - at))
            last.withUnsafeBufferPointer { _ = ring.write($0.baseAddress!, count: frameSize) }
            fed.wrappingAdd(frameSize, ordering: .releasing)
            at = samples.count
        }
        return at
    }

    /// Feeder side: samples still to be played.
    public var queued: Int { ring.availableToRead }

    /// Any thread: drop, at the next frame, what has been fed until now.
    public func flush() {
        let through = fed.load(ordering: .acquiring)
        var current = flushedThrough.load(ordering: .relaxed)
        while current < through {
            let (done, seen) = flushedThrough.compareExchange(expected: current, desired: through, ordering: .releasing)
            if done { break }
            current = seen
        }
    }

    public func readFrame(into buffer: UnsafeMutablePointer<Int16>, count: Int) -> Bool {
        // Whole frames in, whole frames out: what a flush dropped is read past frame by frame
        // (seconds at most, a rare event).
        let through = flushedThrough.load(ordering: .acquiring)
        while played < through, ring.read(into: buffer, count: count) { played += count }
        guard ring.read(into: buffer, count: count) else { return false }
        played += count
        return true
    }
}
