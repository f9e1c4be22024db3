import EchoCancel
import Glibc
import RealTime

/// What the audio thread does to each captured frame, in this order: the echo canceller (it pairs
/// the frame with what was played; inside it, after speexdsp's filter, the loop canceller models
/// the path from what was sent through another terminal), the microphone's gain and mute, the howl
/// guard (it limits what is sent). The result goes to the microphone ring; the network thread
/// hands each frame it sent back, decoded again, through `sentBack`, as the loop canceller's
/// reference.
public final class MicrophoneChain: @unchecked Sendable {
    // @unchecked: the elements' buffers are the audio thread's; other threads use their atomics.
    public let loopCanceller: LoopCanceller?
    public let canceller: EchoCanceller
    public let gain: MicrophoneGain
    /// Off for measurements that must see the canceller's output unchanged.
    public let howlGuard: HowlGuard?
    /// The frames sent, decoded again, one per frame handed on (`SentDecoder` writes it).
    public let sentBack: SampleRing?
    /// Frames that came back with no frame handed on to match (never expected; counted to show it).
    public let unmatchedSentFrames = Counter()

    private let returned: UnsafeMutablePointer<Int16>
    /// Indices of the frames handed on whose decoded copy has not come back yet, oldest first.
    private let pending: UnsafeMutablePointer<Int>
    private static let pendingCapacity = 64
    private var pendingStart = 0, pendingCount = 0
    private var processed = 0

    public init(canceller: EchoCanceller, gain: MicrophoneGain, howlGuard: HowlGuard?, loopCanceller: LoopCanceller? = nil) {
        let frame = gain.frameSize
        precondition(frame == canceller.settings.frameSize && (loopCanceller?.settings.frameSize ?? frame) == frame,
                     "one frame size along the chain")
        self.canceller = canceller
        self.gain = gain
        self.howlGuard = howlGuard
        self.loopCanceller = loopCanceller
        // More than the microphone ring holds: the network thread cannot be further ahead.
        sentBack = loopCanceller.map { _ in SampleRing(minimumCapacity: frame * Self.pendingCapacity) }
        returned = .allocate(capacity: frame)
        returned.initialize(repeating: 0, count: frame)
        pending = .allocate(capacity: Self.pendingCapacity)
        pending.initialize(repeating: 0, count: Self.pendingCapacity)
    }

    deinit {
        returned.deallocate()
        pending.deallocate()
    }

    public var frameSize: Int { gain.frameSize }

    /// Audio thread: one captured frame in, the frame to send out.
    @inline(__always)
    public func process(captured: UnsafePointer<Int16>, into out: UnsafeMutablePointer<Int16>) {
        processed += 1
        if let loop = loopCanceller { takeSentBack(loop) }
        canceller.process(capture: captured, output: out, loop: loopCanceller)
        gain.process(out)
        howlGuard?.process(out)
    }

    /// Audio thread: the frame just processed went to the network thread (not every frame does:
    /// stale capture and a full ring are not sent).
    public func handedOn() {
        guard loopCanceller != nil else { return }
        if pendingCount == Self.pendingCapacity {  // cannot happen while the ring is smaller; keep the newest
            pendingStart = (pendingStart + 1) % Self.pendingCapacity
            pendingCount -= 1
        }
        pending[(pendingStart + pendingCount) % Self.pendingCapacity] = processed - 1
        pendingCount += 1
    }

    /// Places each frame the network thread handed back at the captured frame it was made from.
    private func takeSentBack(_ loop: LoopCanceller) {
        guard let sentBack else { return }
        while sentBack.read(into: returned, count: frameSize) {
            guard pendingCount > 0 else {
                unmatchedSentFrames.increment()
                continue
            }
            let index = pending[pendingStart]
            pendingStart = (pendingStart + 1) % Self.pendingCapacity
            pendingCount -= 1
            loop.sent(returned, index: index)
        }
    }
}

/// The microphone's gain and mute, set by any thread, applied in place on the audio thread.
/// A muted microphone sends digital silence.
public final class MicrophoneGain: Sendable {
    public let muted = Flag(false)
    /// Linear gain.
    public let gain = Gauge(1)
    /// Samples that hit full scale after the gain and were clipped.
    public let clippedSamples = Counter()
    public let frameSize: Int

    public init(frameSize: Int) {
        self.frameSize = frameSize
    }

