import Foundation
import Glibc
import SignalTools

/// Mouth-to-ear delay between two intercomd daemons on the rig (room A → room B), broken down.
///
/// The probe plays a chirp into room A's air (`roomA_air`) and records room B's speaker (the
/// capture side of `roomB` hears B's sink). Between them: the rig (into A's microphone, out of B's
/// speaker), A's capture period, echo canceller + preprocessor, Opus look-ahead, the network
/// (loopback), B's jitter buffer, B's playback buffer. The daemons' own logs give the parts.
struct MouthToEar {
    struct Setup {
        var name: String
        var periodMs: Double
        var bufferPeriods: Int
        var application: String
        var minJitterMs: Double
    }

    struct Parts {
        var lookaheadMs = 0.0
        var jitterDelayMs = 0.0
        var playbackDelayMs = 0.0
        var captureDelayMs = 0.0
    }

    let daemon: String
    let folder: String

    init() {
        daemon = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("intercomd").path
        folder = NSTemporaryDirectory() + "mouth-to-ear-\(getpid())"
        try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    }

    private func config(_ s: Setup, room: String, listen: Int, peer: Int) -> String {
        """
        [audio]
        capture_device = "\(room)"
        playback_device = "\(room)"
        period_ms = \(s.periodMs)
        buffer_periods = \(s.bufferPeriods)
        [network]
        listen_port = \(listen)
        peers = ["127.0.0.1:\(peer)"]
        [opus]
        application = "\(s.application)"
        [jitter]
        min_delay_ms = \(s.minJitterMs)
        [log]
        stats_interval_s = 1
        """
    }

    private func start(_ s: Setup, room: String, listen: Int, peer: Int) throws -> (Process, String) {
        let path = "\(folder)/\(s.name)-\(room).toml", log = "\(folder)/\(s.name)-\(room).log"
        try config(s, room: room, listen: listen, peer: peer).write(toFile: path, atomically: true, encoding: .utf8)
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: daemon)
        p.arguments = ["--config", path]
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        p.standardOutput = handle
        p.standardError = handle
        try p.run()
        return (p, log)
    }

    /// Runs both daemons, probes `repeats` times, stops them and reads their logs.
    func measure(_ s: Setup, repeats: Int) throws -> (samples: [LatencyProbe.Sample], parts: Parts, logs: [String]) {
        let (a, logA) = try start(s, room: "roomA", listen: 5104, peer: 5106)
        let (b, logB) = try start(s, room: "roomB", listen: 5106, peer: 5104)
        defer {
            for p in [a, b] where p.isRunning { kill(p.processIdentifier, SIGTERM) }
            for p in [a, b] { p.waitUntilExit() }
        }
        Thread.sleep(forTimeInterval: 3)  // devices open, streams started, jitter buffers settled
        let probe = LatencyProbe(playback: "roomA_air", capture: "roomB")
        var samples: [LatencyProbe.Sample] = []
        for _ in 0..<repeats { if let m = try probe.measureOnce() { samples.append(m) } }
        // The parts, while the stream still runs: the last statistics lines.
        var parts = Parts()
        let textA = (try? String(contentsOfFile: logA, encoding: .utf8)) ?? ""
        let textB = (try? String(contentsOfFile: logB, encoding: .utf8)) ?? ""
        parts.lookaheadMs = Self.lastNumber(in: textA, after: "encoder look-ahead ") ?? .nan
        parts.captureDelayMs = Self.lastNumber(in: textA, after: " delay=") ?? .nan
        parts.jitterDelayMs = Self.lastNumber(in: textB, after: ": delay=") ?? .nan
        if let line = textB.split(separator: "\n").last(where: { $0.contains("stats: frames=") }),
           let range = line.range(of: " delay=") {
            let rest = line[range.upperBound...]
            parts.playbackDelayMs = Double(rest.split(separator: "+")[1].prefix { $0 == "." || $0.isNumber }) ?? .nan
        }
        return (samples, parts, [logA, logB])
    }

    /// The xruns a daemon's log reports at its end (its `final stats:` line).
    static func finalXruns(_ logPath: String) -> Double {
        let text = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
        guard let line = text.split(separator: "\n").last(where: { $0.contains("final stats:") }) else { return 0 }
        return lastNumber(in: String(line), after: " xruns=") ?? 0
    }

    /// The number following the last occurrence of `marker`.
    static func lastNumber(in text: String, after marker: String) -> Double? {
        guard let r = text.range(of: marker, options: .backwards) else { return nil }
        return Double(text[r.upperBound...].prefix { $0 == "." || $0 == "-" || $0.isNumber })
    }
}

