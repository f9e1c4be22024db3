import Glibc
import RealTime
import SpeexDSP

/// Acoustic echo cancellation for the audio thread.
///
/// Call `played(_:)` right after each frame is written to the playback PCM (also for priming
/// silence) and `process(...)` right after each frame is read from the capture PCM. Both streams
/// start together after `reset()`, so playback sample `p` and capture sample `c` are counted from
/// the same instant: the echo of `p` is in `c = p + echo delay`. The reference for a captured
/// frame is therefore taken by position from the history of what was played, which stays right
/// however unevenly reads and writes interleave. An `EchoDelayEstimator` can measure the bulk
/// delay; the reference is then shifted by it so the adaptive filter only models the room.
/// (speexdsp's own echo_playback/echo_capture pair frames by call order instead, and print to
/// stderr from the audio thread at start-up and after every xrun.)
public final class EchoCanceller: @unchecked Sendable {
    // @unchecked: used by the audio thread only, apart from the atomic controls, statistics and taps.
    public let settings: EchoCancelSettings
    /// Run-time switch: when set, the microphone passes unprocessed (used to prove echo would howl).
    public let bypass = Flag(false)
    /// Smoothed echo return loss enhancement in dB, updated while the far end is active.
    public let erleDB = Gauge(0)
    /// Captured frames whose reference had not been played yet or was already overwritten.
    public let referenceMisses = Counter()
    public let resets = Counter()
    /// Frames the residual echo gate attenuated (`EchoGate`).
    public let gatedFrames = Counter()
    /// Times the capture position was paired with the playback position anew because the
    /// reference had been missing for `realignAfterMisses` frames in a row (see `process`).
    public let realignments = Counter()
    /// Times the reference moved with a jump of the measured echo delay, the filter kept.
    public let referenceMoves = Counter()
    /// How far the reference is currently shifted, in samples (negative: read ahead).
    public let referenceShift = Counter()
    /// The raw microphone and the played samples at the same positions, for an `EchoDelayEstimator`.
    public let captureTap: SampleRing
    public let referenceTap: SampleRing
    /// How many frames the taps had received when the current pairing of capture and playback
    /// began (a restart or a re-pairing): the estimator measures only from there.
    public let pairingStartTapFrame = Counter()
    private var tapFrames = 0

    private let speex: SpeexEcho
    /// Whether speexdsp's preprocessor runs (noise suppression or AGC is on): it hands on each
    /// frame one frame late.
    public var delaysAFrame: Bool { speex.preprocesses }
    private let frame: Int
    private let history: UnsafeMutablePointer<Int16>
    /// Per played sample: whether its frame was mostly the terminal's own sound (tones).
    private let ownSoundHistory: UnsafeMutablePointer<Bool>
    private let historySize: Int
    private var written = 0   // playback position: samples played since reset
    private var captured = 0  // capture position
    private var shift = 0     // reference delay applied, samples
    private let reference: UnsafeMutablePointer<Int16>
    private let tapReference: UnsafeMutablePointer<Int16>
    private let upcoming: UnsafeMutablePointer<Int16>
    private var wasBypassed = false
    private var missRun = 0
    /// Consecutive missing references after which the positions are paired anew.
    public static let realignAfterMisses = 5
    private var erle = ERLETracker()
    private var gate: EchoGate
    private let restore: NearEndRestore
    private let suppressor: ResidualEchoSuppressor?
    private let delayRequest = Request()
    /// Measured echo delay minus the reference shift, where the filter learnt the path (nil: no
    /// delay measured since speexdsp last started from scratch). When the bulk delay moves, the
    /// reference moves by the same amount and what the filter learnt stays valid.
    private var learntOffset: Double?
    /// The filter has cancelled well (`workingERLEDB`) since it last started from scratch: only
    /// then did it learn the path at `learntOffset`, and is it worth holding or moving with a jump.
    /// One still learning may have learnt the echo somewhere else (seen on the rig: measured at
    /// -1 ms in a stall's catch-up, learnt at 40 ms, then moved by 41 ms and stuck at 3 dB).
    private var proven = false
    /// Frames the filter still waits, unused, for a measured delay after a re-pairing (0: running).
    private var heldFrames = 0
    /// After a restart or a move: what the filter must still cancel to show it is in the right place.
    private var probation = RestartProbation()
    /// The ERLE the filter last reached where it learnt the path (nil: never, since it started afresh).
    private var provenERLE: Double?
    /// Kept between the measured delay and the reference, so jitter never makes the echo arrive first.
    private let safetyMargin: Int

