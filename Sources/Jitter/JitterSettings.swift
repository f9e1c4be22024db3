import RealTime

/// Configuration of one `JitterBuffer` (one remote stream).
///
/// What the daemon's configuration decides (frame size, rate, delay bounds) has no default here:
/// its one default is the configuration schema's (`JitterSettings(config)` in `WireToSpeaker`).
/// The tuning below is not configurable, and this is the one place its values are written.
public struct JitterSettings: Sendable, Equatable {
    /// Samples per frame and per packet (480 = 10 ms at 48 kHz; 120/240/960 for 2.5/5/20 ms).
    public var frameSize: Int
    /// RTP clock and output rate (48 kHz for Opus).
    public var sampleRate: Int
    /// Bounds of the adaptive target delay.
    public var minDelayMs: Double
    public var maxDelayMs: Double
    /// Reorder slots (packets); rounded up to a power of two and to at least twice `maxDelayMs` of frames.
    public var capacity: Int
    /// Largest payload accepted.
    public var maxPayloadBytes: Int
    /// The transit-delay percentile the target covers (0.95), over the last `windowMs` of packets.
    public var percentile: Double
    public var windowMs: Double
    /// The high transit percentile (0.99) that tells how far the window's tail reaches beyond
    /// `percentile`: the margin the target keeps above the percentile is that reach plus
    /// `tailMarginFrames`, at most half a frame (see `TargetPolicy`).
    public var tailPercentile: Double
    /// The least margin above the tail, in frames: room for the drift corrector's dead band and
    /// setpoint tolerance (0.15 frame) and its reading's noise.
    public var tailMarginFrames: Double
    /// The low transit percentile (0.05) the drift corrector measures its delay against instead
    /// of the window's fastest transit. The fastest of 200 packets is one packet's luck: on the rig
    /// it moved by ±0.3 ms within seconds, and further while the window filled, and the corrector
    /// read each move as drift (22 ppm after 10 s on one clock in a CI run). Ten packets deep, the
    /// floor follows a clock's drift just the same. Not deeper: under 30 ms of uniform jitter the
    /// tenth percentile wanders by ±0.6 ms from the fastest, which the buffer's band is measured from.
    public var floorPercentile: Double
    /// The target shrinks once per `shrinkIntervalMs`, by half its distance to the desired delay
    /// (at least a frame). In continuous speech a frame is dropped after this long above target.
    public var shrinkIntervalMs: Double
    /// ...and only once the stream has been quiet this long (a pause between turns, not between
    /// words: a talker's pauses between phrases last 0.2-0.7 s), so that the delay heard holds
    /// still while someone talks. A rise is never held: it saves packets from coming late.
    public var shrinkPauseMs: Double
    /// A stream that never pauses that long (a room whose noise stays above `quietLevelDBFS`)
    /// still shrinks, once the target has held this long.
    public var shrinkUnpausedMs: Double
    /// Above target by n frames, speech frames are dropped every `shrinkIntervalMs / n`, but at
    /// most one in this many frames (20: 5 % faster playout, at any frame size).
    public var minDropIntervalFrames: Int
    /// A decoded frame quieter than this (RMS, dBFS) is a pause: dropped at once while the delay is
    /// above target; the target shrinks and the drift corrector jumps only in pauses.
    public var quietLevelDBFS: Double
    /// With no packet for this long and nothing buffered, the buffer starts over (buffering, silence).
    public var resetGapMs: Double
    /// While waiting for an overdue packet, conceal this long, then play silence until it comes.
    public var underrunConcealMs: Double
    /// Whether continuous speech may lose a decoded frame to shrink the delay (see `JitterBuffer`).
    public var dropInSpeech: Bool
    /// Packets arriving this close after one that ended a silence of the network are its backlog,
    /// left out of the percentile, in frames. A backlog comes faster than real time (a link lets
    /// it go at line rate; a receiver that was frozen reads it from its socket at once, which in
    /// a slow build can take a millisecond a packet); packets sent in real time come a frame apart.
    public var backlogSpacingFrames: Double
    /// Reads this far apart mean the consumer stalled (the audio thread was starved, its device
    /// ran dry): the listener has heard that gap already, so the delay it left is cut back to
    /// the target at once instead of being dropped frame by frame over seconds.
    public var consumerStallMs: Double
    /// After any lost frame, or one the next packet's FEC repaired, the target stays at two frames
    /// or more for this long, so that the next loss finds its successor at hand. 0: never (the
    /// delay then follows jitter alone).
    public var fecHoldMs: Double
    /// Frames of speech in a row followed by packets without FEC for them after which the sender
    /// counts as one that makes none (FEC off, or CELT only): its losses no longer hold the
    /// look-ahead. A sender with FEC on puts it after nearly every frame of speech.
    public var fecAbsentAfterFrames: Int