    @inline(__always)
    public func process(_ samples: UnsafeMutablePointer<Int16>) {
        if muted.isSet {
            samples.update(repeating: 0, count: frameSize)
            return
        }
        let g = Float(gain.load)
        if g == 1 { return }
        var clipped = 0
        for i in 0..<frameSize {
            let v = Float(samples[i]) * g
            if v >= 32767 { samples[i] = .max; clipped += 1 }
            else if v <= -32768 { samples[i] = .min; clipped += 1 }
            else { samples[i] = Int16(v.rounded()) }
        }
        if clipped > 0 { clippedSamples.increment(by: clipped) }
    }
}

/// The last resort against a loop through another terminal (two terminals that hear each other),
/// which the `LoopCanceller` is there to remove: a peak limiter on what is sent, at `ceilingDBFS`,
/// so that a loop the canceller has not yet learnt stops growing short of clipping (a clipped loop
/// is no longer linear, and a linear filter cannot learn it); and, if the limiter has been holding
/// a loop for most of `howlSeconds` anyway (the canceller off or failing), a break: the gain drops
/// by `breakDB` for `holdSeconds`, which makes the loop decay, then comes back at
/// `releaseDBPerSecond`. Speech peaking below the ceiling is never touched. Allocation-free after
/// `init`; the audio thread only.
public final class HowlGuard: @unchecked Sendable {
    // @unchecked: the state below belongs to the audio thread; other threads read the atomics only.
    public struct Settings: Sendable, Equatable {
        /// Sample peak of what is sent. A talker peaking below it passes untouched.
        public var ceilingDBFS = -6.0
        /// Limited frames, averaged over about this long, that make a held loop (not a loud word).
        public var howlSeconds = 2.0
        public var howlShare = 0.7
        public var breakDB = 20.0
        public var holdSeconds = 1.0
        public var releaseDBPerSecond = 20.0
        public init() {}
    }

    public let settings: Settings
    private let frameSize: Int
    private let framesPerSecond: Double
    private let ceiling: Float
    /// Gain applied to the last sample (linear) and the limiter's and the break's parts of it (dB, ≤ 0).
    private var applied: Float = 1
    private var limitDB = 0.0
    private var breakGainDB = 0.0
    private var hold = 0
    /// Share of recent frames that were limited (exponential average over `howlSeconds`).
    private var limitedShare = 0.0

    /// Howls broken since the start, and the current attenuation (dB, ≥ 0), for the statistics.
    public let howls = Counter()
    public let attenuationDB = Gauge(0)
    public let enabled = Flag(true)

    public init(frameSize: Int, sampleRate: Int, settings: Settings = Settings()) {
        self.settings = settings
        self.frameSize = frameSize
        framesPerSecond = Double(sampleRate) / Double(frameSize)
        ceiling = Float(32767 * pow(10, settings.ceilingDBFS / 20))
    }

    /// Processes one frame in place.
    public func process(_ frame: UnsafeMutablePointer<Int16>) {
        guard enabled.isSet else { return }
        var peak: Float = 0
        for i in 0..<frameSize { peak = max(peak, abs(Float(frame[i]))) }

        let release = settings.releaseDBPerSecond / framesPerSecond
        if hold > 0 { hold -= 1 } else { breakGainDB = min(0, breakGainDB + release) }
        limitDB = min(0, limitDB + release)
        // The limiter: the frame's peak at most the ceiling, at once.
        let over = 20 * log10(Double(max(peak, 1)) / Double(ceiling)) + limitDB + breakGainDB
        let limited = over > 0
        if limited { limitDB -= over }
        let a = 1 / (settings.howlSeconds * framesPerSecond)
        limitedShare += a * ((limited ? 1 : 0) - limitedShare)
        if limitedShare > settings.howlShare {
            breakGainDB -= settings.breakDB
            hold = Int(settings.holdSeconds * framesPerSecond)
            limitedShare = 0
            howls.increment()
        }
        let gainDB = limitDB + breakGainDB
        attenuationDB.store(-gainDB)
        let target = Float(pow(10, gainDB / 20))
        if target == 1 && applied == 1 { return }
        // Towards the new gain across the frame, except where that would pass the ceiling: no click, no overshoot.
        let step = (target - applied) / Float(frameSize)
        for i in 0..<frameSize {
            let g = target < applied ? target : applied + step * Float(i + 1)
            frame[i] = Int16((Float(frame[i]) * g).rounded())
        }
        applied = target
    }

    /// Forgets the loop (a new call, a new peer).
    public func reset() {
        applied = 1
        limitDB = 0
        breakGainDB = 0
        hold = 0
        limitedShare = 0
        attenuationDB.store(0)
    }
}