    /// - Parameter maxEchoDelayMilliseconds: longest bulk delay the reference can be aligned to.
    public init(_ settings: EchoCancelSettings, maxEchoDelayMilliseconds: Int = 400) throws {
        self.settings = settings
        do {
            speex = try SpeexEcho(
                frameSize: settings.frameSize, tailSamples: settings.tailSamples, sampleRate: settings.sampleRate,
                noiseSuppressDB: settings.noiseSuppressDB, agc: settings.agc)
        } catch let error as SpeexError {
            throw EchoCancelError(description: error.description)
        }
        frame = settings.frameSize
        // History covers the longest delay plus a generous playback lead.
        historySize = settings.sampleRate * (maxEchoDelayMilliseconds + 500) / 1000
        history = .allocate(capacity: historySize)
        history.initialize(repeating: 0, count: historySize)
        ownSoundHistory = .allocate(capacity: historySize)
        ownSoundHistory.initialize(repeating: false, count: historySize)
        reference = .allocate(capacity: frame)
        reference.initialize(repeating: 0, count: frame)
        tapReference = .allocate(capacity: frame)
        tapReference.initialize(repeating: 0, count: frame)
        upcoming = .allocate(capacity: frame)
        upcoming.initialize(repeating: 0, count: frame)
        safetyMargin = settings.sampleRate / 200
        restore = NearEndRestore(radius: SpeexEcho.dcNotchRadius(sampleRate: settings.sampleRate), frameSize: settings.frameSize,
                                 sampleRate: settings.sampleRate)
        suppressor = settings.echoSuppressDB < 0 || settings.echoSuppressActiveDB < 0
            ? ResidualEchoSuppressor(frameSize: settings.frameSize, sampleRate: settings.sampleRate,
                                     floorDB: settings.echoSuppressDB, activeFloorDB: settings.echoSuppressActiveDB)
            : nil
        gate = EchoGate(frameSize: settings.frameSize, sampleRate: settings.sampleRate, tailSamples: settings.tailSamples)
        captureTap = SampleRing(minimumCapacity: settings.sampleRate / 2)
        referenceTap = SampleRing(minimumCapacity: settings.sampleRate / 2)
    }

    deinit {
        history.deallocate()
        ownSoundHistory.deallocate()
        reference.deallocate()
        tapReference.deallocate()
        upcoming.deallocate()
    }

    /// Records one frame exactly as it was written to the speaker; `ownSound`: it was mostly the
    /// terminal's own sound (tones, not a far end; see `TonalEcho`).
    public func played(_ samples: UnsafePointer<Int16>, ownSound: Bool = false) {
        for i in 0..<frame {
            history[(written + i) % historySize] = samples[i]
            ownSoundHistory[(written + i) % historySize] = ownSound
        }
        written += frame
    }

    /// A measured echo delay (any thread; taken on the next frame, see `align`).
    /// The delay may be negative: capture can be paired with playback so that the echo arrives
    /// at or before its nominal position (a sound server whose monitor returns exactly what it
    /// rendered does that), and then the reference is taken from samples played later.
    public func requestEchoDelay(samples: Int) { delayRequest.post(samples + Self.requestBias) }
    /// Keeps a posted delay positive: a request of 0 means none.
    private static let requestBias = 1 << 30

    /// Cleans one captured frame into `output`. `loop` (once per frame, whatever runs) removes
    /// the sent voice coming back through another terminal from what speexdsp's filter left:
    /// before the filter, this terminal's own echo (another voice, as loud) would hide the loop
    /// from it; after the nonlinear stages its model would not hold.
    public func process(capture: UnsafePointer<Int16>, output: UnsafeMutablePointer<Int16>, loop: LoopCanceller? = nil) {
        let request = delayRequest.take()
        if request > 0 { align(toEchoDelay: request - Self.requestBias) }
        // The estimator sees the unshifted reference, so it measures the whole delay.
        if fetch(from: captured, into: tapReference), captureTap.write(capture, count: frame) {
            referenceTap.write(tapReference, count: frame)  // as large as captureTap and drained with it
            tapFrames += 1
        }
        if fetch(from: captured - shift, into: reference) {
            missRun = 0
        } else {
            referenceMisses.increment()
            missRun += 1
        }
        captured += frame

        if bypass.isSet {
            output.update(from: capture, count: frame)
            loop?.cancel(output)
            wasBypassed = true
            return
        }
        if wasBypassed { forgetEchoPath(); wasBypassed = false }
        if heldFrames > 0 {
            // Re-paired, the path not measured yet: the filter would cancel at the wrong place.
            heldFrames -= 1
            if heldFrames == 0 { forgetEchoPath() }  // no delay measured in time: learn afresh
            output.update(from: capture, count: frame)
            loop?.cancel(output)
        } else {
            speex.cancelEcho(capture: capture, reference: reference, output: output)
            restore.process(capture: capture, cancelled: output)
            if probation.failed(capture: capture, output: output, reference: reference, count: frame) {
                // The path moved: adapting on would unlearn it before the delay is measured.
                heldFrames = Self.holdFramesForADelay(settings)
            }
            loop?.cancel(output)
            suppressor?.process(capture: capture, output: output, echoEstimate: restore.echoEstimate)
        }
        speex.preprocess(output)
        if settings.residualGate {
            // The next frame of the reference too, when played already: an echo path that moved
            // earlier brings the first echo of a word before its reference.
            _ = fetch(from: captured - shift, into: upcoming)
            if gate.process(reference: reference, ownSound: isOwnSound(at: captured - frame - shift), upcoming: upcoming,
                            upcomingOwnSound: isOwnSound(at: captured - shift), output: output) { gatedFrames.increment() }
        }
        if let db = erle.update(capture: capture, output: output, reference: reference, count: frame) {
            erleDB.store(db)
            if heldFrames == 0, db >= Self.workingERLEDB, learntOffset != nil { proven = true; provenERLE = db }
        }
    }

