import Frames
import RealTime

/// Sums N incoming streams (a fixed set of slots, each switched on and off at run time) with
/// per-stream gain into one speaker frame, saturating at full scale. Its output is both what is
/// played and the echo canceller's reference, so muting the speaker also mutes the reference.
public final class Mixer: @unchecked Sendable {
    // @unchecked: buffers are touched by the audio thread only; controls are atomics.
    public let inputs: [MixerInput]
    public let speakerMuted = Flag(false)
    public let speakerGain = Gauge(1)
    /// Output samples that hit full scale and were clipped.
    public let clippedSamples = Counter()

    private let frame: Int
    // The inputs again as a plain buffer: iterating an Array goes through a generic coroutine
    // that allocates in unoptimised builds, and the audio thread must not allocate in any build.
    private let slots: UnsafeMutableBufferPointer<MixerInput>
    private let accumulator: UnsafeMutablePointer<Float>
    private let scratch: UnsafeMutablePointer<Int16>

    public init(inputs: [MixerInput], frameSize: Int) {
        self.inputs = inputs
        slots = .allocate(capacity: inputs.count)
        _ = slots.initialize(from: inputs)
        frame = frameSize
        accumulator = .allocate(capacity: frameSize)
        scratch = .allocate(capacity: frameSize)
        scratch.initialize(repeating: 0, count: frameSize)
    }

    deinit {
        slots.deinitialize().deallocate()
        accumulator.deallocate()
        scratch.deallocate()
    }

    /// Writes the next speaker frame into `out`.
    public func mix(into out: UnsafeMutablePointer<Int16>) {
        accumulator.update(repeating: 0, count: frame)
        for n in 0..<slots.count {
            let input = slots[n]
            if let h = input.handOff, !h.audioThreadMayRead() { continue }
            guard input.source.readFrame(into: scratch, count: frame) else {
                input.underruns.increment()
                continue
            }
            let g = Float(input.gain.load)
            for i in 0..<frame { accumulator[i] += Float(scratch[i]) * g }
        }
        let master = speakerMuted.isSet ? 0 : Float(speakerGain.load)
        clippedSamples.increment(by: saturate(accumulator, gain: master, into: out))
    }

    /// Scales and converts to Int16, clamping at full scale; returns how many samples clipped.
    private func saturate(_ src: UnsafeMutablePointer<Float>, gain: Float, into out: UnsafeMutablePointer<Int16>) -> Int {
        var clipped = 0
        for i in 0..<frame {
            let v = src[i] * gain
            if v >= 32767 { out[i] = .max; clipped += 1 }
            else if v <= -32768 { out[i] = .min; clipped += 1 }
            else { out[i] = Int16(v.rounded()) }
        }
        return clipped
    }
}
