import ArgumentParser
import Foundation
import IntercomDaemon
import Jitter

/// `intercom-bench jitter`: intercomd's jitter buffer against speexdsp's on the same packet traces.
/// Prints Markdown; every figure is measured in this run.
struct JitterBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "jitter", abstract: "Compare intercomd's jitter buffer with speexdsp's on seeded packet traces.")

    @Option(help: "Simulated minutes per trace.")
    var minutes = 10.0

    @Option(help: "Seed of the first trace.")
    var seed: UInt64 = 1

    @Option(help: "Runs per trace, each with the receiver's 10 ms ticks at another phase to the sender's (pooled).")
    var phases = 10

    func run() throws {
        print("## Jitter buffer: intercomd vs speexdsp (measured \(ISO8601DateFormatter().string(from: Date())), "
              + "\(ProcessInfo.processInfo.processorCount) cores, \(minutes) simulated minutes per trace, "
              + "\(phases) tick phases pooled)\n")
        print("| trace | buffer | playout delay median | 95th percentile | late loss | frames not from their packet | CPU per frame (decoding stubbed) |")
        print("|---|---|---|---|---|---|---|")
        var about: [String] = []
        let daemon = JitterSettings(DaemonConfig.default)
        func formatMs(_ v: Double) -> String { v == v.rounded() ? "\(Int(v)) ms" : "\(v) ms" }
        for (trace, text) in JitterTrace.standard(minutes: minutes, seed: seed) {
            about.append("- **\(trace.name)**: \(text); \(String(format: "%.2f", trace.networkLossPercent)) % lost in the network.")
            let buffers: [(String, () throws -> any TracePlayer)] = [
                ("intercomd (defaults: min delay \(formatMs(daemon.minDelayMs)))", { OurPlayer(settings: daemon) }),
                ("intercomd (the rule before 2026-11-28: a whole frame above the 95th percentile, min delay 10 ms)", {
                    var before = JitterSettings(DaemonConfig.default.with { $0.jitter.minDelayMs = 10 })
                    before.tailMarginFrames = 0.5  // the margin then: half a frame whatever the tail
                    return OurPlayer(settings: before)
                }),
                ("speexdsp (defaults: max late rate 4 %)", { try SpeexPlayer() }),
                ("speexdsp (max late rate 1 %)", { try SpeexPlayer(maxLateRatePercent: 1) }),
            ]
            for (name, make) in buffers {
                // Phases spread over the period, each run on a fresh buffer.
                let records = try (0..<phases).map { p in
                    try make().play(trace, phaseNs: UInt64((Double(p) + 0.5) / Double(phases) * 10e6))
                }
                let f = PlayoutFigures(trace: trace, records: records)
                print(String(format: "| %@ | %@ | %.1f ms | %.1f ms | %.2f %% | %.2f %% | %.2f µs |", trace.name, name,
                             f.medianMs, f.p95Ms, f.lateLossPercent, f.notOwnPercent, f.cpuMicroseconds))
            }
        }
        print("""

            - playout delay: for every frame played from its own packet, hand-out time − send time − the \
            trace's fastest transit (the delay beyond the fastest path, jitter wait included).
            - late loss: packets that arrived but were never played from their own payload (late, or \
            dropped by the buffer), over packets sent. Network loss is the same for every buffer.

            Traces (10 ms frames, seeded, identical for every buffer):
            """)
        about.forEach { print($0) }
    }
}

/// The figures of one buffer on one trace (see BENCHMARKS.md for the definitions).
struct PlayoutFigures {
    var medianMs: Double
    var p95Ms: Double
    var lateLossPercent: Double
    var notOwnPercent: Double
    var cpuMicroseconds: Double

    init(trace: JitterTrace, records: [PlayoutRecord]) {
        var arrived = [Bool](repeating: false, count: trace.frames)
        for p in trace.packets { arrived[p.index] = true }
        var delays: [Double] = []
        var late = 0
        for record in records {
            for k in 0..<trace.frames {
                let at = record.playedAt[k]
                if at > 0 {
                    delays.append(Double(at - JitterTrace.sentNs(k) - trace.minTransitNs) / 1e6)
                } else if arrived[k] {
                    late += 1
                }
            }
        }
        delays.sort()
        let sent = Double(trace.frames * records.count)
        medianMs = delays.isEmpty ? .nan : delays[delays.count / 2]
        p95Ms = delays.isEmpty ? .nan : delays[min(delays.count - 1, delays.count * 95 / 100)]
        lateLossPercent = Double(late) / sent * 100
        notOwnPercent = (sent - Double(delays.count)) / sent * 100
        cpuMicroseconds = Double(records.map(\.elapsedNs).reduce(0, +)) / Double(records.map(\.ticks).reduce(0, +)) / 1000
    }
}

extension JitterTrace {
    var networkLossPercent: Double {
        var arrived = Set<Int>()
        for p in packets { arrived.insert(p.index) }
        return Double(frames - arrived.count) / Double(frames) * 100
    }
}