    /// Starts the positions anew; call when both streams (re)start (an xrun, a device opened
    /// again). What the filter learnt is kept: the same device restarted in step has the same
    /// echo path relative to the new positions, so cancelling goes on at once. When the path did
    /// change (a USB card or sound server that came back with another latency), the first tenth
    /// of a second of far-end sound shows it, the filter is held as after a re-pairing, and the
    /// reference moves once the estimator has measured the delay (`align`). A filter learnt from
    /// scratch again needs seconds of far-end speech.
    public func reset() {
        heldFrames = 0
        probation = proven ? RestartProbation(before: erle.latest, samples: settings.sampleRate / 10) : RestartProbation()
        written = 0
        captured = 0
        missRun = 0
        history.update(repeating: 0, count: historySize)
        pairingStartTapFrame.store(tapFrames)
        resets.increment()
    }

    /// Copies played samples [start, start + frame) into `out`; positions not played (yet, or
    /// any more) read as silence. Returns false if any were missing.
    private func fetch(from start: Int, into out: UnsafeMutablePointer<Int16>) -> Bool {
        var complete = true
        for i in 0..<frame {
            let p = start + i
            if p >= 0, p < written, written - p <= historySize {
                out[i] = history[p % historySize]
            } else {
                out[i] = 0
                if p >= 0 { complete = false }
            }
        }
        return complete
    }

    /// Whether the reference frame starting at `start` was mostly the terminal's own sound.
    private func isOwnSound(at start: Int) -> Bool {
        func own(_ p: Int) -> Bool { p >= 0 && p < written && written - p <= historySize && ownSoundHistory[p % historySize] }
        return own(start) || own(start + frame - 1)  // a frame spans at most two played frames
    }

    /// Call when the capture device has been read empty (no backlog left) and the playback
    /// device has just been filled. When the last `realignAfterMisses` frames had no reference,
    /// the streams are out of step: a sound server that underran playback without an xrun (its
    /// client was starved) and then delivered the capture it had kept, or streams that did not
    /// start together. Capture then runs ahead of what was played, or so far behind that the
    /// history is gone; nothing is cancelled, and two rooms would hear each other's echo until
    /// the next restart.
    /// The next captured frame is paired with the newest frame played: a sample's echo cannot
    /// be heard before the sample was written, so the echo delay is then at least what playback
    /// and capture still hold (minus that frame, which the next read needs as its reference) and
    /// never negative. Pairing further back, to allow for a sound server's latency, gets the
    /// sign wrong: when the buffer had drained during the stall, the echo then came before its
    /// reference and nothing could cancel it (seen on the rig as a -20 ms echo delay after a
    /// realignment and a callee heard through the caller's room). A filter that had converged
    /// at a measured delay is held until the estimator measures the delay in the new pairing,
    /// then the reference moves with it (`align`); one that had not learns afresh.
    /// Waiting for an empty capture device matters: mid-backlog the captured frames are old.
    public func realignIfOutOfStep() {
        guard missRun >= Self.realignAfterMisses else { return }
        captured = max(0, written - frame)
        shift = 0
        referenceShift.store(0)
        missRun = 0
        pairingStartTapFrame.store(tapFrames)
        realignments.increment()
        // A filter that had converged waits for the delay estimator to measure the delay in the
        // new pairing and then goes on where it was (`align`); one still learning starts afresh.
        if proven {
            heldFrames = Self.holdFramesForADelay(settings)
        } else {
            forgetEchoPath()
        }
    }

    /// ERLE of a filter that has the path: no measured jump moves its reference.
    static let workingERLEDB = 12.0

    /// How long a re-paired filter waits for a measured delay: the estimator needs about a second
    /// of far-end speech in the new pairing.
    static func holdFramesForADelay(_ settings: EchoCancelSettings) -> Int {
        3 * settings.sampleRate / settings.frameSize
    }

