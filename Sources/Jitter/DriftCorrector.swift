import Frames
import RealTime
import SpeexDSP

/// Clock-drift correction for one stream: pulls frames from a `JitterBuffer` and resamples them
/// (speexdsp) at a ratio trimmed by `DriftController`, so that a sender whose clock is a few hundred
/// ppm off ours never makes the jitter buffer insert or drop a frame.
///
/// Control. The reading is the age of the newest sample handed to the resampler: the buffer's delay
/// at the last pull plus the time since, minus what was consumed of that frame, taken against the
/// window's floor transit (`JitterSettings.floorPercentile`) rather than its fastest packet. Frames are pulled
/// whole and only when needed, so the buffer sees delays from that age to one frame more, wherever
/// drift has moved the pulls against the reads. The setpoint `target - frame/2`
/// (`DriftSettings.setpointFrames`) keeps that spread where direct playout keeps its delay,
/// [target - frame/2, target + frame/2), and the buffer inserts only below target - 3/4 frame
/// while it steers (`JitterBuffer.insertBelowTarget`), so the spread never reaches an edge: a
/// quarter frame of margin below, half a frame above the drop edge at target + frame.
/// The setpoint follows the target only once the target has moved by more than a tenth of a frame
/// (`DriftSettings.setpointToleranceFrames`): the delay holds still while the percentile wanders.
/// For the same reason the trim is the drift estimate alone while the smoothed error stays within
/// a dead band (`DriftSettings.deadBandFrames`), and the start's offset is the mean of a second
/// with no discrete change in it (`DriftController`).
/// Discrete changes (the buffer inserting or dropping, an underrun's late packet, the setpoint
/// moving, which the buffer reports in each pull's `PlayoutReport`, and the floor stepping with
/// the path, which `PathStepDetector` tells from drift) are taken up by the
/// controller's offset and worked off smoothly; the buffer's own insert/drop stays the coarse
/// control for what the trim cannot follow.
///
/// Start. Where playout (re)starts, up to two frames from the setpoint, the corrector jumps there at
/// once (drops input samples or plays silence first) instead of slewing: a slew at the full trim
/// moves the delay by 1 ms per second for several seconds, and another terminal that hears this one
/// can only cancel the loop through it (`LoopCanceller`) while that delay holds still. A reader
/// that stopped for a while (`PlayoutReport.readerStalled`) starts the loop over the same way.
///
/// Pauses. What the offset still holds of a setpoint move or of an underrun's growth is made at
/// once the same way once the stream has been quiet for `pauseJumpMs`, a frame per read and only
/// while the pause lasts: a target that moved while someone talked is slewed no further than the
/// next pause, and the delay holds still in speech. The buffer's own inserts and drops are left to
/// the trim (see `jumpableMs`).
///
/// Added delay. The newest sample played is `target - frame/2` old, plus the resampler's filter,
/// `resamplerDelaySamples` (half its length: 8 samples = 0.17 ms at quality 1, 48 kHz). Pulled
/// directly it is `d - frame` old, the buffer's delay d being anywhere in the band (without drift it
/// stays where playout started, in [target - frame/2, target + frame/2)): on average the corrector
/// adds half a frame + 0.17 ms (5.2 ms at 10 ms frames), the price of pulling whole frames at
/// whatever point of a read the resampler runs out.
///
/// Threads: `readFrame` runs on the audio thread and neither allocates (everything, including
/// speexdsp's filter tables for every ratio within the clamp, is allocated in `init`), locks nor
/// logs. `reset()` has the jitter buffer's precondition: nobody reads or pushes meanwhile.
public final class DriftCorrector: FrameSource, @unchecked Sendable {
    // @unchecked: all mutable state is touched by the audio thread only (or by `reset` when it is not running).

    /// The ratio is (2^16 + steps) / 2^16, i.e. 15.3 ppm steps; the loop dithers between them.
    /// speexdsp rescales its phase by new/old denominator in 32 bits: with denominators near 10^6
    /// that overflows, `set_rate_frac` fails half-way and the next `process` reads out of bounds.
    public static let ratioDenominator: Int = 1 << 16
    /// The resolution of the trim, ppm.
    public static let ratioStepPPM = 1e6 / Double(ratioDenominator)

    public let buffer: JitterBuffer
    public let settings: DriftSettings

