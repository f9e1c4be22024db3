import Frames
import RealTime

/// A mixer input fed with whole clips by an ordinary thread (the notification announcer: a tone,
/// then speech made off the audio thread): a sample ring the feeder fills in whole frames and the
/// audio thread drains, plus a flush request the audio thread honours at its next frame (a
/// notification acknowledged while it is read stops at once). Never allocates or locks.
public final class ClipPlayer: FrameSource, @unchecked Sendable {
    // @unchecked: `seenFlush` belongs to the audio thread; the ring and counters are thread-safe.
    public let ring: SampleRing
    public let frameSize: Int
    private let flushRequest = Counter()
    private var seenFlush = 0

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
        }
        // The clip's last, partial frame, padded with silence.
        if at < samples.count, whole / frameSize < room {
            let last = Array(samples[at...]) + [Int16](repeating: 0, count: frameSize - (samples.count - at))
            last.withUnsafeBufferPointer { _ = ring.write($0.baseAddress!, count: frameSize) }
            at = samples.count
        }
        return at
    }

    /// Feeder side: samples still to be played.
    public var queued: Int { ring.availableToRead }

    /// Any thread: drop what is queued at the next frame.
    public func flush() { flushRequest.increment() }

    public func readFrame(into buffer: UnsafeMutablePointer<Int16>, count: Int) -> Bool {
        let f = flushRequest.load
        if f != seenFlush {
            seenFlush = f
            ring.discardAll()
        }
        return ring.read(into: buffer, count: count)
    }
}
