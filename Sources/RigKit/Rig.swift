import Foundation
import Glibc

public struct RigError: Error, CustomStringConvertible {
    public let description: String
    public init(description: String) { self.description = description }
}

/// The virtual audio rig started by scripts/rig.sh (private PulseAudio, one ALSA PCM per room).
/// Tests that need it run under `scripts/rig.sh run -- ...`, which exports INTERCOM_RIG_DIR.
public enum Rig {
    public static var directory: String? { ProcessInfo.processInfo.environment["INTERCOM_RIG_DIR"] }

    /// The rig's sound server (to freeze it: every stream on it stalls).
    public static var soundServerPID: Int32? {
        guard let dir = directory, let text = try? String(contentsOfFile: dir + "/pulseaudio.pid", encoding: .utf8) else { return nil }
        return Int32(text.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    public static func require() throws {
        guard directory != nil else {
            throw RigError(description: "the virtual audio rig is not running: run the tests with scripts/test.sh (or scripts/rig.sh run -- swift test)")
        }
    }

    /// Stops and starts the rig again (same folder, same rooms): a fresh sound server.
    public static func restart() throws {
        // The rooms the rig was started with (rig.sh exports them); without them, rig.sh's default.
        let rooms = ProcessInfo.processInfo.environment["INTERCOM_RIG_ROOMS"].map { "--rooms '\($0)'" } ?? ""
        try script("down", "")
        try script("up", rooms)
    }

    /// Neighbouring rooms: `a`'s air leaks into `b`'s and (unless `oneWay`) `b`'s into `a`'s,
    /// `attenuationDB` quieter and `delayMs` later (`scripts/rig.sh couple`). Replaces an earlier
    /// coupling of the two.
    public static func couple(_ a: String, _ b: String, attenuationDB: Double, delayMs: Int, oneWay: Bool = false) throws {
        try script("couple", "'\(a)' '\(b)' --attenuation-db \(attenuationDB) --delay-ms \(delayMs)" + (oneWay ? " --one-way" : ""))
    }

    /// How often the client leaking `from`'s air into `to`'s (a wall coupled both ways) broke
    /// the waveform since it started: trims of its capture backlog, playback underruns, capture
    /// overruns (scripts/rig-leak.c); nil without such a client. A leak the machine held up.
    public static func leakBreaks(_ from: String, _ to: String) -> Int? {
        guard let dir = directory, let text = try? String(contentsOfFile: "\(dir)/leak.\(from).\(to).count", encoding: .utf8) else { return nil }
        let counts = text.split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
        return counts.count == 3 ? counts.reduce(0, +) : nil
    }

    /// Removes the coupling of two rooms (idempotent).
    public static func decouple(_ a: String, _ b: String) throws {
        try script("decouple", "'\(a)' '\(b)'")
    }

    /// Runs `scripts/rig.sh COMMAND --dir <the rig> ARGUMENTS`, its output appended to DIR/rig-commands.log.
    private static func script(_ command: String, _ arguments: String) throws {
        guard let dir = directory else { throw RigError(description: "the virtual audio rig is not running") }
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../scripts/rig.sh").standardizedFileURL.path
        let log = dir + "/rig-commands.log"
        // system(), output to a file: the rig leaves background processes behind, which would hold
        // a pipe open, and Foundation's Process did not notice this script's exit.
        let before = ((try? FileManager.default.attributesOfItem(atPath: log))?[.size] as? Int) ?? 0
        let status = system("/bin/bash '\(script)' \(command) --dir '\(dir)' \(arguments) >>'\(log)' 2>&1 </dev/null")
        guard status == 0 else {
            // This command's output only: the log holds every earlier one too.
            let output = (FileManager.default.contents(atPath: log) ?? Data()).dropFirst(before)
            throw RigError(description: "rig.sh \(command) \(arguments) failed (\(status)): \(String(decoding: output, as: UTF8.self))")
        }
    }

    /// Plays a WAV into a room's air (its sink), as a talker standing in the room; returns the player.
    public static func startTalker(room: String, wav: String) throws -> Process {
        try Command.start("/usr/bin/paplay", ["--device=\(room)", wav])
    }
}

/// Runs external tools for the tests.
public enum Command {
    public static func start(_ path: String, _ args: [String], stdout: FileHandle? = nil, stderr: FileHandle? = nil) throws -> Process {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path)
        p.arguments = args
        if let stdout { p.standardOutput = stdout }
        if let stderr { p.standardError = stderr }
        try p.run()
        return p
    }

    /// Runs to completion; throws with the tool's output when it fails.
    @discardableResult
    public static func run(_ path: String, _ args: [String]) throws -> String {
        let out = Pipe()
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path)
        p.arguments = args
        p.standardOutput = out
        p.standardError = out
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self)
        guard p.terminationStatus == 0 else {
            throw RigError(description: "\(path) \(args.joined(separator: " ")) failed (\(p.terminationStatus)): \(text)")
        }
        return text
    }
}

/// Polls `condition` every `every` seconds until it holds; false when `timeout` seconds pass first.
public func waitUntil(_ timeout: Double, every: Double = 0.05, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if condition() { return true }
        usleep(UInt32(every * 1e6))
    }
    return condition()
}