    private let frameSize: Int
    private let frameMs: Double
    private let samplesPerMs: Double
    private let resampler: SpeexResampler
    private var controller: DriftController
    /// The last frame pulled, consumed from `head` (`head == frameSize`: empty).
    private let pending: UnsafeMutablePointer<Int16>
    private var head = 0
    /// The trim the resampler runs at, in steps of 1/`ratioDenominator`.
    private var appliedSteps = 0
    private var latency = 0
    private var pulled = false
    private var delayAtPullMs = 0.0
    private var pullNanos: Int64 = 0
    /// Delay steps the jitter buffer reported during this frame's pulls, samples.
    private var stepSamples = 0
    /// The last pull's report: whether the buffer plays, its target and its floor transit (ms).
    private var playing = false
    private var targetMs = 0.0
    private var floorMs = 0.0
    /// The floor transit where the loop started: the reading is the age against the floor
    /// (`JitterSettings.floorPercentile`), in the setpoint's terms as of that moment.
    private var floorAtStartMs = 0.0
    /// Where the loop holds the age of the newest sample handed on (ms), now and at the last reading.
    private var setpointMs = 0.0
    private var lastSetpointMs = 0.0
    private let setpointTolerance: Double
    /// Input positions (samples pulled since reset): end of the newest audible frame.
    private var pulledSamples = 0
    private var audibleUntil = Int.min / 2
    /// The start's jump still to make: input samples to drop (> 0) or silent samples to play (< 0).
    private var jumpSamples = 0
    /// Jumps still to make at the start of playout: the first lands near the setpoint (the reading
    /// it was taken from is one pull's), the second on it.
    private var startJumps = startJumps
    private static let startJumps = 2
    /// Delay moved by resampling since the slot was made, ms (published as `slewedMs`), and by
    /// jumps in pauses (`pauseJumpedMs`).
    private var slewedMs = 0.0
    private var pauseJumpedMs = 0.0
    /// Input samples pulled since the last one above the buffer's quiet level, and how many make a
    /// pause to jump in (`DriftSettings.pauseJumpMs`).
    private var quietSamples = 0
    private let pauseSamples: Int
    /// Whether the jump under way is a pause's (it stops where speech comes back).
    private var pauseJump = false
    /// The smallest jump made in a pause, ms: a dead band's worth; less is left to the trim.
    private let pauseJumpMinMs: Double
    /// The part of the controller's offset a pause may make at once: setpoint moves and what late
    /// packets did to the delay (an underrun grows it by what was concealed), less the jumps made.
    /// Not the buffer's own inserts and drops: it makes them when its delay has left its band, and
    /// a jump undoing one at once would have it make it again at the next frame.
    private var jumpableMs = 0.0
    /// The buffer's own inserts and drops among this read's steps, samples.
    private var correctionSamples = 0
    /// Delay steps of the jumps made during this read, samples.
    private var jumpedSamples = 0
    /// The floor transit at the last pull, and what tells its steps from drift.
    private var floorTransitNs: Int64 = 0
    private var pathSteps: PathStepDetector
    /// A pull of this read found that nobody had read for a while (`PlayoutReport.readerStalled`).
    private var readerStalled = false

    public init(buffer: JitterBuffer, settings: DriftSettings) throws {
        precondition(settings.maxTrimPPM < 100_000, "a trim beyond 10 % is not drift")
        self.buffer = buffer
        self.settings = settings
        frameSize = buffer.settings.frameSize
        frameMs = buffer.settings.frameMs
        samplesPerMs = Double(buffer.settings.sampleRate) / 1000
        setpointTolerance = settings.setpointToleranceFrames * buffer.settings.frameMs
        pauseSamples = Int((settings.pauseJumpMs * Double(buffer.settings.sampleRate) / 1000).rounded(.up))
        pauseJumpMinMs = settings.deadBandFrames * buffer.settings.frameMs
        controller = DriftController(settings: settings, frameMs: frameMs)
        pathSteps = PathStepDetector(slewPPM: settings.floorSlewPPM,
                                     thresholdNs: Int64(settings.pathStepFrames * buffer.settings.frameMs * 1e6),
                                     windowCount: buffer.settings.windowCount, windowNs: Int64(buffer.settings.windowMs * 1e6))
        resampler = try SpeexResampler(rate: buffer.settings.sampleRate, quality: settings.resamplerQuality)
        // speexdsp grows its filter table and memory on ratio changes but never shrinks them: visiting
        // both ends of the clamp here makes every later change allocation-free.
        let extreme = Self.steps(settings.maxTrimPPM) + 1
        for steps in [extreme, -extreme] {
            let rc = resampler.setRatio(numerator: UInt32(Self.ratioDenominator + steps), denominator: UInt32(Self.ratioDenominator))
            precondition(rc == 0, "speexdsp refused the ratio for \(settings.maxTrimPPM) ppm")
        }
        pending = .allocate(capacity: frameSize)
        pending.initialize(repeating: 0, count: frameSize)
        if settings.enabled { buffer.insertBelowTarget(frames: settings.setpointFrames + settings.insertMarginFrames) }
        restart()
    }