    /// A measured echo delay (every one the estimator confirms). Within what the filter covers,
    /// the filter keeps learning where it is. When the delay jumped (a device or sound-server
    /// underrun, a re-pairing) and the filter had learnt the path at a known offset, the reference
    /// moves with the delay and the filter goes on as it was: the room did not change, only the
    /// bulk delay. Otherwise (first measurement outside its reach) the reference is aligned with
    /// the safety margin and the filter learns anew. A negative shift reads ahead of the capture
    /// position, at most as far as playback has been written.
    private func align(toEchoDelay samples: Int) {
        let rate = settings.sampleRate
        let relative = Double(samples - shift)
        let earliest = min(0, -(written - captured - frame)), latest = historySize - 2 * frame
        if let offset = learntOffset, proven {
            if heldFrames == 0, abs(relative - offset) < Double(rate * 5 / 1000) {
                // Measurement noise or a slow drift the filter follows by itself.
                learntOffset = offset + (relative - offset) / 8
                return
            }
            // A filter that cancels well says the path did not move: the estimate is wrong
            // (seen on the rig seconds after a stall, with the filter at 33 dB).
            if heldFrames == 0, let working = erle.latest, working >= Self.workingERLEDB { return }
            let moved = samples - Int(offset.rounded())
            if (earliest...latest).contains(moved) {
                shift = moved
                referenceShift.store(shift)
                heldFrames = 0
                erle = ERLETracker()
                // A path that is still moving (the rig's sound server catches up in 10 ms steps)
                // makes a measurement stale: unless the filter cancels again at once, it is held
                // for the next one instead of adapting, and unlearning, at the wrong place.
                probation = RestartProbation(before: provenERLE, samples: rate / 10, after: settings.tailSamples)
                referenceMoves.increment()
                return
            }
        } else if heldFrames == 0, ((rate / 500)...(settings.tailSamples - rate * 30 / 1000)).contains(Int(relative)) {
            learntOffset = relative
            return
        }
        shift = max(earliest, min(samples - safetyMargin, latest))
        referenceShift.store(shift)
        forgetEchoPath()
        learntOffset = Double(samples - shift)
    }

    /// speexdsp starts learning anew; everything that follows its state (the notch copy, the
    /// ERLE average, the gate's learned residual) starts with it.
    private func forgetEchoPath() {
        learntOffset = nil
        proven = false
        provenERLE = nil
        heldFrames = 0
        probation = RestartProbation()
        speex.reset()
        restore.reset()
        suppressor?.reset()
        erle = ERLETracker()
        gate.reset()
    }
}

/// Whether a kept filter still cancels after a restart or a move: over its first far-end samples the
/// echo must drop by half the ERLE it had (at most `workingERLEDB`); a path moved by more than a
/// few milliseconds cancels nothing (seen on the rig: 0-3 dB after a restart moved it 50 → 120 ms).
/// A filter below 6 dB had learnt too little to lose, and is not judged.
struct RestartProbation {
    private var skipLeft = 0
    private var samplesLeft = 0
    private var threshold = 0.0
    private var micEnergy = 0.0
    private var outEnergy = 0.0

    /// Nothing to judge.
    init() {}

    /// - Parameter after: samples not judged first (after a move the filter's input history
    ///   still holds the far end from before the hold, for a tail's length).
    init(before: Double?, samples: Int, after: Int = 0) {
        guard let before, before >= 6 else { return }
        skipLeft = after
        samplesLeft = samples
        threshold = min(EchoCanceller.workingERLEDB, before / 2)
    }

    /// True once, when the far-end samples are counted and the filter fell short.
    mutating func failed(capture: UnsafePointer<Int16>, output: UnsafePointer<Int16>,
                         reference: UnsafePointer<Int16>, count: Int) -> Bool {
        guard samplesLeft > 0 else { return false }
        if skipLeft > 0 { skipLeft -= count; return false }
        let e = FrameEnergy(capture: capture, output: output, reference: reference, count: count)
        guard e.reference / Double(count) > ERLETracker.referenceFloor else { return false }
        micEnergy += e.capture
        outEnergy += e.output
        samplesLeft -= count
        guard samplesLeft <= 0 else { return false }
        return 10 * log10((micEnergy + 1) / (outEnergy + 1)) < threshold
    }
}

/// One frame's energies (sums of squares) of the three signals every ERLE figure compares.
struct FrameEnergy {
    let reference: Double
    let capture: Double
    let output: Double

    init(capture: UnsafePointer<Int16>, output: UnsafePointer<Int16>, reference: UnsafePointer<Int16>, count: Int) {
        var r = 0.0, m = 0.0, o = 0.0
        for i in 0..<count {
            let rv = Double(reference[i]), mv = Double(capture[i]), ov = Double(output[i])
            r += rv * rv; m += mv * mv; o += ov * ov
        }
        self.reference = r; self.capture = m; self.output = o
    }
}

