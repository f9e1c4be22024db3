import Frames
import Posix
import RealTime

/// Plays a fixed buffer once, one frame per call, then silence: a test signal whose frame `n`
/// goes out in engine cycle `n`, so its position in the recorded microphone gives the round trip.
public final class BufferSource: FrameSource, @unchecked Sendable {
    // @unchecked: after init only the audio thread reads it.
    private let samples: UnsafeMutableBufferPointer<Int16>
    private var position = 0
    private let mark: Int
    /// Monotonic time (ns) at which the frame holding sample `mark` was handed out.
    public let markTime = Counter()

    /// - Parameter mark: a sample index whose hand-out time is recorded (for latency measurements).
    public init(_ signal: [Int16], mark: Int = -1) {
        samples = .allocate(capacity: signal.count)
        _ = samples.initialize(from: signal)
        self.mark = mark
    }

    deinit { samples.deallocate() }

    public func readFrame(into buffer: UnsafeMutablePointer<Int16>, count: Int) -> Bool {
        for i in 0..<count {
            let p = position + i
            buffer[i] = p < samples.count ? samples[p] : 0
        }
        if mark >= position, mark < position + count { markTime.store(Int(MonotonicClock.nanoseconds())) }
        position += count
        return true
    }
}