    deinit { pending.deallocate() }

    /// Smoothed delay error, ms (the loop's input).
    public var errorMs: Double { controller.errorMs }
    /// The drift estimate, ppm (also `buffer.statistics.driftPPM`).
    public var driftPPM: Double { controller.driftPPM }
    /// The current trim of the playout rate, ppm.
    public var trimPPM: Double { controller.trimPPM }
    /// Age of the newest sample played beyond the fastest transit, ms: the buffer's delay measure,
    /// continuous instead of stepping by a frame at each pull (0 while the buffer is not playing).
    public private(set) var delayMs = 0.0
    /// Input samples consumed since the last reset (pulled from the buffer, or skipped by a start
    /// jump): against the output's sample count, the delay as played.
    public var consumedSamples: Int { pulledSamples - (frameSize - head) }
    /// Delay of the resampler's filter, samples.
    public var resamplerDelaySamples: Int { latency }

    /// Produces exactly one frame; returns false when it holds nothing audible (the meaning of
    /// `JitterBuffer.readFrame`). Disabled: the jitter buffer's frame, unchanged.
    @discardableResult
    public func readFrame(into out: UnsafeMutablePointer<Int16>, count: Int) -> Bool {
        guard settings.enabled else {
            let audible = buffer.readFrame(into: out, count: count)
            // The frame's newest sample is a frame younger than the frame's delay.
            buffer.statistics.playoutDelayMs.store(buffer.isPlaying ? max(0, buffer.currentDelayMs - frameMs) : 0)
            return audible
        }
        guard count == frameSize else {
            out.update(repeating: 0, count: count)
            return false
        }
        let now = buffer.playoutNow()
        // The filter reaches `latency` samples either side of what it outputs.
        let outputStart = pulledSamples - (frameSize - head) - 2 * latency
        var produced = 0
        var pulls = 0
        // A jump is a step of the delay like the buffer's own: silence played grows it, input
        // dropped shrinks it.
        if jumpSamples < 0 {
            produced = min(-jumpSamples, count)
            out.update(repeating: 0, count: produced)
            jumpSamples += produced
            stepSamples += produced
            jumpedSamples += produced
        }
        var skips = 0
        while jumpSamples > 0 {
            if head == frameSize {
                guard skips < 3 else { jumpSamples = 0; break }
                pull(now: now)
                skips += 1
                // Speech is back: the rest is left to the trim.
                if pauseJump && quietSamples == 0 { jumpSamples = 0; break }
            }
            let k = min(jumpSamples, frameSize - head)
            head += k
            jumpSamples -= k
            stepSamples -= k
            jumpedSamples -= k
        }
        while true {
            if head < frameSize {
                let r = resampler.process(pending + head, inputCount: frameSize - head,
                                          into: out + produced, outputCapacity: count - produced)
                head += r.consumed
                produced += r.produced
            }
            if produced == count { break }
            // Within the clamp two pulls suffice; a third would mean a stuck resampler.
            guard pulls < 3 else {
                (out + produced).update(repeating: 0, count: count - produced)
                break
            }
            pull(now: now)
            pulls += 1
        }
        steer(now: now)
        return audibleUntil > outputStart
    }

    /// Returns corrector and jitter buffer to their freshly initialised state (a new stream in this
    /// slot). Same precondition as `JitterBuffer.reset()`; resets the buffer, so call only this one.
    public func reset() {
        buffer.reset()
        restart()
    }

    private func restart() {
        controller.reset()
        resampler.setRatio(numerator: 1, denominator: 1)
        resampler.reset()
        appliedSteps = 0
        latency = resampler.inputLatency
        head = frameSize
        pulled = false
        delayAtPullMs = 0
        pullNanos = 0
        stepSamples = 0
        playing = false
        targetMs = 0
        floorMs = 0
        floorAtStartMs = 0
        setpointMs = 0
        lastSetpointMs = 0
        delayMs = 0
        pulledSamples = 0
        audibleUntil = Int.min / 2
        jumpSamples = 0
        startJumps = Self.startJumps
        quietSamples = 0
        pauseJump = false
        jumpableMs = 0
        jumpedSamples = 0
        correctionSamples = 0
        floorTransitNs = 0
        readerStalled = false
        pathSteps.reset()
    }