extension MouthToEar {
    /// Measures the setups and prints the Markdown section for BENCHMARKS.md. Each setup runs in
    /// `sessions` fresh pairs of daemons (where the jitter buffer settles differs between starts),
    /// `repeats` chirps each.
    func report(_ setups: [Setup], sessions: Int = 3, repeats: Int = 3) throws {
        // The rig's own share of one playback → capture pass, on a room no daemon uses.
        // Seven passes: single passes vary by up to 20 ms with the sound server's scheduling.
        let rigPasses = (0..<7).compactMap { _ in try? LatencyProbe(playback: "roomD", capture: "roomD").measureOnce() }
        let rigPass = median(rigPasses.map(\.path))
        print("\n### Mouth-to-ear delay, room A → room B on the rig (two intercomd processes, measured \(ISO8601DateFormatter().string(from: Date())))\n")
        print("A chirp played into room A's air is found in room B's speaker by cross-correlation; wall-clock time minus the probe's own buffering. \(sessions) fresh pairs of daemons per setup, \(repeats) chirps each: the median, and the range over all chirps. Lower is better; the goals hold intercomd's share, i.e. the total without the rig's sound server. Sessions whose daemons logged xruns (the machine starved them) are left out and counted.\n")
        print("| setup | total (ms), median [range] | the rig (2 passes) | intercomd's share | goal | A capture period (≤) | AEC + preprocess | Opus look-ahead | network | B jitter buffer | B playback buffer | rest |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for s in setups {
            var samples: [LatencyProbe.Sample] = [], partsSeen: [Parts] = [], spoiled = 0
            for _ in 0..<sessions {
                let (got, parts, logs) = try measure(s, repeats: repeats)
                let xruns = logs.map(Self.finalXruns).reduce(0, +)
                if xruns > 0 || got.isEmpty { spoiled += 1; continue }
                samples += got
                partsSeen.append(parts)
            }
            guard !samples.isEmpty else {
                print("| \(s.name) | no clean session (\(spoiled) of \(sessions) had xruns or no chirp) |")
                continue
            }
            var parts = Parts()
            parts.lookaheadMs = median(partsSeen.map(\.lookaheadMs))
            parts.jitterDelayMs = median(partsSeen.map(\.jitterDelayMs))
            parts.playbackDelayMs = median(partsSeen.map(\.playbackDelayMs))
            let total = median(samples.map(\.path))
            let range = String(format: " [%.0f-%.0f]%@", samples.map(\.path).min()!, samples.map(\.path).max()!,
                               spoiled > 0 ? " (\(spoiled) spoiled)" : "")
            let rig = 2 * rigPass
            let share = total - rig
            let known = s.periodMs + s.periodMs + parts.lookaheadMs + parts.jitterDelayMs + parts.playbackDelayMs
            let goal = s.periodMs >= 10 ? 40.0 : 15.0
            print(String(format: "| %@ | %.1f%@ | %.1f | **%.1f** | ≤ %.0f %@ | %.1f | %.1f | %.1f | ~0 (loopback) | %.1f | %.1f | %.1f |",
                         s.name, total, range, rig, share, goal, share <= goal ? "met" : "not met", s.periodMs, s.periodMs,
                         parts.lookaheadMs, parts.jitterDelayMs, parts.playbackDelayMs, share - known))
        }
        print("\nParts: the capture period is the longest a sample waits for its frame to fill (on average half); the echo canceller's preprocessor delays by one frame (measured, see the audio core section); look-ahead as the encoder reports it; jitter buffer = B's current delay beyond the fastest transit (its statistics); playback buffer = B's `snd_pcm_delay`. *rest* = total share minus these parts: scheduling, the average-vs-worst capture wait, the rig's start-up variability. Individual chirps (total ms): the rig pass \(rigPasses.map { String(format: "%.1f", $0.path) }.joined(separator: ", ")).")
    }

    private func median(_ v: [Double]) -> Double {
        guard !v.isEmpty else { return .nan }
        let s = v.sorted()
        return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
    }
}
