import Glibc
import RealTime
import SignalTools

/// Removes this terminal's own voice where it comes back into its microphone through another
/// terminal's speaker: the loop "my microphone → the network → the other speaker → the air → my
/// microphone" of two terminals that hear each other (one room, a thin wall). The acoustic
/// canceller cannot see it (its reference is its own speaker), so above a loop gain of 1 it howls.
/// But a terminal knows what it sent: this filter models the loop from the sent signal to the
/// microphone (after speexdsp's filter has taken this terminal's own echo out, which is as loud and
/// would hide the loop) and subtracts its estimate. The loop's delay must hold still to within a
/// fraction of a millisecond while it learns: the far end's drift corrector moves it. Its reference
/// (`sent`) must be the terminal's own packets decoded again, as the far end decodes them: Opus
/// keeps the sound, not the waveform, and with the frames before encoding as the reference the loop
/// is not learnt (`LoopCancellerTests`).
///
/// Written here rather than a second speexdsp canceller: speexdsp adapts only while its near end is
/// quiet, and in a loop the near end (the person talking) is there whenever the echo is
/// (`ClosedLoopTests`). This is a partitioned-block frequency-domain NLMS with a fixed step that
/// keeps adapting under the voice; its step per bin is normalised by the reference's power over the
/// span and by the error's power (where the error is mostly the voice, the filter moves little).
/// The loop is never shorter than `minimumDelay` (the network, the far jitter buffer and both
/// devices' buffers), so the estimate for the frame being captured comes from reference samples
/// sent before it: no added delay. Allocation-free after `init`; the audio thread only.
///
/// Its estimate is subtracted only where a loop shows: once the filter's estimate, subtracted,
/// would have lowered the microphone by `engageDB` or more over the last second, for a quarter
/// second in a row, and while the microphone follows the estimate after that. Adapting under the
/// voice, the filter also learns the voice's own periodicity from what was sent 20 ms and more
/// ago (closed-loop bias); with no loop its estimate explains nothing on the whole (it removes
/// -0.5…+0.6 dB of a voice, `LoopCancellerTests`) but, subtracted, it would change the voice
/// 9 dB below it (PESQ 4.5 → 1.8). A loop that can howl makes the estimate explain several dB
/// within a second. So a terminal with no loop sends its microphone untouched.
public final class LoopCanceller: @unchecked Sendable {
    // @unchecked: the buffers below are the audio thread's alone.
    public struct Settings: Sendable, Equatable {
        public var sampleRate: Int
        public var frameSize: Int
        /// The shortest loop: at least one frame (the estimate must come from what was sent before).
        public var minimumDelayMilliseconds: Int
        /// How much of the loop the filter spans past the minimum: the far jitter buffer's range and the rooms' reverberation.
        public var spanMilliseconds: Int
        /// NLMS step (0 < step ≤ 1): larger learns faster and is noisier under the voice.
        public var step: Double
        /// Subtract the estimate only where a loop shows (the daemon); false: always (to measure the filter alone).
        public var gated: Bool

        public init(sampleRate: Int, frameSize: Int, minimumDelayMilliseconds: Int, spanMilliseconds: Int,
                    step: Double = LoopCanceller.defaultStep, gated: Bool = true) {
            self.sampleRate = sampleRate
            self.frameSize = frameSize
            self.minimumDelayMilliseconds = minimumDelayMilliseconds
            self.spanMilliseconds = spanMilliseconds
            self.step = step
            self.gated = gated
        }
    }

    /// Not settings: tuned on `TwoTerminalRoom` (`LoopCancellerTests`): 0.1-0.5 learn a held
    /// loop, 0.3 the fastest; without the error's power in the normalisation a voice as loud as
    /// the echo makes the filter wander (−25 dB "removed" open-loop), 0.5 keeps 5-14 dB.
    public static let defaultStep = 0.3
    static let errorWeight = 0.5
    /// Not settings: with no loop the estimate removes at most 0.6 dB of natural or synthetic
    /// speech (`LoopCancellerTests`); a loop at ×2 makes it remove 2.7 dB in its first second.
    public static let engageDB = 2.0
    /// The estimate fades in and out over this many frames: no click.
    static let fadeFrames = 5.0
    static let saturatedPeak = 0.9 * 32767
    /// Engaged, the estimate stays subtracted while the microphone follows it: the slope of the
    /// microphone on the estimate is 1 for a loop's echo and about 0.5 for the voice's periodicity
    /// (where subtracting it takes off as much as it adds). A slope, unlike "explained", does not
    /// fall when a loop held down leaves the room quiet.
    static let releaseSlope = 0.7