/// Ratio of microphone to output energy, smoothed over about a second of far-end activity.
struct ERLETracker {
    private var micEnergy = 0.0
    private var outEnergy = 0.0
    private var activeFrames = 0
    /// The last value, nil until enough far-end frames were seen since the start.
    private(set) var latest: Double?
    /// Far-end frames quieter than about -50 dBFS say nothing about the echo path.
    static let referenceFloor = 32768.0 * 32768.0 * 1e-5
    private static let smoothing = 0.05

    mutating func update(capture: UnsafePointer<Int16>, output: UnsafePointer<Int16>,
                         reference: UnsafePointer<Int16>, count: Int) -> Double? {
        let e = FrameEnergy(capture: capture, output: output, reference: reference, count: count)
        let n = Double(count)
        guard e.reference / n > Self.referenceFloor else { return nil }
        micEnergy += Self.smoothing * (e.capture / n - micEnergy)
        outEnergy += Self.smoothing * (e.output / n - outEnergy)
        activeFrames += 1
        guard activeFrames > 10, micEnergy > 0 else { return nil }
        latest = 10 * log10((micEnergy + 1) / (outEnergy + 1))
        return latest
    }
}

// MARK: The near end, unfiltered

/// Gives back the microphone as it was, minus only the echo speexdsp estimated, wherever there
/// is little echo.
///
/// speexdsp's canceller runs the microphone through a DC notch before it cancels (at 48 kHz a
/// second-order high-pass near 70 Hz, +69° of phase at 100 Hz), so its output is a filtered
/// voice even when there is no echo at all. Its echo estimate is what it took away from the
/// notched microphone, `notch(capture) − cancelled`, with `notch` an exact copy of speexdsp's.
/// Un-notched (the notch's inverse, its double pole at DC moved to 4 Hz, then a 2 Hz DC blocker)
/// and taken from the raw microphone, it leaves the voice untouched: with no echo the output is
/// the input, sample for sample (the estimate is then speexdsp's rounding, ±0.5, left out).
/// Below about 50 Hz, though, the inverse amplifies the filter's errors (it undoes 30-50 dB of
/// notch there), and only the notch itself removes an echo's lowest band. So each frame is a blend:
/// the restored microphone while the echo estimate is more than 20 dB below speexdsp's output
/// (no far end, or a person in the room talking over a quiet echo), speexdsp's own output when it
/// is within 10 dB (echo to remove), in between across 10 dB; back towards the restored microphone
/// by at most a tenth per frame. Each frame ramps from the last blend, so nothing clicks.
/// Written here, not taken from a library: it must mirror speexdsp's internal filter sample for
/// sample. Allocation-free after `init`; the audio thread only.
final class NearEndRestore {
    private let frame: Int
    // speexdsp's notch, in single precision as speexdsp (float build) computes it.
    private let radius: Float
    private let den2: Float
    private var notch0: Float = 0
    private var notch1: Float = 0
    // The regularised inverse: (1 − 2r z⁻¹ + den2 z⁻²) / (r (1 − ρz⁻¹)²), transposed direct form II.
    private let b0: Double, b1: Double, b2: Double, a1: Double, a2: Double
    private var inverse0 = 0.0
    private var inverse1 = 0.0
    // DC blocker (1 − z⁻¹) / (1 − p z⁻¹).
    private let blockerPole: Double
    private var blockerIn = 0.0
    private var blockerOut = 0.0
    /// The restored frame, before the blend.
    private let restored: UnsafeMutablePointer<Double>
    /// speexdsp's echo estimate for the last frame, un-notched: what the residual suppressor scales.
    let echoEstimate: UnsafeMutablePointer<Double>
    /// Share of speexdsp's own output in the last frame (0: the restored microphone).
    private var blend = 0.0
    /// speexdsp's output rounding, with room for single precision.
    private static let rounding = 0.501
    private static let restoredBelowDB = -20.0
    private static let notchedAboveDB = -10.0
    private static let releasePerFrame = 0.1
    private static let silentPower = 32768.0 * 32768.0 * 1e-8

    init(radius: Float, frameSize: Int, sampleRate: Int, inverseCornerHz: Double = 4, blockerCornerHz: Double = 2) {
        frame = frameSize
        self.radius = radius
        den2 = Float(Double(radius * radius) + 0.7 * Double(1 - radius) * Double(1 - radius))
        let r = Double(radius)
        let rho = 1 - 2 * Double.pi * inverseCornerHz / Double(sampleRate)
        b0 = 1 / r; b1 = -2; b2 = Double(den2) / r
        a1 = -2 * rho; a2 = rho * rho
        blockerPole = 1 - 2 * Double.pi * blockerCornerHz / Double(sampleRate)
        restored = .allocate(capacity: frameSize)
        restored.initialize(repeating: 0, count: frameSize)
        echoEstimate = .allocate(capacity: frameSize)
        echoEstimate.initialize(repeating: 0, count: frameSize)
    }