    public init(frameSize: Int, sampleRate: Int, minDelayMs: Double, maxDelayMs: Double,
                capacity: Int = 64, maxPayloadBytes: Int = 1500, percentile: Double = 0.95, windowMs: Double = 2000, floorPercentile: Double = 0.05,
                tailPercentile: Double = 0.99, tailMarginFrames: Double = 0.25,
                shrinkIntervalMs: Double = 3000, shrinkPauseMs: Double = 1000, shrinkUnpausedMs: Double = 30_000, resetGapMs: Double = 200, underrunConcealMs: Double = 60,
                dropInSpeech: Bool = true, minDropIntervalFrames: Int = 20, quietLevelDBFS: Double = -45,
                backlogSpacingFrames: Double = 0.5, consumerStallMs: Double = 80, fecHoldMs: Double = 10_000, fecAbsentAfterFrames: Int = 50) {
        self.frameSize = frameSize
        self.sampleRate = sampleRate
        self.minDelayMs = minDelayMs
        self.maxDelayMs = maxDelayMs
        self.capacity = capacity
        self.maxPayloadBytes = maxPayloadBytes
        self.percentile = percentile
        self.windowMs = windowMs
        self.floorPercentile = floorPercentile
        self.tailPercentile = tailPercentile
        self.tailMarginFrames = tailMarginFrames
        self.shrinkIntervalMs = shrinkIntervalMs
        self.shrinkPauseMs = shrinkPauseMs
        self.shrinkUnpausedMs = shrinkUnpausedMs
        self.resetGapMs = resetGapMs
        self.underrunConcealMs = underrunConcealMs
        self.dropInSpeech = dropInSpeech
        self.minDropIntervalFrames = minDropIntervalFrames
        self.quietLevelDBFS = quietLevelDBFS
        self.backlogSpacingFrames = backlogSpacingFrames
        self.consumerStallMs = consumerStallMs
        self.fecHoldMs = fecHoldMs
        self.fecAbsentAfterFrames = fecAbsentAfterFrames
    }

    public var frameMs: Double { Double(frameSize) * 1000 / Double(sampleRate) }
    /// The target on a path without jitter: half a frame and the least margin, within the bounds.
    public var jitterFreeTargetMs: Double { max(minDelayMs, min(maxDelayMs, frameMs / 2 + tailMarginFrames * frameMs)) }
    /// Packets in the transit window (`windowMs` of frames, at least 16).
    public var windowCount: Int { max(16, Int((windowMs / frameMs).rounded(.up))) }
}

