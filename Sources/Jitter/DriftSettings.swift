/// Configuration of one `DriftCorrector`. Whether it runs is the configuration's
/// (`jitter.drift_correction`, no default here); the loop's tuning is not configurable and is
/// written only here.
///
/// The loop (see `DriftController`): trim = P·e + I·∫e dt, e = the smoothed delay error in ms
/// beyond the dead band (`deadBandFrames`), trim in ppm of playout rate; a trim of x ppm moves the
/// delay by x·1e-3 ms per second. With the defaults a 1 ms error trims 200 ppm (P alone settles
/// in 1 / 0.2 s⁻¹ = 5 s) and I = P²·1e-3/4 makes the loop critically damped (ω = 0.1 s⁻¹): a
/// 200 ppm sender peaks at 0.2 ms/s / (ω·e) = 0.74 ms of error while the drift estimate
/// converges, within about a minute.
public struct DriftSettings: Sendable, Equatable {
    /// Off: frames pass straight from the jitter buffer (its own insert/drop handles drift).
    public var enabled: Bool
    /// Trim per ms of smoothed delay error, ppm/ms.
    public var proportionalPPMPerMs: Double
    /// Trim added per second per ms of smoothed delay error, ppm/(ms·s): the drift estimate's rate.
    public var integralPPMPerMsSecond: Double
    /// Largest trim either way, ppm; also bounds the drift estimate. 1000 ppm = 1 ms per second,
    /// a 1.7-cent pitch change: inaudible, and five times the worst crystal pair (±100 ppm each).
    public var maxTrimPPM: Double
    /// Time constant of the error smoothing, ms: the audio thread's wake-ups make each reading jitter
    /// by up to a period, and a 1 s average of that is well below a millisecond.
    public var smoothingMs: Double
    /// The longest the loop's start may take, ms: the start's offset is the mean of a smoothing
    /// time without a discrete change in it, and a step during that time starts the mean over
    /// only while a whole smoothing time still fits in this. A path that steps all the time (an
    /// underrun a second) still gets its drift followed, from a noisier start.
    public var startSettleMs: Double
    /// The setpoint follows the jitter buffer's target only once the target has moved more than
    /// this, in frames. The percentile the target comes from moves by tenths of a ms all the time,
    /// and following each move at the full trim walks the playout delay in bursts of 1 ms per second;
    /// another terminal's `LoopCanceller`, which cancels its own voice through this delay, loses what
    /// it learnt. Held, the delay sits up to this much off the setpoint, inside the buffer's margins.
    public var setpointToleranceFrames: Double
    /// Where the loop holds the age of the newest sample handed on: this many frames under the
    /// jitter buffer's target. Frames are pulled whole, so the buffer sees delays from that age to
    /// a frame more: here [target - frame/2, target + frame/2), the band direct playout keeps.
    public var setpointFrames: Double
    /// While a corrector steers it, the buffer inserts a frame only below the lowest delay it
    /// should see by this much (`JitterBuffer.insertBelowTarget`), in frames: room for the dead
    /// band, the setpoint's tolerance and the reading's noise.
    public var insertMarginFrames: Double
    /// Half-width of the dead band, in frames: while the smoothed delay error stays within it the
    /// trim is the drift estimate alone, so that without drift (or once the estimate has it) the
    /// playout delay holds still instead of following the reading's noise.
    public var deadBandFrames: Double
    /// A smoothed error beyond this, in frames, is no drift: a clock pair within the crystals'
    /// ±100 ppm each holds the loop's error under 1.5 ms, and beyond it is a step nothing reported
    /// (the sound server's queue moving by a period against the writes: the newest sample handed
    /// on a period older while what the listener hears stays put). The drift estimate does not
    /// learn from the excursion: not from the second of rise before it (`learnLagMs`), not while
    /// it lasts, and not from its way back (`learnHoldMs`).
    public var excursionFrames: Double
    /// What the integral learns is held this long before it enters the estimate, ms, in two halves:
    /// an excursion discards what is still held, so that the smoothed error's rise to the bound
    /// (a second for a step of a period) is not taken for drift.
    public var learnLagMs: Double
    /// After an excursion the estimate learns again once the error is back inside the dead band, or
    /// after this long, ms: the way back, worked off by the proportional term, is the step's, not a
    /// drift's (a real drift that keeps the error outside the band is followed again after it).
    public var learnHoldMs: Double
    /// Once the stream has been quiet this long (ms), what the loop still has to work off (a
    /// setpoint move, a step of the buffer) is made at once instead of slewed: input samples
    /// dropped or silence played, a frame at a time and only while the stream stays quiet. In a
    /// pause nobody hears it, and the delay stands still by the time the talker goes on.
    public var pauseJumpMs: Double
    /// The floor transit moving away from what drift could have made of it by more than this, in
    /// frames, is a step of the path (`PathStepDetector`): taken up by the offset, not the drift
    /// estimate.
    public var pathStepFrames: Double
    /// How fast the floor may move away from the drift estimate's ramp before the distance counts
    /// toward a step, ppm: room for the estimate to converge, and for the percentile's wandering.
    public var floorSlewPPM: Double
    /// speexdsp resampler quality 0...10. Its filter delays the audio by half its length, in
    /// every frame: 8 samples (0.17 ms at 48 kHz) at 1, 24 (0.5 ms) at 3, speexdsp's VoIP default.
    /// At 1, and the largest trim, a tone up to 12 kHz comes out with its distortion under -68 dB
    /// and its level within 0.3 dB up to 16 kHz (`DriftResamplerTests`): far under Opus's own
    /// coding noise, so the longer filter would buy 0.33 ms of delay and nothing a listener hears.
    public var resamplerQuality: Int

    public init(enabled: Bool, proportionalPPMPerMs: Double = 200, integralPPMPerMsSecond: Double = 10,
                maxTrimPPM: Double = 1000, smoothingMs: Double = 1000, startSettleMs: Double = 5000, setpointToleranceFrames: Double = 0.1,
                setpointFrames: Double = 0.5, insertMarginFrames: Double = 0.25, deadBandFrames: Double = 0.05, excursionFrames: Double = 0.25, learnLagMs: Double = 2000, learnHoldMs: Double = 10_000, pathStepFrames: Double = 0.05, floorSlewPPM: Double = 200, pauseJumpMs: Double = 50, resamplerQuality: Int = 1) {
        self.enabled = enabled
        self.proportionalPPMPerMs = proportionalPPMPerMs
        self.integralPPMPerMsSecond = integralPPMPerMsSecond
        self.maxTrimPPM = maxTrimPPM
        self.smoothingMs = smoothingMs
        self.startSettleMs = startSettleMs
        self.setpointToleranceFrames = setpointToleranceFrames
        self.setpointFrames = setpointFrames
        self.insertMarginFrames = insertMarginFrames
        self.deadBandFrames = deadBandFrames
        self.excursionFrames = excursionFrames
        self.learnLagMs = learnLagMs
        self.learnHoldMs = learnHoldMs
        self.pathStepFrames = pathStepFrames
        self.floorSlewPPM = floorSlewPPM
        self.pauseJumpMs = pauseJumpMs
        self.resamplerQuality = resamplerQuality
    }
}
