import Foundation

/// Result of a delay search: where `reference` best matches inside `signal`.
public struct DelayEstimate: Sendable, Equatable, CustomStringConvertible {
    /// Integer lag: `signal[i + lagSamples]` best matches `reference[i]`
    /// (>= 0 means the reference appears that many samples later in the signal).
    public var lagSamples: Int
    /// Sub-sample lag from a parabola through the correlation at lag-1, lag, lag+1.
    /// Accurate to a few hundredths of a sample for signals well below Nyquist
    /// (chirps, speech); biased towards the integer lag for full-band noise.
    public var fractionalLag: Double
    /// Normalised correlation coefficient |dot| / (|ref|·|segment|) over the overlap, 0...1.
    public var peak: Double
    /// True if the best match has negative polarity (e.g. an inverting amplifier or mic).
    public var inverted: Bool

    public init(lagSamples: Int, fractionalLag: Double, peak: Double, inverted: Bool = false) {
        self.lagSamples = lagSamples
        self.fractionalLag = fractionalLag
        self.peak = peak
        self.inverted = inverted
    }

    public var description: String {
        let frac = (fractionalLag * 1000).rounded() / 1000
        let pk = (peak * 1000).rounded() / 1000
        return "lag \(lagSamples) (\(frac)) peak \(pk)\(inverted ? " inverted" : "")"
    }
}

public enum Correlation {
    /// Signals whose RMS is below this (re full scale 1.0, i.e. -120 dBFS, under one
    /// 16-bit LSB) are treated as silent: there is nothing to correlate.
    public static let silenceRMS: Double = 1e-6

    /// Finds where `reference` occurs in `signal`, searching lags 0...maxLag.
    /// Returns nil if either input is silent or no lag overlaps.
    public static func findDelay(reference: [Float], in signal: [Float], maxLag: Int) -> DelayEstimate? {
        guard maxLag >= 0 else { return nil }
        return findDelay(reference: reference, in: signal, lags: 0...maxLag)
    }

    /// Like `findDelay(reference:in:maxLag:)` but over any lag range; negative lags mean the
    /// reference starts before the signal does. Same cost: the FFT yields every lag at once.
    public static func findDelay(reference: [Float], in signal: [Float], lags: ClosedRange<Int>) -> DelayEstimate? {
        let r = reference.count, s = signal.count
        guard r > 0, s > 0 else { return nil }
        // Lags with at least one overlapping sample.
        let lo = max(lags.lowerBound, -(r - 1))
        let hi = min(lags.upperBound, s - 1)
        guard lo <= hi else { return nil }
        guard Levels.rms(reference) >= silenceRMS, Levels.rms(signal) >= silenceRMS else { return nil }

        // Zero padding to n >= r + s keeps the circular correlation free of wrap-around.
        let n = FFTPlan.nextPowerOfTwo(r + s)
        let plan = FFTPlan(size: n)
        let re = UnsafeMutablePointer<Double>.allocate(capacity: n)
        let im = UnsafeMutablePointer<Double>.allocate(capacity: n)
        defer {
            re.deallocate()
            im.deallocate()
        }
        re.initialize(repeating: 0, count: n)
        im.initialize(repeating: 0, count: n)
        reference.withUnsafeBufferPointer { p in
            var i = 0
            while i < r { re[i] = Double(p[i]); i += 1 }
        }
        signal.withUnsafeBufferPointer { p in
            var i = 0
            while i < s { im[i] = Double(p[i]); i += 1 }
        }

        // Both real inputs share one complex FFT (reference in re, signal in im); their
        // spectra are separated by conjugate symmetry. Saves one of three large FFTs.
        plan.forward(re: re, im: im)
        crossSpectrumInPlace(re, im, n)
        plan.inverse(re: re, im: im)
        // re[k] now holds c(k) = Σ ref[i]·sig[i+k]; negative lags live at re[n + k].

        @inline(__always) func corr(_ lag: Int) -> Double { re[lag >= 0 ? lag : n + lag] }

        var best = lo
        var bestAbs = -1.0
        var lag = lo
        while lag <= hi {
            let v = abs(corr(lag))
            if v > bestAbs {
                bestAbs = v
                best = lag
            }
            lag += 1
        }
        guard bestAbs > 0 else { return nil }
        let sign: Double = corr(best) < 0 ? -1 : 1

        // Parabolic interpolation; neighbours outside the overlapping range are genuinely 0.
        let y0 = sign * corr(best)
        let ym = best - 1 >= -(r - 1) ? sign * corr(best - 1) : 0
        let yp = best + 1 <= s - 1 ? sign * corr(best + 1) : 0
        let curvature = ym - 2 * y0 + yp
        var delta = 0.0
        if curvature < 0 {
            delta = min(0.5, max(-0.5, 0.5 * (ym - yp) / curvature))
        }

        let coefficient = overlapCoefficient(reference, signal, lag: best)
        return DelayEstimate(lagSamples: best, fractionalLag: Double(best) + delta,
                             peak: min(1, abs(coefficient)), inverted: sign < 0)
    }

