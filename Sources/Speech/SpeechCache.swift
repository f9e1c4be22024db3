import Glibc
import Posix
import SpeexDSP
import Synchronization

/// Spoken texts at the terminal's rate, kept per text: the configured notification texts are few
/// and fixed, so after the first time (or `prepare` at start) a text is read without waiting for
/// the synthesis. Bounded: beyond `capacity` texts the oldest is forgotten.
public final class SpeechCache: Sendable {
    public let synthesizer: SpeechSynthesizer
    public let sampleRate: Int
    /// Peak level of every clip, dBFS.
    public let peakDBFS: Double
    public let capacity: Int
    private let clips = Mutex<(byText: [String: [Int16]], order: [String])>(([:], []))

    public init(voice: SpeechVoice, sampleRate: Int, peakDBFS: Double, capacity: Int = 64) throws(SpeechError) {
        synthesizer = try SpeechSynthesizer(voice: voice)
        self.sampleRate = sampleRate
        self.peakDBFS = peakDBFS
        self.capacity = max(1, capacity)
    }

    /// One clip: from the cache, or synthesized now (and kept).
    public struct Clip: Sendable {
        public var samples: [Int16]
        public var cached: Bool
        /// Synthesis and resampling time when not cached, seconds.
        public var seconds: Double
    }

    public func clip(_ text: String) throws -> Clip {
        if let hit = clips.withLock({ $0.byText[text] }) { return Clip(samples: hit, cached: true, seconds: 0) }
        let start = MonotonicClock.seconds()
        let samples = try render(text)
        let seconds = MonotonicClock.seconds() - start
        clips.withLock { c in
            if c.byText[text] == nil { c.order.append(text) }
            c.byText[text] = samples
            while c.order.count > capacity { c.byText[c.order.removeFirst()] = nil }
        }
        return Clip(samples: samples, cached: false, seconds: seconds)
    }

    /// Whether `text` is in the cache.
    public func contains(_ text: String) -> Bool { clips.withLock { $0.byText[text] != nil } }

    /// The text at the terminal's rate and level, its leading and trailing silence cut (the
    /// first spoken sample follows the tone at once).
    public func render(_ text: String) throws -> [Int16] {
        let raw = try synthesizer.synthesize(text)
        var samples = try SpeexResampler.convert(raw, from: synthesizer.sampleRate, to: sampleRate)
        let threshold: Int16 = 64  // -54 dBFS: espeak-ng's silence is digital zero or close to it
        if let first = samples.firstIndex(where: { abs(Int32($0)) > Int32(threshold) }),
           let last = samples.lastIndex(where: { abs(Int32($0)) > Int32(threshold) }) {
            samples = Array(samples[first...last])
        } else {
            return []
        }
        let peak = samples.reduce(Int32(0)) { max($0, abs(Int32($1))) }
        guard peak > 0 else { return samples }
        let gain = 32767 * pow(10, peakDBFS / 20) / Double(peak)
        return samples.map { Int16(clamping: Int((Double($0) * gain).rounded())) }
    }
}
