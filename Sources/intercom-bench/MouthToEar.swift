import IntercomConfig
import Control
import Foundation
import Glibc
import IntercomDaemon
import Jitter
import Posix
import SignalTools

/// Mouth-to-ear delay between two intercomd daemons on the rig (room A → room B), part by part.
///
/// The probe plays a chirp into room A's air (`roomA_air`) and records room B's speaker (the
/// capture side of `roomB` hears B's sink). Between them: the rig (into A's microphone, out of B's
/// speaker), A's capture period, A's echo chain, the Opus look-ahead, the network (loopback), B's
/// jitter buffer and drift corrector, B's playback queue. The parts are the daemons' typed
/// statistics (`stats` on their control sockets), read while the stream runs.
struct MouthToEar {
    struct Setup {
        var name: String
        var periodMs: Double
        var bufferPeriods: Int
        var application: String
        /// `audio.playback_fill_periods` (0: the whole buffer).
        var fillPeriods = DaemonConfig().audio.playbackFillPeriods

        /// The daemon's defaults, as its configuration schema writes them.
        static var defaults: Setup {
            let c = DaemonConfig()
            return Setup(name: "defaults (\(formatNumber(c.audio.periodMs)) ms frames, \(c.opus.application), jitter ≥ \(formatNumber(c.jitter.minDelayMs)) ms, \(c.audio.playbackFillPeriods) of \(c.audio.bufferPeriods) periods queued)",
                         periodMs: c.audio.periodMs, bufferPeriods: c.audio.bufferPeriods, application: c.opus.application,
                         fillPeriods: c.audio.playbackFillPeriods)
        }
    }

    /// One pair of daemons' parts, ms.
    struct Parts {
        var echoChainMs = 0.0
        var lookaheadMs = 0.0
        /// B's playout delay: the jitter buffer and drift corrector together.
        var playoutMs = 0.0
        var targetMs = 0.0
        /// What B's playback device held after its last write.
        var playbackDelayMs = 0.0
    }

    let daemon: String
    let folder: String

    init() {
        daemon = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("intercomd").path
        folder = NSTemporaryDirectory() + "mouth-to-ear-\(getpid())"
        try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    }

    /// Where one room's files of one setup go (configuration, log, control socket), less the extension.
    private func stem(_ s: Setup, _ room: String) -> String { "\(folder)/\(s.periodMs)-\(s.application)-\(s.fillPeriods)-\(room)" }
    private func socketPath(_ s: Setup, _ room: String) -> String { stem(s, room) + ".sock" }

    private func config(_ s: Setup, room: String, listen: Int, peer: Int) -> String {
        """
        [audio]
        capture_device = "\(room)"
        playback_device = "\(room)"
        period_ms = \(s.periodMs)
        buffer_periods = \(s.bufferPeriods)
        playback_fill_periods = \(s.fillPeriods)
        [network]
        listen_port = \(listen)
        peers = ["127.0.0.1:\(peer)"]
        [opus]
        application = "\(s.application)"
        [control]
        socket = "\(socketPath(s, room))"
        [security]
        mode = "lab"
        """
    }