    private func pull(now: Int64) {
        let report = buffer.pull(into: pending, count: frameSize)
        if report.audible { audibleUntil = pulledSamples + frameSize }
        quietSamples = report.quiet ? quietSamples + frameSize : 0
        stepSamples += report.stepSamples
        correctionSamples += report.correctionSamples
        playing = report.playing
        targetMs = report.targetMs
        floorMs = report.floorMs
        floorTransitNs = report.floorTransitNs
        if report.readerStalled { readerStalled = true }
        pulledSamples += frameSize
        head = 0
        pulled = true
        delayAtPullMs = report.delayMs
        pullNanos = now
    }

    private func steer(now: Int64) {
        let trim: Double
        if pulled && playing {
            if readerStalled {
                // A stopped reader (an xrun, the process frozen) comes back to a speaker queue
                // restarted at another fill and a backlog stamped at once: steps of the reading's
                // reference that no report carries. Playout starts over as far as the loop is
                // concerned: it jumps to the setpoint (within the stall's own gap) and takes a
                // fresh offset, keeping its drift estimate.
                startOver()
            }
            let ageMs = delayAtPullMs + Double(now - pullNanos) / 1e6 - Double(head) / samplesPerMs
            // The setpoint follows the target only past the tolerance (see `DriftSettings`).
            let wanted = targetMs - settings.setpointFrames * frameMs
            // While the start's jumps run the controller holds, so the step they leave is never read.
            if startJumps > 0 || abs(wanted - setpointMs) > setpointTolerance { setpointMs = wanted }
            delayMs = ageMs + Double(latency) / samplesPerMs
            let stepMs = Double(stepSamples) / samplesPerMs - (setpointMs - lastSetpointMs)
            // Against the floor, not the window's fastest packet, whose luck is no drift; the
            // start's jumps land on the setpoint as the buffer measures it.
            if startJumps > 0 {
                floorAtStartMs = floorMs
                pathSteps.start(at: floorTransitNs, now: now)
            }
            let errorMs = ageMs - setpointMs - (floorMs - floorAtStartMs)
            if startJumps > 0 {
                // Once the last jump is done, the reading shows where it landed: one more trims the rest.
                if jumpSamples == 0 {
                    jumpSamples = max(-2 * frameSize, min(2 * frameSize, Int((errorMs * samplesPerMs).rounded())))
                    pauseJump = false
                    startJumps -= 1
                }
                trim = controller.hold()
                jumpableMs = 0
            } else {
                // A step of the path is a discrete change like the buffer's: the reading moves the
                // other way (the frames played are that much younger against the new floor).
                let spreadNs = Int64((targetMs - frameMs - floorMs) * 1e6)  // the target is the percentile + a frame
                let pathStepMs = Double(pathSteps.update(floorNs: floorTransitNs, spreadNs: spreadNs, driftPPM: controller.driftPPM, now: now)) / 1e6
                trim = controller.update(errorMs: errorMs, stepMs: stepMs - pathStepMs)
                if pauseJump { pauseJumpedMs += Double(abs(jumpedSamples)) / samplesPerMs }
                // All steps but the buffer's corrections (and a start jump's, never read).
                let startJumped = pauseJump ? 0 : jumpedSamples
                jumpableMs += Double(stepSamples - correctionSamples - startJumped) / samplesPerMs - (setpointMs - lastSetpointMs) - pathStepMs
                // Never more than the offset still holds (the trim works it off too).
                let offset = controller.offsetMs
                jumpableMs = offset >= 0 ? min(max(jumpableMs, 0), offset) : max(min(jumpableMs, 0), offset)
                // In a pause it goes at once, a frame per read; the next reading's step takes the
                // jump out of the offset.
                if jumpSamples == 0 && controller.isSettled && quietSamples >= pauseSamples && abs(jumpableMs) >= pauseJumpMinMs {
                    jumpSamples = max(-frameSize, min(frameSize, Int((jumpableMs * samplesPerMs).rounded())))
                    pauseJump = true
                }
            }
            lastSetpointMs = setpointMs
        } else {
            delayMs = 0
            startOver()
            trim = controller.hold()
        }
        stepSamples = 0
        correctionSamples = 0
        jumpedSamples = 0
        readerStalled = false
        let stats = buffer.statistics
        stats.driftPPM.store(controller.driftPPM)
        stats.driftTrimPPM.store(trim)
        // The delay moves by trim · 1e-6 of each frame played at it.
        if playing { slewedMs += abs(trim) * 1e-6 * frameMs }
        stats.slewedMs.store(slewedMs)
        stats.pauseJumpedMs.store(pauseJumpedMs)
        stats.playoutDelayMs.store(delayMs)
        let steps = Self.steps(trim)
        guard steps != appliedSteps else { return }
        // Input samples per output sample = (2^16 + steps) / 2^16: a positive trim plays faster.
        resampler.setRatio(numerator: UInt32(Self.ratioDenominator + steps), denominator: UInt32(Self.ratioDenominator))
        appliedSteps = steps
        latency = resampler.inputLatency
    }

