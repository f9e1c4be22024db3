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
    /// Frames played (audio thread), for the feeder to know when its clip has been heard.
    public let framesPlayed = Counter()

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
        var frame = [Int16](repeating: 0, count: frameSize)
        for _ in 0..<room where at < samples.count {
            let n = min(frameSize, samples.count - at)
            for i in 0..<frameSize { frame[i] = i < n ? samples[at + i] : 0 }
            frame.withUnsafeBufferPointer { _ = ring.write($0.baseAddress!, count: frameSize) }
            at += n
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
        guard ring.read(into: buffer, count: count) else { return false }
        framesPlayed.increment()
        return true
    }
}
