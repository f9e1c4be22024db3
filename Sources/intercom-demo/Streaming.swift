import Control
import Foundation
import RigKit

/// `--streaming`: two terminals streaming their microphones at each other without calls (rig
/// rooms roomA and roomB, `[network] peers`), a talker in room A's air heard from room B's speaker.
struct Streaming {
    let folder: String
    let report: Report
    let short: Bool

    func run(started: inout [DaemonProcess]) throws {
        let ports = try (FreePort.udp(), FreePort.udp())
        func config(_ room: String, listen: Int, peer: Int) throws -> String {
            let path = "\(folder)/\(room).toml"
            try """
                [audio]
                capture_device = "\(room)"
                playback_device = "\(room)"
                [network]
                listen_port = \(listen)
                peers = ["127.0.0.1:\(peer)"]
                [log]
                stats_interval_s = 2
                [control]
                socket = "\(folder)/\(room).sock"
                [security]
                mode = "lab"

                """.write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }
        let a = try DaemonProcess(arguments: ["--config", config("roomA", listen: ports.0, peer: ports.1)], name: "roomA",
                                  logPath: "\(folder)/roomA.log")
        started.append(a)
        let b = try DaemonProcess(arguments: ["--config", config("roomB", listen: ports.1, peer: ports.0)], name: "roomB",
                                  logPath: "\(folder)/roomB.log")
        started.append(b)
        for (d, room) in [(a, "roomA"), (b, "roomB")] where !d.waitUntilRunning(timeout: 15) {
            throw StepFailed(description: "\(room) did not start; see \(folder)/\(room).log")
        }
        let streaming = b.waitForStatistics(timeout: 5) { ($0.network?.streams.first?.played ?? 0) > 100 } != nil
        report.step("Rooms A and B stream to each other", streaming,
                    "UDP \(ports.0) and \(ports.1) on loopback; B plays A's stream: \(streaming ? "yes" : "no")")
        guard streaming else { throw StepFailed(description: "B plays no stream from A") }

        let clip = try short ? Speech.roomA() : Speech.natural("natural")
        let said = "\(folder)/roomA-says.wav"
        try? FileManager.default.removeItem(atPath: said)
        try FileManager.default.copyItem(atPath: clip, toPath: said)
        let cpuBefore = (a.cpuSeconds ?? 0, b.cpuSeconds ?? 0), wallBefore = Date()
        let heard = try TalkerProbe(mouth: "roomA", ear: "roomB").run(clipPath: said, folder: folder, name: "roomB-hears-roomA")
        let wall = Date().timeIntervalSince(wallBefore)
        let daemonShares = ((a.cpuSeconds ?? 0) - cpuBefore.0, (b.cpuSeconds ?? 0) - cpuBefore.1)
        let q = try Quality.measure(reference: said, recording: heard.recordingPath)
        let passed = heard.mouthToEarMs != nil && q.stoi >= 0.80
        report.step("Speech room A → room B", passed, String(
            format: "mouth to ear %@ ms (air → A's microphone → echo canceller → Opus → UDP → B's jitter buffer → mix → B's speaker; the rig adds about 1 ms a pass), PESQ-WB %@, STOI %.2f, probe xruns %d; processor: the probe %.1f %% of a core, the daemons %.1f and %.1f %%",
            heard.mouthToEarMs.map { String(format: "%.1f", $0) } ?? "not found", q.pesqWb.map { String(format: "%.2f", $0) } ?? "-",
            q.stoi, heard.xruns, heard.cpuShare * 100, daemonShares.0 / wall * 100, daemonShares.1 / wall * 100))
        // B first, while A still sends: its last counters describe the stream as it ran.
        let bStopped = b.terminate(), aStopped = a.terminate()
        if let s = b.finalNetwork?.streams.first {
            report.say(String(format: "room B received %d packets from A, concealed %d, late %d, jitter buffer at %.1f ms (target %.1f), drift %.0f ppm",
                              s.received, s.concealed, s.late, s.delayMs, s.targetMs, s.driftPPM))
        }
        report.step("Both stop cleanly", bStopped == 0 && aStopped == 0,
                    "exit \(bStopped.map(String.init) ?? "killed") and \(aStopped.map(String.init) ?? "killed")")
    }
}