    /// The next reading is the start of playout's: jumps to the setpoint, then a fresh offset.
    private func startOver() {
        startJumps = Self.startJumps
        jumpSamples = 0
        jumpableMs = 0
    }

    private static func steps(_ ppm: Double) -> Int { Int((ppm * 1e-6 * Double(ratioDenominator)).rounded()) }
}

/// The control loop of a `DriftCorrector`: delay error in, playout-rate trim out. A value type
/// with no clock of its own; one `update` per frame.
///
/// Two parts share the trim:
/// - a PI loop on the smoothed error, whose integral is the drift estimate;
/// - an offset that takes up every known discrete change of the error (the jitter buffer inserting
///   or dropping a frame, an underrun's late packet, the target moving, the start of playout) the
///   moment it happens and works it off at the trim left over by the PI loop. The PI loop therefore
///   sees drift only, and its integral is not wound up by events that are not drift.
/// A step nobody reported still shows as an error beyond any drift's (`DriftSettings.excursionFrames`):
/// the integral learns behind a lag and drops what it holds when one comes.
public struct DriftController: Sendable {
    public let settings: DriftSettings
    /// Seconds per update (one frame).
    private let dt: Double
    private let frameMs: Double
    /// Smoothing weight of each new reading (first-order low-pass).
    private let alpha: Double
    private let deadBandMs: Double
    private let warmUpUpdates: Int
    private var warmUpLeft = 0
    private var warmUpMeanMs = 0.0
    /// Updates the warm-up may still take, restarts included (`DriftSettings.startSettleMs`).
    private let warmUpLimit: Int
    private var warmUpBudget = 0
    private let excursionMs: Double
    /// What the integral learnt in the current half of the lag and in the half before (ppm), and
    /// the updates left in this half (see `DriftSettings.learnLagMs`).
    private var learningNow = 0.0
    private var learningBefore = 0.0
    private let lagHalfUpdates: Int
    private var lagHalfLeft = 0
    /// Updates left before the estimate learns again after an excursion (`learnHoldMs`).
    private let holdUpdates: Int
    private var holdLeft = 0

    /// Smoothed error the PI loop sees, ms.
    public private(set) var errorMs: Double = 0
    /// Part of the raw error from discrete changes, not yet worked off, ms.
    public private(set) var offsetMs: Double = 0
    /// The integral term: the sender's clock rate relative to ours, ppm (positive: sender fast).
    public private(set) var driftPPM: Double = 0
    /// The last trim: input samples consumed per output sample = 1 + trim · 1e-6.
    public private(set) var trimPPM: Double = 0
    private var running = false
    /// Running past the warm-up: the offset is what is left to work off.
    public var isSettled: Bool { running && warmUpLeft == 0 }

    public init(settings: DriftSettings, frameMs: Double) {
        precondition(frameMs > 0 && settings.smoothingMs >= 0 && settings.maxTrimPPM >= 0)
        self.settings = settings
        self.frameMs = frameMs
        dt = frameMs / 1000
        alpha = min(1, frameMs / max(frameMs, settings.smoothingMs))
        deadBandMs = settings.deadBandFrames * frameMs
        warmUpUpdates = max(1, Int((settings.smoothingMs / frameMs).rounded()))
        warmUpLimit = max(warmUpUpdates, Int((settings.startSettleMs / frameMs).rounded()))
        excursionMs = settings.excursionFrames * frameMs
        lagHalfUpdates = max(1, Int((settings.learnLagMs / 2 / frameMs).rounded()))
        holdUpdates = Int((settings.learnHoldMs / frameMs).rounded())
    }

