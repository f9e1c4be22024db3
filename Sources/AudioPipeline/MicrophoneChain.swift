import EchoCancel
import RealTime

/// What the audio thread does to each captured frame, in this order: the echo canceller (it
/// needs the raw frame and pairs it with what was played), the microphone's gain and mute, the
/// howl guard (it limits what is sent). The result goes to the microphone ring.
public final class MicrophoneChain: @unchecked Sendable {
    // @unchecked: the elements' buffers are the audio thread's; other threads use their atomics.
    public let canceller: EchoCanceller
    public let gain: MicrophoneGain
    /// Off for measurements that must see the canceller's output unchanged.
    public let howlGuard: HowlGuard?

    public init(canceller: EchoCanceller, gain: MicrophoneGain, howlGuard: HowlGuard?) {
        precondition(gain.frameSize == canceller.settings.frameSize, "one frame size along the chain")
        self.canceller = canceller
        self.gain = gain
        self.howlGuard = howlGuard
    }

    public var frameSize: Int { gain.frameSize }

    /// Audio thread: one captured frame in, the frame to send out.
    @inline(__always)
    public func process(captured: UnsafePointer<Int16>, into out: UnsafeMutablePointer<Int16>) {
        canceller.process(capture: captured, output: out)
        gain.process(out)
        howlGuard?.process(out)
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
