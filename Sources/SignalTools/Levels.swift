import Foundation

/// Level measurements. Float samples are relative to full scale 1.0; dB values are
/// dBFS for RMS (a full-scale sine reads about -3 dB) and plain power ratios otherwise.
public enum Levels {
    /// What dB helpers return instead of -infinity for digital silence, so results
    /// stay finite and can be averaged, printed and compared.
    public static let floorDB: Double = -200
    // Power (mean square) matching `floorDB`.
    private static let floorPower: Double = 1e-20

    /// Root mean square, 0 for an empty input.
    public static func rms(_ x: [Float]) -> Double {
        guard !x.isEmpty else { return 0 }
        return (sumOfSquares(x, 0, x.count) / Double(x.count)).squareRoot()
    }

    /// RMS in dBFS, never below `floorDB`.
    public static func rmsDB(_ x: [Float]) -> Double {
        guard !x.isEmpty else { return floorDB }
        return powerDB(sumOfSquares(x, 0, x.count) / Double(x.count))
    }

    /// Largest absolute sample value, 0 for an empty input.
    public static func peak(_ x: [Float]) -> Float {
        x.withUnsafeBufferPointer { p in
            var m: Float = 0
            var i = 0
            while i < p.count {
                m = max(m, abs(p[i]))
                i += 1
            }
            return m
        }
    }

    /// Peak in dBFS, never below `floorDB`.
    public static func peakDB(_ x: [Float]) -> Double {
        amplitudeDB(Double(peak(x)))
    }

    /// Samples sitting at either rail (Int16.min or Int16.max): a clipping indicator.
    public static func clippedSampleCount(_ x: [Int16]) -> Int {
        x.withUnsafeBufferPointer { p in
            var n = 0
            var i = 0
            while i < p.count {
                if p[i] == .max || p[i] == .min { n += 1 }
                i += 1
            }
            return n
        }
    }

    /// Mean square (power) of each complete frame of `frame` samples; a trailing partial
    /// frame is dropped so every value covers the same duration.
    public static func frameEnergies(_ x: [Float], frame: Int) -> [Double] {
        precondition(frame > 0, "frame must be positive")
        let frames = x.count / frame
        var out = [Double](repeating: 0, count: frames)
        for f in 0..<frames {
            out[f] = sumOfSquares(x, f * frame, frame) / Double(frame)
        }
        return out
    }

    /// Per-frame RMS in dBFS (see `frameEnergies`).
    public static func frameRMSDB(_ x: [Float], frame: Int) -> [Double] {
        frameEnergies(x, frame: frame).map(powerDB)
    }

    /// 10·log10(power), clamped at `floorDB`.
    public static func powerDB(_ power: Double) -> Double {
        10 * log10(max(power, floorPower))
    }

    /// 20·log10(amplitude), clamped at `floorDB`.
    public static func amplitudeDB(_ amplitude: Double) -> Double {
        powerDB(amplitude * amplitude)
    }

    /// Echo return loss enhancement: per frame 10·log10(E_mic / E_processed), over the
    /// frames where the mic RMS exceeds `activeThresholdDB` (quiet frames would only
    /// measure the noise floor). `meanDB` is the ratio of summed energies, which weights
    /// loud frames more than the median does. Both are NaN when no frame is active.
    /// The inputs are compared over their common length.
    public static func erleDB(mic: [Float], processed: [Float], frame: Int,
                              activeThresholdDB: Double) -> (medianDB: Double, meanDB: Double, frames: Int) {
        let pairs = activeFramePowers(gate: mic, other: processed, frame: frame, thresholdDB: activeThresholdDB)
        guard !pairs.isEmpty else { return (.nan, .nan, 0) }
        let perFrame = pairs.map { powerDB($0.gate) - powerDB($0.other) }
        let micSum = pairs.reduce(0.0) { $0 + $1.gate }
        let outSum = pairs.reduce(0.0) { $0 + $1.other }
        return (median(perFrame), powerDB(micSum) - powerDB(outSum), pairs.count)
    }

    /// How much of a near-end signal survived processing: median, over frames where the
    /// reference RMS exceeds `activeThresholdDB`, of 10·log10(E_processed / E_reference).
    /// 0 dB means untouched, -6 dB means halved in amplitude. The caller must time-align
    /// the signals first (see `Correlation.findDelay` and `Signals.align`). NaN if no frame
    /// is active.
    public static func retainedDB(reference: [Float], processed: [Float], frame: Int,
                                  activeThresholdDB: Double) -> Double {
        let pairs = activeFramePowers(gate: reference, other: processed, frame: frame, thresholdDB: activeThresholdDB)
        guard !pairs.isEmpty else { return .nan }
        return median(pairs.map { powerDB($0.other) - powerDB($0.gate) })
    }

    /// Median (mean of the middle two for even counts); NaN for an empty input.
    public static func median(_ values: [Double]) -> Double {
        guard !values.isEmpty else { return .nan }
        let sorted = values.sorted()
        let mid = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[mid] : 0.5 * (sorted[mid - 1] + sorted[mid])
    }

    // Frame powers of `gate` and `other` for the frames where `gate` is above threshold.
    private static func activeFramePowers(gate: [Float], other: [Float], frame: Int,
                                          thresholdDB: Double) -> [(gate: Double, other: Double)] {
        precondition(frame > 0, "frame must be positive")
        let frames = min(gate.count, other.count) / frame
        var out: [(gate: Double, other: Double)] = []
        out.reserveCapacity(frames)
        for f in 0..<frames {
            let g = sumOfSquares(gate, f * frame, frame) / Double(frame)
            guard powerDB(g) > thresholdDB else { continue }
            out.append((g, sumOfSquares(other, f * frame, frame) / Double(frame)))
        }
        return out
    }

    // Double accumulation: Float sums of ~10^6 squares lose several digits.
    private static func sumOfSquares(_ x: [Float], _ start: Int, _ count: Int) -> Double {
        x.withUnsafeBufferPointer { p in
            var s = 0.0
            var i = start
            let end = start + count
            while i < end {
                let v = Double(p[i])
                s += v * v
                i += 1
            }
            return s
        }
    }
}
