/// Keeps the sender's timeline (frames captured, RTP timestamps) in step with the time that
/// really passed at the microphone. A sound server may lose captured audio without reporting an
/// xrun (its client was starved and its buffer overflowed), and a restart after an xrun loses
/// the time it takes; counting frames would then put every later frame behind real time, and
/// the receiver would take that for network delay and keep it. Here each frame's capture instant
/// (its read time less what is still queued behind it) is compared with its place on the
/// timeline: when the timeline falls behind by more than `lostThresholdMs` for a few frames in a
/// row, it jumps by what was lost. The comparison is against the lowest lag seen, which follows
/// a slow capture clock (up to 2000 ppm) upwards, so clock drift is left to the receiver's drift
/// correction and only sudden losses jump.
/// Not thread-safe: the audio thread owns it; no allocation.
public struct CaptureClock {
    public static let lostThresholdMs = 20.0
    private let frameNanos: Double
    private let threshold: Double
    private let confirmFrames: Int
    /// Baseline rise per frame: 2000 ppm of a frame.
    private static let follow = 0.002
    private var origin: UInt64 = 0
    private var timeline = 0.0
    private var baseline = 0.0
    private var run = 0
    /// Lost frames lately counted that stale frames may still turn out to be, and until when.
    private var credit = 0
    private var creditUntil: UInt64 = 0
    /// How long after a counted loss stale frames may be its audio arriving late.
    public static let lateAudioNanos: UInt64 = 2_000_000_000

    public init(frameNanos: Double) {
        self.frameNanos = frameNanos
        threshold = max(2, Self.lostThresholdMs * 1e6 / frameNanos)
        confirmFrames = max(2, Int((Self.lostThresholdMs * 1e6 / frameNanos).rounded(.up)))
    }

    /// One frame captured at `instant` (monotonic ns). Returns the frames of capture time lost
    /// just before it (0 almost always); they are on the timeline already when it returns.
    public mutating func frameCaptured(at instant: UInt64) -> Int {
        if origin == 0 { origin = instant }
        let lag = Double(Int64(bitPattern: instant &- origin)) / frameNanos - timeline
        if lag < baseline { baseline = lag } else { baseline += Self.follow }
        var lost = 0
        if lag - baseline > threshold {
            run += 1
            if run >= confirmFrames {
                lost = Int(lag - baseline)
                timeline += Double(lost)
                run = 0
                credit = (instant < creditUntil ? credit : 0) + lost
                creditUntil = instant &+ Self.lateAudioNanos
            }
        } else {
            run = 0
        }
        timeline += 1
        return lost
    }

    /// `stale` frames read at `now` and not sent (too old): returns how many of them are capture
    /// time not yet on the timeline. A sound server may hand a stop's capture over in pieces; its
    /// first piece, read as captured just then, had the clock count the stop as lost, and the
    /// later pieces are that time's audio: their time is on the timeline already.
    public mutating func staleFramesNotCounted(_ stale: Int, at now: UInt64) -> Int {
        guard now < creditUntil else { credit = 0; return stale }
        let counted = min(stale, credit)
        credit -= counted
        return stale - counted
    }
}
