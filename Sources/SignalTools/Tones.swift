import Foundation

/// Event tones: rendering a sequence of notes, and finding such sequences in a recording (the
/// tests' ear, and a technician's check of what a terminal played).
public enum Tones {
    /// Sine notes (hz 0 = a pause) with 5 ms raised-cosine edges, so no note clicks, peaking at
    /// `peakDBFS`; `length` pads with silence (a ring period), never cuts.
    public static func render(_ notes: [(hz: Double, ms: Double)], sampleRate: Int = 48000, peakDBFS: Double = -12,
                              length: Int? = nil) -> [Int16] {
        let rate = Double(sampleRate)
        let amplitude = pow(10, peakDBFS / 20)
        let edge = 0.005 * rate
        var out: [Int16] = []
        for note in notes {
            let n = Int((note.ms / 1000 * rate).rounded())
            guard note.hz > 0 else {
                out += [Int16](repeating: 0, count: n)
                continue
            }
            let ramp = min(edge, Double(n) / 2)
            for i in 0..<n {
                let t = Double(i)
                let fromEdge = min(t + 0.5, Double(n) - t - 0.5)
                let envelope = fromEdge >= ramp ? 1 : (1 - cos(Double.pi * fromEdge / ramp)) / 2
                out.append(Signals.int16(fromUnit: amplitude * envelope * sin(2 * Double.pi * note.hz * t / rate)))
            }
        }
        if let length, length > out.count { out += [Int16](repeating: 0, count: length - out.count) }
        return out
    }

    /// One stretch of a recording where one frequency dominated.
    public struct HeardNote: Sendable, Equatable {
        public var hz: Double
        public var start: Double
        public var duration: Double
    }

    /// The notes heard in `x`: every 10 ms a 1024-point Hann-windowed spectrum; a block whose
    /// strongest peak (interpolated) holds at least `tonality` of the block's power, above
    /// `floorDBFS`, is tonal at that frequency; runs of blocks within `toleranceHz` of each other
    /// make a note (at least 30 ms).
    public static func notes(in x: [Int16], sampleRate: Int = 48000, floorDBFS: Double = -55, tonality: Double = 0.5,
                             toleranceHz: Double = 20) -> [HeardNote] {
        let size = 1024
        let hop = sampleRate / 100
        guard x.count >= size else { return [] }
        let plan = FFTPlan(size: size)
        let window = (0..<size).map { 0.5 - 0.5 * cos(2 * Double.pi * Double($0) / Double(size)) }
        let windowPower = window.reduce(0) { $0 + $1 * $1 }
        let re = UnsafeMutablePointer<Double>.allocate(capacity: size)
        let im = UnsafeMutablePointer<Double>.allocate(capacity: size)
        defer { re.deallocate(); im.deallocate() }
        var labels: [Double?] = []
        var start = 0
        while start + size <= x.count {
            for i in 0..<size {
                re[i] = Double(x[start + i]) / 32768 * window[i]
                im[i] = 0
            }
            plan.forward(re: re, im: im)
            var power = [Double](repeating: 0, count: size / 2)
            for k in 1..<size / 2 { power[k] = re[k] * re[k] + im[k] * im[k] }
            let total = power.reduce(0, +)
            let k = (2..<size / 2 - 1).max { power[$0] < power[$1] } ?? 2
            // Mean square of a sine of amplitude a under the window: total ≈ a² · Σw² / 2 (both halves).
            let meanSquare = 2 * total / (Double(size) * windowPower)
            let peak = power[k - 1] + power[k] + power[k + 1]
            if 10 * log10(max(meanSquare, 1e-30)) > floorDBFS, peak >= tonality * total {
                let (a, b, c) = (log(max(power[k - 1], 1e-30)), log(max(power[k], 1e-30)), log(max(power[k + 1], 1e-30)))
                let shift = (a - c) / (2 * (a - 2 * b + c))
                labels.append((Double(k) + (shift.isFinite ? shift : 0)) * Double(sampleRate) / Double(size))
            } else {
                labels.append(nil)
            }
            start += hop
        }
        var notes: [HeardNote] = []
        var i = 0
        while i < labels.count {
            guard let f = labels[i] else { i += 1; continue }
            var j = i + 1
            var sum = f
            while j < labels.count, let g = labels[j], abs(g - f) <= toleranceHz { sum += g; j += 1 }
            let blocks = j - i
            if blocks >= 3 {
                notes.append(HeardNote(hz: sum / Double(blocks), start: Double(i * hop) / Double(sampleRate),
                                       duration: Double(blocks * hop) / Double(sampleRate)))
            }
            i = j
        }
        return notes
    }

    /// Where the tone `notes` (hz 0 = a pause) occurs in `heard`: the start times, in seconds. Its
    /// notes are consecutive (each starts within 150 ms of the previous one's end), each within
    /// `toleranceHz`; a note heard in pieces counts as the note when its
    /// pieces together are no longer than it (+ 40 ms, the analysis window's smear): a machine that
    /// held the speaker's sound server up puts an underrun's silence inside a note and the rest of
    /// the note after it (a CI run's alarm: 2240 Hz heard as 110 ms, 70 ms of zeros, 70 ms). Two
    /// notes of one frequency meant apart (a bell's strokes) add up to more than one and stay two.
    /// Occurrences do not overlap.
    public static func occurrences(of notes: [(hz: Double, ms: Double)], in heard: [HeardNote],
                                   toleranceHz: Double = 20) -> [Double] {
        matches(of: notes, in: heard, toleranceHz: toleranceHz).map(\.start)
    }

    /// One occurrence of a tone: from its first piece's start to its last piece's end, seconds.
    public struct Match: Sendable, Equatable {
        public let start: Double
        public let end: Double
    }

    /// The occurrences `occurrences(of:in:)` finds, each with where it ends: a ringback's length
    /// is told by its span, holes included.
    public static func matches(of notes: [(hz: Double, ms: Double)], in heard: [HeardNote],
                               toleranceHz: Double = 20) -> [Match] {
        let pattern = notes.filter { $0.hz > 0 }
        guard !pattern.isEmpty else { return [] }
        let maxGap = 0.15, smear = 0.04
        var found: [Match] = []
        var i = 0
        while i < heard.count {
            var k = i, end: Double? = nil, matched = true
            for note in pattern {
                guard k < heard.count, abs(heard[k].hz - note.hz) <= toleranceHz,
                      end.map({ heard[k].start - $0 < maxGap }) ?? true else { matched = false; break }
                var length = heard[k].duration, last = heard[k].start + heard[k].duration
                k += 1
                while k < heard.count, abs(heard[k].hz - note.hz) <= toleranceHz, heard[k].start - last < maxGap,
                      length + heard[k].duration <= note.ms / 1000 + smear {
                    length += heard[k].duration
                    last = heard[k].start + heard[k].duration
                    k += 1
                }
                end = last
            }
            // A tone does not overlap itself: the next one starts after this one's last piece.
            if matched, let end { found.append(Match(start: heard[i].start, end: end)); i = k } else { i += 1 }
        }
        return found
    }
}