    deinit { restored.deallocate(); echoEstimate.deallocate() }

    /// Replaces `cancelled` (speexdsp's output for `capture`) with the blend described above.
    func process(capture: UnsafePointer<Int16>, cancelled: UnsafeMutablePointer<Int16>) {
        var echoPower = 0.0, outputPower = 0.0
        for i in 0..<frame {
            let vin = Float(capture[i])
            let vout = notch0 + vin
            notch0 = notch1 + 2 * (-vin + radius * vout)
            notch1 = vin - den2 * vout
            // speexdsp rounds its output: an estimate within ±0.5 is that rounding, not echo. Its
            // low-frequency part would come out of the inverse 50 dB louder, so it is left out.
            let rawEstimate = Double(radius * vout) - Double(cancelled[i])
            let estimate = rawEstimate > Self.rounding ? rawEstimate - Self.rounding
                : rawEstimate < -Self.rounding ? rawEstimate + Self.rounding : 0
            echoPower += estimate * estimate
            outputPower += Double(cancelled[i]) * Double(cancelled[i])
            let inverse = b0 * estimate + inverse0
            inverse0 = b1 * estimate - a1 * inverse + inverse1
            inverse1 = b2 * estimate - a2 * inverse
            blockerOut = inverse - blockerIn + blockerPole * blockerOut
            blockerIn = inverse
            echoEstimate[i] = blockerOut
            restored[i] = Double(capture[i]) - blockerOut
        }
        // An echo estimate below -80 dBFS is none, however quiet the room.
        let noEcho = echoPower < Self.silentPower * Double(frame)
        let echoDB = noEcho ? -.infinity : 10 * log10(echoPower / (outputPower + 1))
        let wanted = min(1, max(0, (echoDB - Self.restoredBelowDB) / (Self.notchedAboveDB - Self.restoredBelowDB)))
        let next = max(wanted, blend - Self.releasePerFrame)
        let step = (next - blend) / Double(frame)
        var w = blend
        for i in 0..<frame {
            w += step
            let v = ((1 - w) * restored[i] + w * Double(cancelled[i])).rounded()
            cancelled[i] = v >= 32767 ? .max : v <= -32768 ? .min : Int16(v)
        }
        blend = next
        if noEcho {
            // The echo is over: what the inverse still rings with is the filter's error at the
            // lowest frequencies, amplified; let out, it was a thump 40 dB above silence a tail
            // after every echo ended.
            inverse0 = 0; inverse1 = 0
            blockerIn = 0; blockerOut = 0
        }
    }

    /// speexdsp's notch starts from rest after `speex_echo_state_reset`; so does the copy.
    func reset() {
        notch0 = 0; notch1 = 0
        inverse0 = 0; inverse1 = 0
        blockerIn = 0; blockerOut = 0
        blend = 0
    }
}

// MARK: Residual echo suppression

/// Attenuates the echo the adaptive filter leaves, in the bands where it is, in the frame it is in.
///
/// speexdsp's preprocessor does this on a half-overlapped spectrum: it hands each frame on one
/// frame (10 ms) late and reshapes the voice even where there is no echo. Here the frame is split
/// into bands by a chain of complementary low-passes (each band is what a second-order low-pass
/// keeps of the previous remainder, the last band what is left), which add up to the input exactly
/// and add no delay. The residual echo in a band is speexdsp's echo estimate there times a leak,
/// learnt as speexdsp learns its own: the regression of the output's band powers on the estimate's,
/// held over the room's decay. It learns only from frames whose microphone is not clearly louder
/// than the echo estimate: a person in the room talking in time with the far end (people do, in
/// turns and in laughter) would otherwise pass for echo and be suppressed. Each band's gain subtracts that residual from the band's power,
/// no deeper than `floorDB` (or `activeFloorDB` while the output is clearly louder than the
/// residual: someone in the room talks). Gains move across a frame, never in a step. With no echo
/// estimate (the far end silent) every gain is exactly 1 and the frame is not touched.
/// Written here rather than taken from a library: speexdsp's own needs its frame of delay and
/// keeps its echo residual private. Allocation-free after `init`; the audio thread only.
final class ResidualEchoSuppressor {
    /// Band edges, Hz: finer where speech has its formants.
    static let edgesHz: [Double] = [250, 500, 1000, 1500, 2200, 3200, 5000, 8000]
    /// Power over-subtraction: a residual estimate is an average; echo peaks above it.
    static let overSubtraction = 2.0
    /// A frame louder than its residual by this carries the person in the room.
    static let nearEndRatio = 4.0
    /// A microphone within 1 dB of the echo estimate is echo (and noise) only.
    static let echoOnlyRatio = 1.26
    /// The residual held over the room's decay, per frame (speexdsp's preprocessor uses the same).
    static let residualDecay = 0.6

