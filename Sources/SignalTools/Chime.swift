import Foundation

/// The tone played in a room when another room calls it: two bell-like tones a fifth apart,
/// the second entering while the first still rings, with smooth edges so the speaker never
/// clicks. Mono Int16 at the engine's rate.
public struct ChimeSettings: Sendable, Equatable {
    public var sampleRate: Int
    /// The first tone (E5); the second is `interval` times higher (3/2: a perfect fifth).
    public var firstHz: Double
    public var interval: Double
    /// When the second tone starts, and when both have faded to silence.
    public var secondStart: Double
    public var duration: Double
    /// Raised-cosine fade-in of each tone and fade-out of the whole chime.
    public var attack: Double
    public var release: Double
    public var peakDBFS: Double

    public init(sampleRate: Int = 48000, firstHz: Double = 659.25, interval: Double = 1.5,
                secondStart: Double = 0.22, duration: Double = 0.6, attack: Double = 0.01,
                release: Double = 0.05, peakDBFS: Double = -12) {
        self.sampleRate = sampleRate
        self.firstHz = firstHz
        self.interval = interval
        self.secondStart = secondStart
        self.duration = duration
        self.attack = attack
        self.release = release
        self.peakDBFS = peakDBFS
    }

    /// The octave partial (2×) that gives each tone its bell colour, relative to the fundamental.
    public static let overtoneLevel = 0.2

    /// The chime as a listener's analysis hears it, note by note (`Tones.matches`): the first tone
    /// until the second enters, then the second until the end.
    public var heardNotes: [(hz: Double, ms: Double)] {
        [(firstHz, secondStart * 1000), (firstHz * interval, (duration - secondStart) * 1000)]
    }
}

public enum Chime {
    /// The generated chime, exactly `duration × sampleRate` samples, peaking at `peakDBFS`.
    public static func generate(_ s: ChimeSettings = ChimeSettings()) -> [Int16] {
        let count = Signals.sampleCount(duration: s.duration, sampleRate: s.sampleRate)
        let rate = Double(s.sampleRate)
        var x = [Double](repeating: 0, count: count)
        addTone(&x, hz: s.firstHz, from: 0, settings: s)
        addTone(&x, hz: s.firstHz * s.interval, from: Int(s.secondStart * rate), settings: s)
        // Fade the whole chime out so it ends on silence, whatever still rings.
        let fade = max(1, Int(s.release * rate))
        for i in max(0, count - fade)..<count {
            x[i] *= raisedCosine(Double(count - 1 - i) / Double(fade))
        }
        let peak = x.reduce(0) { max($0, abs($1)) }
        guard peak > 0 else { return [Int16](repeating: 0, count: count) }
        let gain = pow(10, s.peakDBFS / 20) / peak
        return x.map { Signals.int16(fromUnit: $0 * gain) }
    }

    /// A WAV file to play instead: 16-bit (or any format WAVAudio reads) at `sampleRate`; stereo
    /// or more channels are mixed down to mono. Other rates are refused rather than resampled.
    public static func load(path: String, sampleRate: Int = 48000) throws -> [Int16] {
        let audio = try WAVAudio.read(path: path)
        guard audio.sampleRate == sampleRate else {
            throw WAVError(path: path, kind: .unsupportedFormat,
                           problem: "chime is sampled at \(audio.sampleRate) Hz; it must be \(sampleRate) Hz")
        }
        guard audio.frameCount > 0 else {
            throw WAVError(path: path, kind: .malformed, problem: "chime holds no audio")
        }
        return audio.mono().samples
    }

    /// 0 at 0, 1 at 1, with zero slope at both ends.
    private static func raisedCosine(_ t: Double) -> Double {
        t >= 1 ? 1 : (1 - cos(Double.pi * max(0, t))) / 2
    }

    /// One tone from sample `start` on: smooth attack, then an exponential ring-out (a struck bell).
    private static func addTone(_ x: inout [Double], hz: Double, from start: Int, settings s: ChimeSettings) {
        let rate = Double(s.sampleRate)
        let ring = (s.duration - Double(start) / rate) / 3 // about -26 dB by the end
        for i in start..<x.count {
            let t = Double(i - start) / rate
            let envelope = raisedCosine(t / s.attack) * exp(-t / ring)
            let phase = 2 * Double.pi * hz * t
            // The overtone dies away faster, so the tone mellows as it rings.
            x[i] += envelope * (sin(phase) + ChimeSettings.overtoneLevel * exp(-t / (ring / 2)) * sin(2 * phase))
        }
    }
}