    public let settings: Settings
    /// Off: frames pass untouched and nothing is learnt (the filter is kept). Any thread.
    public let enabled = Flag(true)
    /// Reference frames that came back after the frame they belong to was cancelled (the network
    /// thread fell behind), and those too old to place at all.
    public let lateReferenceFrames = Counter()
    /// How much of the microphone the estimate removed over the last second, dB (0 while idle or not engaged).
    public let removedDB = Gauge(0)
    /// A loop shows and the estimate is subtracted; and how often that began.
    public let engaged = Flag(false)
    public let engagements = Counter()

    private let block: Int        // new samples per block: one frame
    private let size: Int         // FFT points, ≥ 2·block
    private let bins: Int         // size/2 + 1: the reference is real
    private let partitions: Int
    private let delay: Int        // samples from a sent sample to the earliest it can be heard
    private let plan: FFTPlan

    // What was sent, newest last, long enough for one FFT window ending `delay` samples ago.
    private let sent: UnsafeMutablePointer<Double>
    private let sentLength: Int
    // Reference spectra (X), filter (W), per partition and bin; slot `newest` holds the latest block.
    private let xRe: UnsafeMutablePointer<Double>, xIm: UnsafeMutablePointer<Double>
    private let wRe: UnsafeMutablePointer<Double>, wIm: UnsafeMutablePointer<Double>
    private let power: UnsafeMutablePointer<Double>   // Σ over partitions of |X|², per bin
    private let errorPower: UnsafeMutablePointer<Double>  // |E|², smoothed, per bin
    private let re: UnsafeMutablePointer<Double>, im: UnsafeMutablePointer<Double>
    private let echo: UnsafeMutablePointer<Double>    // this frame's estimate
    private var newest = 0
    private var constrainNext = 1
    private let regularisation: Double
    /// Frames cancelled so far: the index of the next captured frame.
    private var frames = 0
    /// Frames since the last one whose reference was not silent; past the span the filter's
    /// input is all zeros, so estimating and adapting would change nothing: skipped.
    private var silentFrames = Int.max / 2
    private let idleFrames: Int
    /// After this long without any reference (no call), the filter forgets the loop it learnt.
    private let forgetFrames: Int
    private var skipping = false
    private var micEnergy = 0.0, errorEnergy = 0.0, outputEnergy = 0.0, micOnEstimate = 0.0, estimateEnergy = 0.0
    /// The share of the estimate subtracted (0 while no loop shows, 1 engaged).
    private var applied = 0.0
    /// Share of recent frames whose microphone peaked near full scale, and frames left before an
    /// engagement begun for that may end.
    private var saturatedShare = 0.0
    private var holdFrames = 0
    /// Frames in a row the estimate has explained `engageDB`; a loop shows once it has for
    /// `persistFrames` (a quarter second: a word's onset after a pause explains 2.5 dB for 50 ms,
    /// a loop explains more for seconds).
    private var evidenceFrames = 0
    private var persistFrames: Int { settings.sampleRate / block / 4 }

    public init(_ settings: Settings) {
        precondition(settings.step > 0 && settings.step <= 1, "loop canceller step in (0, 1]")
        self.settings = settings
        block = settings.frameSize
        size = FFTPlan.nextPowerOfTwo(2 * block)
        bins = size / 2 + 1
        delay = max(block, settings.sampleRate * settings.minimumDelayMilliseconds / 1000)
        partitions = max(1, (settings.sampleRate * settings.spanMilliseconds / 1000 + block - 1) / block)
        plan = FFTPlan(size: size)
        sentLength = size + delay
        func zeroed(_ n: Int) -> UnsafeMutablePointer<Double> {
            let p = UnsafeMutablePointer<Double>.allocate(capacity: n)
            p.initialize(repeating: 0, count: n)
            return p
        }
        sent = zeroed(sentLength)
        xRe = zeroed(partitions * bins); xIm = zeroed(partitions * bins)
        wRe = zeroed(partitions * bins); wIm = zeroed(partitions * bins)
        power = zeroed(bins)
        errorPower = zeroed(bins)
        re = zeroed(size); im = zeroed(size)
        echo = zeroed(block)
        // A floor of about -70 dBFS per sample, over the whole span: silence does not blow up the step.
        regularisation = Double(partitions * size) * 10 * 10
        idleFrames = partitions + (delay + size) / block + 1
        forgetFrames = 10 * settings.sampleRate / block
    }