    /// One frame's reading.
    /// - Parameters:
    ///   - reading: delay minus setpoint, ms.
    ///   - stepMs: how much of the change since the last reading was a discrete change, ms.
    /// - Returns: the trim, ppm.
    public mutating func update(errorMs reading: Double, stepMs: Double) -> Double {
        if running {
            offsetMs += stepMs
            // The buffer is still settling (filling up to its target, cutting a backlog back, the
            // target jumping as the first packets come in): readings from before such a step
            // are off by what the step's report missed (the reference it is read against moved
            // too), and a mean over them starts the PI loop from an error that is no drift: a
            // 1.8 ms one wound the estimate up to 53 ppm on one clock. The mean starts over.
            if warmUpLeft > 0 && stepMs != 0 && warmUpBudget >= warmUpUpdates {
                warmUpLeft = warmUpUpdates
                warmUpMeanMs = 0
            }
        } else {
            // Playout (re)starts wherever the buffer started it: an offset, not drift.
            running = true
            offsetMs = reading
            errorMs = 0
            warmUpLeft = warmUpUpdates
            warmUpMeanMs = 0
            warmUpBudget = warmUpLimit
        }
        let limit = settings.maxTrimPPM
        if warmUpLeft > 0 {
            // One reading is as noisy as the audio thread's wake-up: the start's offset is the
            // mean over a smoothing time without a discrete change, so that the PI loop does not
            // start from a step.
            warmUpLeft -= 1
            warmUpBudget -= 1
            let n = Double(warmUpUpdates - warmUpLeft)
            warmUpMeanMs += (reading - offsetMs - warmUpMeanMs) / n
            if warmUpLeft == 0 { offsetMs += warmUpMeanMs }
            return workOffset(pi: driftPPM)
        }
        errorMs += alpha * (reading - offsetMs - errorMs)
        // Inside the dead band the trim is the drift estimate alone (see `DriftSettings.deadBandFrames`).
        let outside = errorMs > 0 ? max(0, errorMs - deadBandMs) : min(0, errorMs + deadBandMs)
        learn(outside: outside)
        let pi = min(limit, max(-limit, driftPPM + settings.proportionalPPMPerMs * outside))
        return workOffset(pi: pi)
    }

    // The integral, behind its lag (see `DriftSettings.excursionFrames`).
    private mutating func learn(outside: Double) {
        if abs(errorMs) >= excursionMs {
            // No drift: drop what the lag still holds, and wait for the way back.
            learningNow = 0
            learningBefore = 0
            holdLeft = holdUpdates
        } else if holdLeft > 0 {
            holdLeft = abs(errorMs) <= deadBandMs ? 0 : holdLeft - 1
        } else {
            learningNow += settings.integralPPMPerMsSecond * outside * dt
        }
        lagHalfLeft -= 1
        if lagHalfLeft <= 0 {
            lagHalfLeft = lagHalfUpdates
            let limit = settings.maxTrimPPM
            driftPPM = min(limit, max(-limit, driftPPM + learningBefore))
            learningBefore = learningNow
            learningNow = 0
        }
    }

    // Works the offset off with the headroom left by `pi`, never past zero: a trim of x ppm moves
    // the delay by x·1e-6 of a frame per frame.
    private mutating func workOffset(pi: Double) -> Double {
        let headroom = settings.maxTrimPPM - abs(pi)
        let work = min(headroom, max(-headroom, offsetMs / (frameMs * 1e-6)))
        offsetMs -= work * 1e-6 * frameMs
        trimPPM = pi + work
        return trimPPM
    }

    /// No reading this frame (the jitter buffer is not playing): keep the drift estimate.
    public mutating func hold() -> Double {
        running = false
        offsetMs = 0
        errorMs = 0
        forgetLearning()
        trimPPM = driftPPM
        return trimPPM
    }

    /// A new stream: forget everything.
    public mutating func reset() {
        errorMs = 0; offsetMs = 0; driftPPM = 0; trimPPM = 0; running = false
        forgetLearning()
    }

    // What the lag holds was learnt from a loop that has stopped: not yet drift, dropped.
    private mutating func forgetLearning() {
        learningNow = 0; learningBefore = 0; lagHalfLeft = lagHalfUpdates; holdLeft = 0
    }
}
