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

/// Keeps an acoustic loop through another terminal from howling. Each terminal's echo canceller
/// removes only its own speaker from its microphone; two terminals that hear each other (one room,
/// a thin wall) form a loop the cancellers cannot see: my microphone → the other speaker → my
/// microphone. With a loop gain above 1 it grows to full scale within a fraction of a second.
///
/// The guard sits on the microphone path after the canceller and the gain (what is sent). It limits
/// the frame level to `ceilingDBFS` at once (a loop stops growing there; speech rarely gets near
/// it), and when the limit has held for most of `howlWindowFrames` (a loop, not a loud word) it
/// drops the gain by `breakDB` more, which makes the loop decay, and keeps the gain `marginDB` below
/// where the loop sustained itself, releasing that cap by `capReleaseDBPerSecond`. In between it
/// returns to unity at `releaseDBPerSecond`. Allocation-free after `init`; the audio thread only.
public final class HowlGuard: @unchecked Sendable {
    // @unchecked: the state below belongs to the audio thread; other threads read the atomics only.
    public struct Settings: Sendable, Equatable {
        /// Speech frames seldom pass it (10 ms RMS of a close talker at unity gain: -20...-25 dBFS);
        /// below it, a sine at the ceiling played at +6 dB by two terminals does not clip the air.
        public var ceilingDBFS = -18.0
        /// Frames within 1 dB of the ceiling in the window that make a howl (0.2 s of 0.3 s at 10 ms).
        public var howlWindowFrames = 30
        public var howlLimitedFrames = 20
        public var breakDB = 20.0
        public var holdFrames = 100
        public var marginDB = 6.0
        public var releaseDBPerSecond = 10.0
        public var capReleaseDBPerSecond = 0.05
        public init() {}
    }

    public let settings: Settings
    private let frameSize: Int
    private let framesPerSecond: Double
    /// Gain applied now, and the highest gain allowed (dB, ≤ 0).
    private var gainDB = 0.0
    private var capDB = 0.0
    private var hold = 0
    /// One bit per recent frame: was it limited?
    private var limitedHistory: UInt64 = 0

    /// Howls broken since the start, and the current attenuation (dB, ≥ 0), for the statistics.
    public let howls = Counter()
    public let attenuationDB = Gauge(0)
    public let enabled = Flag(true)

    public init(frameSize: Int, sampleRate: Int, settings: Settings = Settings()) {
        precondition(settings.howlWindowFrames <= 64, "the window is one 64-bit history")
        self.settings = settings
        self.frameSize = frameSize
        framesPerSecond = Double(sampleRate) / Double(frameSize)
    }

    /// Processes one frame in place.
    public func process(_ frame: UnsafeMutablePointer<Int16>) {
        guard enabled.isSet else { return }
        var energy = 0.0
        for i in 0..<frameSize { energy += Double(frame[i]) * Double(frame[i]) }
        let levelDB = 10 * log10(max(energy / Double(frameSize), 1e-3) / (32768.0 * 32768.0))

        // Release towards the cap (and the cap towards unity), unless holding after a break.
        if hold > 0 {
            hold -= 1
        } else {
            gainDB = min(capDB, gainDB + settings.releaseDBPerSecond / framesPerSecond)
        }
        capDB = min(0, capDB + settings.capReleaseDBPerSecond / framesPerSecond)

        // The limiter: at most the ceiling, at once.
        let over = levelDB + gainDB - settings.ceilingDBFS
        if over > 0 { gainDB -= over }
        let limited = over > -1
        limitedHistory = (limitedHistory << 1) | (limited ? 1 : 0)
        let window = settings.howlWindowFrames == 64 ? UInt64.max : (UInt64(1) << UInt64(settings.howlWindowFrames)) - 1
        if (limitedHistory & window).nonzeroBitCount >= settings.howlLimitedFrames {
            // A loop held at the ceiling: the gain that sustained it is too high by the loop's margin.
            capDB = min(capDB, gainDB - settings.marginDB)
            gainDB -= settings.breakDB
            hold = settings.holdFrames
            limitedHistory = 0
            howls.increment()
        }
        attenuationDB.store(-gainDB)
        if gainDB >= -0.001 { return }
        let g = pow(10, gainDB / 20)
        for i in 0..<frameSize { frame[i] = Int16((Double(frame[i]) * g).rounded()) }
    }

    /// Forgets the loop (a new call, a new peer).
    public func reset() {
        gainDB = 0
        capDB = 0
        hold = 0
        limitedHistory = 0
        attenuationDB.store(0)
    }
}
