/// What one step of the jitter buffer's playout did. Each frame read is zero or more steps that
/// produce nothing (they consume or skip a frame's worth of the stream, `producesFrame == false`)
/// followed by exactly one that produces the frame.
public enum PlayoutOutcome: Int, CaseIterable, Sendable {
    // Steps that produce the frame.
    /// Buffering: silence until the first packet is due (target - frame/2 late), or nothing is stored.
    case waiting
    /// The next frame of a packet longer than a frame, held in the decoder.
    case carried
    /// Silence of a gap in the timestamps (the sender's DTX); playout moves on by a frame.
    case gapSilence
    /// Silence of a DTX gap with the delay below target: playout stays, the delay grows a frame.
    case gapInserted
    /// Silence of a DTX gap with the delay above target: playout skips two frames, the delay shrinks a frame.
    case gapDropped
    /// A concealed frame with the delay below target in speech: nothing consumed, the delay grows a frame.
    case insertedConcealment
    /// The frame decoded from its own packet.
    case played
    /// A missing frame rebuilt from the next packet's in-band FEC.
    case fecRecovered
    /// A missing frame, with later packets at hand, concealed: lost.
    case concealedLoss
    /// The next packet is overdue and nothing later is at hand: concealed while it may still come.
    case underrunConcealed
    /// An underrun longer than `underrunConcealMs`: silence.
    case underrunSilence
    /// No packet for `resetGapMs` during an underrun: back to buffering, silence.
    case rebuffered

    // Steps that produce nothing.
    /// A packet whose frame an underrun concealed, arriving past target + frame with later packets at
    /// hand: let go (late) instead of growing the delay.
    case lateAfterUnderrun
    /// A decoded pause (quieter than `quietLevelDBFS`) dropped to shrink the delay.
    case droppedPause
    /// A decoded speech frame dropped to shrink the delay after a long excess.
    case droppedSpeech
    /// A sequence gap ending where a talk spurt starts (marker): silence that was never sent, not loss.
    case talkSpurtStart
    /// A missing frame whose time an underrun's concealment already filled: lost, nothing to play.
    case lostCovered
    /// A missing frame skipped instead of concealed to shrink the delay.
    case skippedMissing
    /// The delay beyond the maximum, or a reader back from a stall above target: buffered frames
    /// skipped back to the target at once.
    case cutBack

    /// Whether this step produces the frame (the last step of a read).
    public var producesFrame: Bool { rawValue <= PlayoutOutcome.rebuffered.rawValue }
}

/// The set of outcomes of one frame read; no allocation.
public struct PlayoutOutcomes: Sendable, Equatable {
    public private(set) var bits: UInt32 = 0
    public init() {}
    public func contains(_ outcome: PlayoutOutcome) -> Bool { bits & (1 << UInt32(outcome.rawValue)) != 0 }
    mutating func insert(_ outcome: PlayoutOutcome) { bits |= 1 << UInt32(outcome.rawValue) }
}

/// What the drift corrector learns from one frame read of its jitter buffer: the delay it steers,
/// the target it steers to, and the buffer's own steps of that delay, so that it never has to
/// infer them.
public struct PlayoutReport: Sendable, Equatable {
    /// Whether the frame holds anything audible (`FrameSource.readFrame`'s result).
    public var audible: Bool
    /// Whether the frame is a pause: silence, or below the buffer's quiet level.
    public var quiet: Bool
    /// Whether the buffer is playing after the read (false: buffering, nothing to steer).
    public var playing: Bool
    /// How far this read moved the delay beyond its one frame of playout, samples: +frame for an
    /// insert, -frame per frame dropped, the concealed frames an overdue packet adds when it is
    /// played, the time a stalled reader did not read (beyond a frame). 0 unless the buffer was
    /// playing before and after.
    public var stepSamples: Int
    /// Of `stepSamples`, the buffer's own inserts and drops (it moves its delay back into its band);
    /// the rest is what late packets did to it.
    public var correctionSamples: Int
    /// The buffer's delay of the frame read (see `JitterBuffer`), ms.
    public var delayMs: Double
    /// The buffer's target delay, ms.
    public var targetMs: Double
    /// The window's floor transit above its fastest, ms (`JitterSettings.floorPercentile`).
    public var floorMs: Double
    /// The floor transit itself, ns (arrival minus timestamp, with their clocks' unknown offset):
    /// only its moves mean anything, a path's step or a clock's drift.
    public var floorTransitNs: Int64
    /// Whether nobody read for longer than `JitterSettings.consumerStallMs` before this read (the
    /// audio thread or the whole process stopped): what the reading is taken against may have
    /// moved with it (the speaker's queue after its restart, a backlog stamped at once).
    public var readerStalled: Bool

    public init(audible: Bool, quiet: Bool, playing: Bool, stepSamples: Int, correctionSamples: Int = 0, delayMs: Double,
                targetMs: Double, floorMs: Double = 0, floorTransitNs: Int64 = 0, readerStalled: Bool = false) {
        self.audible = audible
        self.quiet = quiet
        self.playing = playing
        self.stepSamples = stepSamples
        self.correctionSamples = correctionSamples
        self.delayMs = delayMs
        self.targetMs = targetMs
        self.floorMs = floorMs
        self.floorTransitNs = floorTransitNs
        self.readerStalled = readerStalled
    }
}