    /// dot(a, b) / (|a|·|b|) without mean removal, over the common length; 0 if either is silent.
    public static func normalizedCorrelation(_ a: [Float], _ b: [Float]) -> Double {
        let count = min(a.count, b.count)
        return a.withUnsafeBufferPointer { pa in
            b.withUnsafeBufferPointer { pb in
                var dot = 0.0, ea = 0.0, eb = 0.0
                var i = 0
                while i < count {
                    let x = Double(pa[i]), y = Double(pb[i])
                    dot += x * y
                    ea += x * x
                    eb += y * y
                    i += 1
                }
                guard ea > 0, eb > 0 else { return 0 }
                return dot / (ea * eb).squareRoot()
            }
        }
    }

    // Turns X = FFT(ref + i·sig) into C = conj(REF)·SIG in place, where
    // REF[k] = (X[k] + conj(X[n-k]))/2 and SIG[k] = (X[k] - conj(X[n-k]))/(2i).
    // C is the spectrum of a real sequence, so C[n-k] = conj(C[k]); handling k and n-k
    // together means each pair is read before either slot is overwritten.
    private static func crossSpectrumInPlace(_ re: UnsafeMutablePointer<Double>, _ im: UnsafeMutablePointer<Double>, _ n: Int) {
        let mask = n - 1
        var k = 0
        while k <= n / 2 {
            let m = (n - k) & mask
            let ar = re[k], ai = im[k]
            let br = re[m], bi = -im[m] // conj(X[n-k])
            let refR = 0.5 * (ar + br), refI = 0.5 * (ai + bi)
            let sigR = 0.5 * (ai - bi), sigI = -0.5 * (ar - br)
            let cr = refR * sigR + refI * sigI
            let ci = refR * sigI - refI * sigR
            re[k] = cr; im[k] = ci
            re[m] = cr; im[m] = -ci
            k += 1
        }
    }

    // Correlation coefficient at one lag, computed directly over the overlapping samples:
    // exact, O(r), and normalised by the overlap so partial overlaps are not penalised.
    private static func overlapCoefficient(_ ref: [Float], _ sig: [Float], lag: Int) -> Double {
        let first = max(0, -lag)
        let last = min(ref.count, sig.count - lag) // exclusive
        guard first < last else { return 0 }
        return ref.withUnsafeBufferPointer { pr in
            sig.withUnsafeBufferPointer { ps in
                var dot = 0.0, er = 0.0, es = 0.0
                var i = first
                while i < last {
                    let x = Double(pr[i]), y = Double(ps[i + lag])
                    dot += x * y
                    er += x * x
                    es += y * y
                    i += 1
                }
                guard er > 0, es > 0 else { return 0 }
                return dot / (er * es).squareRoot()
            }
        }
    }
}