    deinit {
        for p in [sent, xRe, xIm, wRe, wIm, power, errorPower, re, im, echo] { p.deallocate() }
    }

    /// Audio thread: removes the loop's estimate from the frame, in place.
    public func cancel(_ frame: UnsafeMutablePointer<Int16>) {
        defer { advance() }
        guard enabled.isSet, silentFrames < idleFrames else {
            // Skipped frames leave no spectra: the span starts again from silence.
            if !skipping {
                xRe.update(repeating: 0, count: partitions * bins)
                xIm.update(repeating: 0, count: partitions * bins)
            }
            skipping = true
            if silentFrames == forgetFrames { forget() }
            return
        }
        skipping = false
        addReferenceBlock()
        estimateEcho()
        // The error: what the filter did not explain; the filter learns from it. What goes on is
        // the microphone minus as much of the estimate as a loop has shown to be there.
        let target = engaged.isSet || !settings.gated ? 1.0 : 0.0
        let from = applied
        applied += max(-1 / Self.fadeFrames, min(1 / Self.fadeFrames, target - applied))
        var m = 0.0, r = 0.0, o = 0.0, peak = 0.0, xy = 0.0, yy = 0.0
        for i in 0..<block {
            let x = Double(frame[i])
            peak = max(peak, abs(x))
            let e = x - echo[i]
            let out = x - (from + (applied - from) * Double(i + 1) / Double(block)) * echo[i]
            m += x * x
            r += e * e
            xy += x * echo[i]
            yy += echo[i] * echo[i]
            o += out * out
            echo[i] = e
            frame[i] = Int16(max(-32768, min(32767, out.rounded())))
        }
        adapt()
        let a = Double(block) / Double(settings.sampleRate)  // about one second's average
        micEnergy += a * (m - micEnergy)
        errorEnergy += a * (r - errorEnergy)
        outputEnergy += a * (o - outputEnergy)
        micOnEstimate += a * (xy - micOnEstimate)
        estimateEnergy += a * (yy - estimateEnergy)
        let explained = 10 * log10(max(micEnergy, 1) / max(errorEnergy, 1))
        // A loop that saturates the microphone shows no linear path to learn in what it sends
        // (without the howl guard's limiter, a loop at ×2 explains 1 dB): the estimate is
        // subtracted for a while anyway, which brings the loop back to where it can be learnt.
        saturatedShare += 2 * a * ((peak >= Self.saturatedPeak ? 1 : 0) - saturatedShare)
        if holdFrames > 0 { holdFrames -= 1 }
        evidenceFrames = explained >= Self.engageDB ? evidenceFrames + 1 : 0
        if !engaged.isSet, evidenceFrames >= persistFrames || saturatedShare > 0.5 {
            engaged.set(true)
            engagements.increment()
            if explained < Self.engageDB { holdFrames = 2 * settings.sampleRate / block }
        } else if engaged.isSet, holdFrames == 0, estimateEnergy > 1, micOnEstimate < Self.releaseSlope * estimateEnergy {
            engaged.set(false)
        }
        removedDB.store(10 * log10(max(micEnergy, 1) / max(outputEnergy, 1)))
    }

    /// Audio thread, once per frame after `cancel`: the frame just captured was sent as `frame`
    /// (as the far end decodes it).
    public func sent(_ frame: UnsafePointer<Int16>) {
        sent(frame, index: frames - 1)
    }

    /// Audio thread: what was sent for captured frame `index` (counting `cancel` calls from 0),
    /// which may come back a few frames later; a frame never reported stays silent.
    public func sent(_ frame: UnsafePointer<Int16>, index: Int) {
        let age = frames - 1 - index  // frames between it and the newest cancelled
        guard age >= 0, (age + 1) * block <= sentLength else {
            lateReferenceFrames.increment()
            return
        }
        if age * block > delay - block { lateReferenceFrames.increment() }  // its first use has passed
        let at = sent + (sentLength - (age + 1) * block)
        var loud = false
        for i in 0..<block {
            at[i] = Double(frame[i])
            loud = loud || frame[i] != 0
        }
        if loud { silentFrames = min(silentFrames, age) }
    }