    private let frame: Int
    private let bands: Int
    private let floorGain: Double
    private let activeFloorGain: Double
    private let outputSplit: BandSplit
    private let estimateSplit: BandSplit
    /// The output's bands, `bands` rows of `frame` samples.
    private let bandSamples: UnsafeMutablePointer<Double>
    private let outputPower: UnsafeMutablePointer<Double>
    private let estimatePower: UnsafeMutablePointer<Double>
    private let outputMean: UnsafeMutablePointer<Double>
    private let estimateMean: UnsafeMutablePointer<Double>
    private let residual: UnsafeMutablePointer<Double>
    private let gains: UnsafeMutablePointer<Double>
    private let nextGains: UnsafeMutablePointer<Double>
    private var crossPower = 0.0
    private var estimateVariance = 0.0
    private let meanRate: Double
    private let leakRate: Double
    private var untouched = true
    /// The leak now: the share of the echo estimate's power the filter leaves in the output.
    private var leak = 1.0

    init(frameSize: Int, sampleRate: Int, floorDB: Int, activeFloorDB: Int) {
        frame = frameSize
        let edges = Self.edgesHz.filter { $0 < Double(sampleRate) * 0.45 }
        bands = edges.count + 1
        floorGain = pow(10, Double(floorDB) / 20)
        activeFloorGain = pow(10, Double(activeFloorDB) / 20)
        outputSplit = BandSplit(edgesHz: edges, sampleRate: sampleRate)
        estimateSplit = BandSplit(edgesHz: edges, sampleRate: sampleRate)
        bandSamples = .allocate(capacity: bands * frameSize)
        bandSamples.initialize(repeating: 0, count: bands * frameSize)
        func row(_ v: Double) -> UnsafeMutablePointer<Double> {
            let p = UnsafeMutablePointer<Double>.allocate(capacity: edges.count + 1)
            p.initialize(repeating: v, count: edges.count + 1)
            return p
        }
        outputPower = row(0); estimatePower = row(0); outputMean = row(0); estimateMean = row(0)
        residual = row(0); gains = row(1); nextGains = row(1)
        // speexdsp's averaging rates at its frame: a frame's share of a second, and a quarter of it.
        meanRate = min(1, Double(frameSize) / Double(sampleRate))
        leakRate = meanRate / 2
    }

    deinit {
        for p in [bandSamples, outputPower, estimatePower, outputMean, estimateMean, residual, gains, nextGains] { p.deallocate() }
    }

    /// Suppresses the residual echo in `output` (in place), given the microphone frame and the echo
    /// estimate speexdsp removed from it.
    func process(capture: UnsafePointer<Int16>, output: UnsafeMutablePointer<Int16>, echoEstimate: UnsafePointer<Double>) {
        for k in 0..<bands { outputPower[k] = 0; estimatePower[k] = 0 }
        // Full band: the bands overlap, so their powers do not add up to the signal's.
        var capturePower = 0.0, echoPower = 0.0
        for i in 0..<frame {
            capturePower += Double(capture[i]) * Double(capture[i])
            echoPower += echoEstimate[i] * echoEstimate[i]
            outputSplit.split(Double(output[i])) { k, v in
                bandSamples[k * frame + i] = v
                outputPower[k] += v * v
            }
            estimateSplit.split(echoEstimate[i]) { k, v in estimatePower[k] += v * v }
        }
        var totalOutput = 0.0, totalEstimate = 0.0
        for k in 0..<bands {
            outputPower[k] /= Double(frame); estimatePower[k] /= Double(frame)
            totalOutput += outputPower[k]; totalEstimate += estimatePower[k]
        }
        if capturePower < Self.echoOnlyRatio * echoPower {
            learnLeak(totalOutput: totalOutput, totalEstimate: totalEstimate)
        }

        // speexdsp doubles a small leak (its residual estimate would otherwise trail the echo).
        let residualShare = leak > 0.5 ? 1 : 2 * leak
        var totalResidual = 0.0, anyGain = false
        for k in 0..<bands {
            residual[k] = max(Self.residualDecay * residual[k], residualShare * estimatePower[k])
            totalResidual += residual[k]
        }
        let floor = totalOutput > Self.nearEndRatio * totalResidual ? activeFloorGain : floorGain
        for k in 0..<bands {
            let echo = Self.overSubtraction * residual[k]
            // Below -40 dB of the band (or -80 dBFS) the residual is nothing to remove.
            if echo < 1e-4 * outputPower[k] + Self.silentPower {
                nextGains[k] = 1
            } else {
                nextGains[k] = max(floor, (max(0, outputPower[k] - echo) / outputPower[k]).squareRoot())
                anyGain = true
            }
        }
        guard anyGain || !untouched else { return }
        // Each band's gain moves across the frame from the last frame's.
        for i in 0..<frame {
            let t = Double(i + 1) / Double(frame)
            var v = 0.0
            for k in 0..<bands { v += (gains[k] + t * (nextGains[k] - gains[k])) * bandSamples[k * frame + i] }
            let r = v.rounded()
            output[i] = r >= 32767 ? .max : r <= -32768 ? .min : Int16(r)
        }
        for k in 0..<bands { gains[k] = nextGains[k] }
        untouched = !anyGain
    }

