import Foundation
import SignalTools

/// Speech clips for tests, spoken by espeak-ng and converted to 48 kHz mono by sox,
/// made once per test process in a temporary folder; the same every time (sox -R seeds its
/// dither), so that a codec or a score sees the same input in every run.
public enum Speech {
    public static let farEndText = "Good morning, this is the reception. Doctor Weber, your next patient is waiting in room three. Please come to the front desk when you are ready."
    public static let nearEndText = "Thank you, I will be there in two minutes. Please ask the patient to take a seat."

    private static let folder: String = {
        let dir = NSTemporaryDirectory() + "intercom-speech-\(getpid())"
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }()

    /// A WAV of `text` at 48 kHz mono, `gainDB` relative to espeak's level.
    public static func clip(_ name: String, text: String, voice: String = "en", speed: Int = 150, gainDB: Double = -3) throws -> String {
        let raw = "\(folder)/\(name)-raw.wav"
        let out = "\(folder)/\(name).wav"
        if FileManager.default.fileExists(atPath: out) { return out }
        try Command.run("/usr/bin/espeak-ng", ["-v", voice, "-s", "\(speed)", "-w", raw, text])
        try Command.run("/usr/bin/sox", ["-R", raw, "-r", "48000", "-c", "1", "-b", "16", out, "gain", "-n", "\(gainDB)"])
        return out
    }

    public static func farEnd() throws -> String { try clip("far-end", text: farEndText, voice: "en-us") }
    public static func nearEnd() throws -> String { try clip("near-end", text: nearEndText, voice: "en+f3", gainDB: -6) }

    /// About 5 s each: one talker per room for the network tests (different voices and words, so
    /// one can never be mistaken for the other).
    public static let roomAText = "Room one calling. The delivery for the pharmacy has arrived at the back entrance."
    public static func roomA() throws -> String { try clip("room-a", text: roomAText, voice: "en-us", gainDB: -3) }
    public static func roomB() throws -> String { try nearEnd() }

    /// The voice recordings alsa-utils ships (one speaker naming loudspeaker positions, 48 kHz
    /// mono, recorded, not synthesised: breath, pitch movement and a real voice's spectrum, which
    /// espeak's clips lack), in `order`, 0.3 s apart, scaled so the loudest sample peaks at `peakDBFS`.
    public static func natural(_ name: String, order: [String] = naturalPhrases, peakDBFS: Double = -6) throws -> String {
        let out = "\(folder)/\(name).wav"
        if FileManager.default.fileExists(atPath: out) { return out }
        let pause = [Int16](repeating: 0, count: 48_000 * 3 / 10)
        var samples = pause
        for phrase in order {
            let wav = try WAVAudio.read(path: "/usr/share/sounds/alsa/\(phrase).wav")
            guard wav.sampleRate == 48_000, wav.channels == 1 else {
                throw SpeechError(description: "/usr/share/sounds/alsa/\(phrase).wav is not 48 kHz mono")
            }
            samples += wav.samples + pause
        }
        let peak = Double(samples.map { abs(Int($0)) }.max() ?? 1)
        let scale = 32767 * pow(10, peakDBFS / 20) / peak
        try WAVAudio(sampleRate: 48_000, channels: 1, samples: samples.map { Int16((Double($0) * scale).rounded()) }).write(path: out)
        return out
    }

    /// The eight spoken recordings of alsa-utils (its ninth is noise).
    public static let naturalPhrases = ["Front_Center", "Front_Left", "Front_Right", "Rear_Center",
                                        "Rear_Left", "Rear_Right", "Side_Left", "Side_Right"]

    /// Each recorded phrase alone, peaks at `peakDBFS` across all eight (one scale for all).
    public static func naturalPhraseSamples(peakDBFS: Double = -6) throws -> [[Int16]] {
        let phrases = try naturalPhrases.map { try WAVAudio.read(path: "/usr/share/sounds/alsa/\($0).wav").samples }
        let peak = Double(phrases.joined().map { abs(Int($0)) }.max() ?? 1)
        let scale = 32767 * pow(10, peakDBFS / 20) / peak
        return phrases.map { $0.map { Int16((Double($0) * scale).rounded()) } }
    }

    /// Natural speech for the near end (about 14 s).
    public static func naturalNearEnd() throws -> String { try natural("natural-near") }
    /// Natural speech for the far end: the same voice saying the phrases in another order, so at
    /// any moment the two ends say different words.
    public static func naturalFarEnd() throws -> String {
        try natural("natural-far", order: [5, 2, 7, 0, 6, 3, 1, 4].map { naturalPhrases[$0] })
    }
}

public struct SpeechError: Error, CustomStringConvertible {
    public let description: String
}