/// Statistics of one jitter buffer: written by the audio thread, readable from any thread.
public final class JitterStatistics: Sendable {
    /// Packets taken from the queue (all of them, including late, duplicate and overflowing ones).
    public let received = Counter()
    /// Frames decoded from their own packet.
    public let played = Counter()
    /// Frames concealed because their packet was missing while later ones had arrived (lost).
    public let lost = Counter()
    /// Frames recovered from the next packet's in-band FEC.
    public let fecRecovered = Counter()
    /// Of `lost`: frames whose repair came too late: the next packet carried FEC for them but
    /// arrived after they had been concealed (the target held at two frames had not yet been
    /// reached, see `fecHoldMs`).
    public let fecMissed = Counter()
    /// Packets arriving after their frame was played (or skipped); dropped.
    public let late = Counter()
    /// Packets received twice; the copy is dropped.
    public let duplicates = Counter()
    /// Packets too far ahead of the playout point for the reorder store; dropped.
    public let overflow = Counter()
    /// Frames of silence played (buffering, DTX gaps, long underruns).
    public let silenceFrames = Counter()
    /// Frames played while waiting for an overdue packet with nothing buffered (concealed or silent).
    /// Not counted as lost: the packet may still come (then the delay has grown by these frames).
    public let underruns = Counter()
    /// Frames inserted (concealment or silence, nothing consumed) to grow the delay to the target.
    public let inserted = Counter()
    /// Frames dropped (silence skipped, a missing frame not concealed, a pause or a speech frame
    /// decoded and discarded) to shrink the delay.
    public let dropped = Counter()
    /// Of `dropped`: decoded frames dropped because they were pauses (quieter than `quietLevelDBFS`).
    public let droppedQuiet = Counter()
    /// Times the delay exceeded the maximum and buffered frames were skipped back to the target.
    public let cutBacks = Counter()
    /// Packets of a stall's backlog (arrived together after a silence of the network), left out of
    /// the transit percentile.
    public let backlogPackets = Counter()
    /// Times the reader came back after a stall (`consumerStallMs`) with the delay above target.
    public let consumerStalls = Counter()
    /// Reads that came more than `JitterBuffer.heldUpFrames` frames after the one before: the
    /// device (or its sound server) or the machine held the reader up, which moves the delay heard.
    public let readerHeldUp = Counter()
    /// Packets that arrived more than `JitterBuffer.heldUpFrames` frames after the one just before
    /// them in sequence and time: the sender, its machine or the path held them back.
    public let arrivalStalls = Counter()
    /// Returns to the buffering state after a long gap or a stream restart.
    public let rebuffers = Counter()
    /// Decoder calls that returned an error (silence played instead).
    public let decodeErrors = Counter()
    /// Delay of the frame being played beyond the fastest transit seen in the window, ms.
    public let currentDelayMs = Gauge()
    /// The adaptive target for `currentDelayMs`, ms.
    public let targetDelayMs = Gauge()
    /// Audio buffered beyond the playout point (newest timestamp + frame - playout timestamp), ms.
    public let bufferLevelMs = Gauge()
    /// The transit-delay percentile over the window (relative to the window's minimum), ms.
    public let jitterPercentileMs = Gauge()
    /// The sender's clock rate relative to ours as estimated by the `DriftCorrector`, ppm (positive:
    /// the sender is fast); 0 without a corrector.
    public let driftPPM = Gauge()
    /// The playout-rate trim the `DriftCorrector` applies now, ppm: the drift estimate plus what it
    /// works off (a step, the start's offset); 0 without a corrector.
    public let driftTrimPPM = Gauge()
    /// How far the corrector's resampling has moved the delay since the stream started, summed
    /// without sign, ms: on one shared clock every millisecond of it is a slew the ear may notice.
    public let slewedMs = Gauge()
    /// How far the corrector's jumps in pauses moved the delay since the stream started, summed
    /// without sign, ms: moves nobody hears, made where a slew would have gone on into speech.
    public let pauseJumpedMs = Gauge()
    /// How far the fastest transit in the window moved in steps of a quarter frame or more, summed
    /// without sign, ms: the sender's timeline shifted (its capture handed over at another phase),
    /// and the delay follows to keep its margin. Moves of the path, not of the playout.
    public let pathShiftMs = Gauge()
    /// How old the newest sample handed on is, beyond the fastest transit, ms: the buffer's and the
    /// corrector's share of the delay together (0 while not playing).
    public let playoutDelayMs = Gauge()
    /// Times the transit window was forgotten because a silence of the network ended in another
    /// timeline (`TargetPolicy`).
    public let newTimelines = Counter()

    public init() {}
}