    /// The history moves on by one frame; the new newest frame is silent until it is reported.
    private func advance() {
        frames += 1
        silentFrames += 1
        sent.update(from: sent + block, count: sentLength - block)
        (sent + (sentLength - block)).update(repeating: 0, count: block)
    }

    /// Forgets the loop: the next call may have another.
    private func forget() {
        wRe.update(repeating: 0, count: partitions * bins)
        wIm.update(repeating: 0, count: partitions * bins)
        errorPower.update(repeating: 0, count: bins)
        micEnergy = 0
        errorEnergy = 0
        outputEnergy = 0
        micOnEstimate = 0
        estimateEnergy = 0
        applied = 0
        saturatedShare = 0
        holdFrames = 0
        evidenceFrames = 0
        engaged.set(false)
        removedDB.store(0)
    }

    // The newest reference block: the `size` sent samples ending `delay - block` samples before the
    // last one sent, i.e. the window whose last `block` samples can be heard in this frame at the earliest.
    private func addReferenceBlock() {
        newest = (newest + 1) % partitions
        let start = sentLength - delay + block - size
        re.update(from: sent + start, count: size)
        im.update(repeating: 0, count: size)
        plan.forward(re: re, im: im)
        let x = newest * bins
        for k in 0..<bins {
            xRe[x + k] = re[k]
            xIm[x + k] = im[k]
        }
        power.update(repeating: 0, count: bins)
        for p in 0..<partitions {
            let o = p * bins
            for k in 0..<bins { power[k] += xRe[o + k] * xRe[o + k] + xIm[o + k] * xIm[o + k] }
        }
    }

    // Slot of partition p (p blocks older than the newest).
    @inline(__always) private func slot(_ p: Int) -> Int { ((newest - p + partitions) % partitions) * bins }

    private func estimateEcho() {
        re.update(repeating: 0, count: size)
        im.update(repeating: 0, count: size)
        for p in 0..<partitions {
            let x = slot(p), w = p * bins
            for k in 0..<bins {
                re[k] += wRe[w + k] * xRe[x + k] - wIm[w + k] * xIm[x + k]
                im[k] += wRe[w + k] * xIm[x + k] + wIm[w + k] * xRe[x + k]
            }
        }
        mirror()
        plan.inverse(re: re, im: im)
        echo.update(from: re + (size - block), count: block)
    }

    private func adapt() {
        re.update(repeating: 0, count: size - block)
        (re + (size - block)).update(from: echo, count: block)  // the error, at the window's end
        im.update(repeating: 0, count: size)
        plan.forward(re: re, im: im)
        let kappa = Self.errorWeight * Double(partitions)
        for k in 0..<bins {
            errorPower[k] += 0.1 * (re[k] * re[k] + im[k] * im[k] - errorPower[k])
            let g = settings.step / (power[k] + kappa * errorPower[k] + regularisation)
            re[k] *= g
            im[k] *= g
        }
        for p in 0..<partitions {
            let x = slot(p), w = p * bins
            for k in 0..<bins {  // W += E · conj(X)
                wRe[w + k] += re[k] * xRe[x + k] + im[k] * xIm[x + k]
                wIm[w + k] += im[k] * xRe[x + k] - re[k] * xIm[x + k]
            }
        }
        // Keep each partition's impulse response inside its `block` taps (overlap-save needs it);
        // one partition per frame besides the first, as the cost of two transforms each allows.
        constrain(0)
        if partitions > 1 {
            constrain(constrainNext)
            constrainNext = constrainNext % (partitions - 1) + 1
        }
    }

    private func constrain(_ p: Int) {
        let w = p * bins
        for k in 0..<bins {
            re[k] = wRe[w + k]
            im[k] = wIm[w + k]
        }
        mirror()
        plan.inverse(re: re, im: im)
        (re + block).update(repeating: 0, count: size - block)
        im.update(repeating: 0, count: size)
        plan.forward(re: re, im: im)
        for k in 0..<bins {
            wRe[w + k] = re[k]
            wIm[w + k] = im[k]
        }
    }

    // The upper half of a real signal's spectrum from the lower: X[n-k] = conj(X[k]).
    private func mirror() {
        for k in 1..<(size / 2) {
            re[size - k] = re[k]
            im[size - k] = -im[k]
        }
        im[0] = 0
        im[size / 2] = 0
    }
}