    private func start(_ s: Setup, room: String, listen: Int, peer: Int) throws -> Process {
        let path = stem(s, room) + ".toml", log = stem(s, room) + ".log"
        try config(s, room: room, listen: listen, peer: peer).write(toFile: path, atomically: true, encoding: .utf8)
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: daemon)
        p.arguments = ["--config", path]
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        p.standardOutput = handle
        p.standardError = handle
        try p.run()
        return p
    }

    private func statistics(_ socket: String) -> DaemonStatistics? {
        guard let client = try? ControlClient(path: socket, timeout: 2) else { return nil }
        defer { client.close() }
        if case .success(.statistics(let s))? = try? client.run(.statistics) { return s }
        return nil
    }

    /// Runs both daemons, probes `repeats` times, reads the parts and the xruns, stops them.
    func measure(_ s: Setup, repeats: Int) throws -> (samples: [LatencyProbe.Sample], parts: Parts?, xruns: Int) {
        let portA = try freeUDPPort(), portB = try freeUDPPort()
        let a = try start(s, room: "roomA", listen: portA, peer: portB)
        let b = try start(s, room: "roomB", listen: portB, peer: portA)
        defer {
            for p in [a, b] where p.isRunning { kill(p.processIdentifier, SIGTERM) }
            for p in [a, b] { p.waitUntilExit() }
        }
        Thread.sleep(forTimeInterval: 3)  // devices open, streams started, jitter buffers settled
        let probe = LatencyProbe(playback: "roomA_air", capture: "roomB")
        var samples: [LatencyProbe.Sample] = []
        for _ in 0..<repeats { if let m = try probe.measureOnce() { samples.append(m) } }
        // The parts, while the stream still runs.
        let sa = statistics(socketPath(s, "roomA")), sb = statistics(socketPath(s, "roomB"))
        let xruns = (sa?.audio.xruns ?? 1) + (sb?.audio.xruns ?? 1)  // unread: not shown clean
        guard let sa, let sb, let lookahead = sa.network?.opus?.lookaheadMs, let stream = sb.network?.streams.first else {
            return (samples, nil, xruns)
        }
        return (samples, Parts(echoChainMs: sa.audio.echoChainDelayMs, lookaheadMs: lookahead, playoutMs: stream.playoutDelayMs,
                               targetMs: stream.targetMs, playbackDelayMs: sb.audio.playbackDelayMs), xruns)
    }

    /// A port free now: bound on port 0 and released (the kernel does not hand it out again at once).
    private func freeUDPPort() throws -> Int {
        Int(try UDPSocket(bind: IPv4Endpoint(address: 0x7F00_0001, port: 0)).local.port)
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
        print("\n### Mouth-to-ear delay, room A → room B on the rig, part by part (two intercomd processes, measured \(ISO8601DateFormatter().string(from: Date())))\n")
        print("A chirp played into room A's air is found in room B's speaker by cross-correlation; wall-clock time minus the probe's own buffering. \(sessions) fresh pairs of daemons per setup, \(repeats) chirps each: the median, and the range over all chirps. Lower is better; the goals (issue 18) hold intercomd's share, the total without the rig's two passes: ≤ 40 ms at 10 ms frames, ≤ 15 ms in low-delay mode. Sessions whose daemons counted xruns (the machine starved them) are left out and counted. The parts are the daemons' typed statistics, medians over the sessions:\n")
        print("- *capture*: one period, the wait of a frame's first sample until the frame is read;")
        print("- *echo chain*: how long A's echo chain holds a frame (`echo_chain_delay_ms`);")
        print("- *Opus look-ahead*: as A's encoder reports it;")
        print("- *network*: loopback, about 0;")
        print("- *jitter buffer + drift corrector*: how old the newest sample B hands to its mixer is, beyond the fastest transit (`playout_delay_ms`);")
        print("- *playback queue*: what B's playback device held after its last write less the frame just written (`playback_delay_ms` − period; on the pulse plugin it includes the sound server's queue);")
        print("- *rest*: the share less these parts (scheduling, the rig's timing).\n")
        print("*A sound card at two periods* takes the same capture, echo chain and look-ahead; the jitter buffer and corrector as measured less the rig's jitter (B's target less the target of a path without jitter: `jitter.min_delay_ms`, or where that is less, half a frame plus the least margin, a quarter frame); and a playback queue of one period (two periods kept full, less the frame written). Estimated, not measured: there is no sound card here.\n")
        print("| setup | total (ms), median [range] | the rig (2 passes) | intercomd's share | goal | capture | echo chain | Opus look-ahead | network | jitter buffer + drift corrector | playback queue | rest | a sound card at two periods: share (estimated) |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for s in setups {
            var samples: [LatencyProbe.Sample] = [], partsSeen: [Parts] = [], spoiled = 0
            for _ in 0..<sessions {
                let (got, parts, xruns) = try measure(s, repeats: repeats)
                guard xruns == 0, !got.isEmpty, let parts else { spoiled += 1; continue }
                samples += got
                partsSeen.append(parts)
            }
            guard !samples.isEmpty else {
                print("| \(s.name) | no clean session (\(spoiled) of \(sessions) had xruns, no chirp or no statistics) |")
                continue
            }
            let echoChain = median(partsSeen.map(\.echoChainMs)), lookahead = median(partsSeen.map(\.lookaheadMs))
            let playout = median(partsSeen.map(\.playoutMs)), target = median(partsSeen.map(\.targetMs))
            let playbackQueue = median(partsSeen.map(\.playbackDelayMs)) - s.periodMs
            let total = median(samples.map(\.path))
            let range = String(format: " [%.0f-%.0f]%@", samples.map(\.path).min()!, samples.map(\.path).max()!,
                               spoiled > 0 ? " (\(spoiled) spoiled)" : "")
            let rig = 2 * rigPass
            let share = total - rig
            let capture = s.periodMs
            let rest = share - (capture + echoChain + lookahead + playout + playbackQueue)
            let goal = s.periodMs >= 10 ? 40.0 : 15.0
            let jitterFree = JitterSettings(DaemonConfig().with { $0.audio.periodMs = s.periodMs }).jitterFreeTargetMs
            let cardPlayout = playout - (target - jitterFree)
            let card = capture + echoChain + lookahead + cardPlayout + s.periodMs
            print(String(format: "| %@ | %.1f%@ | %.1f | **%.1f** | ≤ %.0f %@ | %.1f | %.1f | %.1f | ~0 | %.1f | %.1f | %.1f | %.1f (%.1f + %.1f + %.1f + %.1f + %.1f): ≤ %.0f %@ |",
                         s.name, total, range, rig, share, goal, share <= goal ? "met" : "not met", capture, echoChain, lookahead,
                         playout, playbackQueue, rest, card, capture, echoChain, lookahead, cardPlayout, s.periodMs,
                         goal, card <= goal ? "met" : "not met"))
        }
        print("\nIndividual chirps of the rig's own pass (ms): \(rigPasses.map { String(format: "%.1f", $0.path) }.joined(separator: ", ")).")
    }

    private func median(_ v: [Double]) -> Double {
        guard !v.isEmpty else { return .nan }
        let s = v.sorted()
        return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
    }
}

