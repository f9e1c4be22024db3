import Foundation

/// Test-signal generators and sample conversions. Float samples use full scale 1.0.
public enum Signals {
    public enum Sweep: Sendable {
        case linear
        /// Exponential sweep: equal time per octave, the usual choice for acoustic measurements.
        case logarithmic
    }

    /// Samples in `duration` seconds, rounded to the nearest sample.
    public static func sampleCount(duration: Double, sampleRate: Int) -> Int {
        max(0, Int((duration * Double(sampleRate)).rounded()))
    }

    /// A sine wave of `duration` seconds.
    public static func sine(frequency: Double, duration: Double, sampleRate: Int,
                            amplitude: Float = 0.5, phase: Double = 0) -> [Float] {
        let count = sampleCount(duration: duration, sampleRate: sampleRate)
        let w = 2 * Double.pi * frequency / Double(sampleRate)
        var out = [Float](repeating: 0, count: count)
        for i in 0..<count {
            // Phase from the index (not accumulated) so long tones do not drift.
            out[i] = amplitude * Float(sin(w * Double(i) + phase))
        }
        return out
    }

    /// A sweep from `startHz` to `endHz` over `duration` seconds with raised-cosine fades of
    /// `fade` seconds at both ends (abrupt edges would splatter energy up to Nyquist).
    ///
    /// `delay` (in samples, may be fractional) shifts the continuous-time sweep later; the
    /// output grows by ceil(delay) samples. Because every sample is evaluated from the
    /// formula at its shifted time, this produces an exact sub-sample delay for testing
    /// delay estimators, with no interpolation filter involved.
    public static func chirp(from startHz: Double, to endHz: Double, duration: Double, sampleRate: Int,
                             amplitude: Float = 0.5, sweep: Sweep = .logarithmic,
                             fade: Double = 0.005, delay: Double = 0) -> [Float] {
        precondition(duration > 0 && sampleRate > 0, "chirp needs a positive duration and sample rate")
        precondition(delay >= 0, "chirp delay must not be negative")
        precondition(sweep == .linear || (startHz > 0 && endHz > 0), "a logarithmic sweep needs positive frequencies")
        let count = sampleCount(duration: duration, sampleRate: sampleRate) + Int(delay.rounded(.up))
        let sr = Double(sampleRate)
        let fadeTime = min(max(fade, 0), duration / 2)
        let k = endHz / startHz
        let logarithmic = sweep == .logarithmic && abs(k - 1) > 1e-12
        let logK = logarithmic ? log(k) : 0

        var out = [Float](repeating: 0, count: count)
        for i in 0..<count {
            let t = (Double(i) - delay) / sr
            if t < 0 || t > duration { continue }
            // Phase is the integral of the instantaneous frequency.
            let phase: Double
            if logarithmic {
                phase = 2 * Double.pi * startHz * duration / logK * (exp(t / duration * logK) - 1)
            } else {
                phase = 2 * Double.pi * (startHz * t + (endHz - startHz) * t * t / (2 * duration))
            }
            var gain = 1.0
            if fadeTime > 0 {
                let edge = min(t, duration - t)
                if edge < fadeTime { gain = 0.5 - 0.5 * cos(Double.pi * edge / fadeTime) }
            }
            out[i] = amplitude * Float(gain * sin(phase))
        }
        return out
    }

    /// Uniform white noise in -amplitude...amplitude, reproducible for a given seed.
    public static func whiteNoise(count: Int, amplitude: Float, seed: UInt64) -> [Float] {
        var rng = SplitMix64(seed: seed)
        var out = [Float](repeating: 0, count: count)
        for i in 0..<count {
            out[i] = amplitude * Float(2 * rng.nextUnit() - 1)
        }
        return out
    }

    /// Gaussian white noise with the given RMS (Box–Muller), reproducible for a given seed.
    public static func gaussianNoise(count: Int, rms: Float, seed: UInt64) -> [Float] {
        var rng = SplitMix64(seed: seed)
        var out = [Float](repeating: 0, count: count)
        var i = 0
        while i < count {
            let u1 = 1 - rng.nextUnit() // (0, 1]: log stays finite
            let u2 = rng.nextUnit()
            let radius = (-2 * log(u1)).squareRoot()
            out[i] = rms * Float(radius * cos(2 * Double.pi * u2))
            if i + 1 < count { out[i + 1] = rms * Float(radius * sin(2 * Double.pi * u2)) }
            i += 2
        }
        return out
    }

    public static func silence(count: Int) -> [Float] {
        [Float](repeating: 0, count: count)
    }

    /// Int16 to Float by dividing by 32768, so Int16.min maps to exactly -1.
    public static func toFloat(_ x: [Int16]) -> [Float] {
        x.map { Float($0) * (1 / 32768) }
    }

    /// Float to Int16 by multiplying by 32768, rounding and clamping (so +1.0 becomes 32767).
    /// Exact inverse of `toFloat` for every Int16 value.
    public static func toInt16(_ x: [Float]) -> [Int16] {
        x.map { int16(fromUnit: Double($0)) }
    }

    /// `signal[lag ..< lag + length]`, with zeros wherever that range leaves the signal
    /// (lag may be negative). With `lag` from `Correlation.findDelay`, this lines a
    /// recording up with its reference sample for sample.
    public static func align(_ signal: [Float], lag: Int, length: Int) -> [Float] {
        guard length > 0 else { return [] }
        var out = [Float](repeating: 0, count: length)
        let first = max(0, -lag)
        let last = min(length, signal.count - lag) // exclusive
        if first < last {
            for i in first..<last { out[i] = signal[i + lag] }
        }
        return out
    }

    /// Adds `gain * source` into `destination` starting at `offset`, ignoring samples that
    /// fall outside it. Handy for building test scenes (echo plus near-end talk plus noise).
    public static func mix(_ source: [Float], into destination: inout [Float], at offset: Int, gain: Float = 1) {
        let first = max(0, -offset)
        let last = min(source.count, destination.count - offset) // exclusive
        guard first < last else { return }
        for i in first..<last { destination[i + offset] += gain * source[i] }
    }

    // Shared by `toInt16` and the WAV reader: one rounding and clamping rule everywhere.
    @inline(__always)
    static func int16(fromUnit x: Double) -> Int16 {
        let v = (x * 32768).rounded()
        if v >= 32767 { return .max }
        if v <= -32768 { return .min }
        if v.isNaN { return 0 }
        return Int16(v)
    }
}