    /// speexdsp's leak estimate (mdf.c), over bands instead of bins: the band powers' deviations
    /// from their averages, correlated; adapting faster the more of the output the estimate is.
    private func learnLeak(totalOutput: Double, totalEstimate: Double) {
        guard totalEstimate > Self.silentPower else { return }
        var pey = 0.0, pyy = 0.0
        for k in 0..<bands {
            let de = outputPower[k] - outputMean[k], dy = estimatePower[k] - estimateMean[k]
            pey += de * dy; pyy += dy * dy
            outputMean[k] += meanRate * (outputPower[k] - outputMean[k])
            estimateMean[k] += meanRate * (estimatePower[k] - estimateMean[k])
        }
        let norm = pyy.squareRoot()
        guard norm > 0 else { return }
        let rate = min(2 * meanRate * totalEstimate / (totalOutput + 1), leakRate)
        crossPower += rate * (pey / norm - crossPower)
        estimateVariance += rate * (norm - estimateVariance)
        estimateVariance = max(estimateVariance, 1)
        leak = min(1, max(Self.minimumLeak, crossPower / estimateVariance))
    }

    private static let minimumLeak = 0.005
    private static let silentPower = 32768.0 * 32768.0 * 1e-8

    /// Forgets the path (speexdsp did).
    func reset() {
        for k in 0..<bands {
            outputMean[k] = 0; estimateMean[k] = 0; residual[k] = 0; gains[k] = 1; nextGains[k] = 1
        }
        crossPower = 0; estimateVariance = 0; leak = 1
        outputSplit.reset(); estimateSplit.reset()
        untouched = true
    }
}

/// Splits a signal into bands that add up to it exactly, without delay: band k is a second-order
/// Butterworth low-pass (at edge k) of what the bands below left; the last band is the rest.
final class BandSplit {
    private let count: Int
    private let b0: UnsafeMutablePointer<Double>, b1: UnsafeMutablePointer<Double>, b2: UnsafeMutablePointer<Double>
    private let a1: UnsafeMutablePointer<Double>, a2: UnsafeMutablePointer<Double>
    private let s1: UnsafeMutablePointer<Double>, s2: UnsafeMutablePointer<Double>

    init(edgesHz: [Double], sampleRate: Int) {
        count = edgesHz.count
        func row() -> UnsafeMutablePointer<Double> {
            let p = UnsafeMutablePointer<Double>.allocate(capacity: max(1, edgesHz.count))
            p.initialize(repeating: 0, count: max(1, edgesHz.count))
            return p
        }
        b0 = row(); b1 = row(); b2 = row(); a1 = row(); a2 = row(); s1 = row(); s2 = row()
        for (k, f) in edgesHz.enumerated() {
            // Bilinear transform of 1 / (s² + √2 s + 1), prewarped to the edge.
            let w = tan(Double.pi * f / Double(sampleRate)), w2 = w * w, q = 2.0.squareRoot()
            let norm = 1 / (1 + q * w + w2)
            b0[k] = w2 * norm; b1[k] = 2 * w2 * norm; b2[k] = w2 * norm
            a1[k] = 2 * (w2 - 1) * norm; a2[k] = (1 - q * w + w2) * norm
        }
    }

    deinit { for p in [b0, b1, b2, a1, a2, s1, s2] { p.deallocate() } }

    /// Calls `band(k, value)` for each band of one sample, lowest first.
    @inline(__always)
    func split(_ x: Double, _ band: (Int, Double) -> Void) {
        var rest = x
        for k in 0..<count {
            let y = b0[k] * rest + s1[k]
            s1[k] = b1[k] * rest - a1[k] * y + s2[k]
            s2[k] = b2[k] * rest - a2[k] * y
            band(k, y)
            rest -= y
        }
        band(count, rest)
    }

    func reset() { for k in 0..<count { s1[k] = 0; s2[k] = 0 } }
}
