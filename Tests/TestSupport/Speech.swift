import Foundation

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
}
