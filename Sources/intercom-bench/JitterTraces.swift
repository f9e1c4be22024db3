import Foundation
import SignalTools

/// One packet of a benchmark trace: frame `index` (10 ms of audio), when it was sent and arrived.
struct BenchPacket {
    var index: Int
    var sentNs: UInt64
    var arrivalNs: UInt64
}

/// A seeded packet trace: what a network did to `frames` packets sent every 10 ms.
struct JitterTrace {
    var name: String
    var frames: Int
    /// Sorted by arrival; lost packets are absent, duplicated ones appear twice.
    var packets: [BenchPacket]
    /// The fastest transit of the trace: the network's fixed part.
    var minTransitNs: UInt64

    static let startNs: UInt64 = 1_000_000_000
    /// When frame k was sent (every 10 ms from `startNs`).
    static func sentNs(_ k: Int) -> UInt64 { startNs + UInt64(k) * 10_000_000 }

    /// How the network treats packets (all random draws from one seeded generator).
    struct Network {
        var baseMs = 20.0
        /// Uniform jitter in 0...jitterMs, or (if > 0) exponential with this mean, capped at 300 ms.
        var jitterMs = 0.0
        var exponentialMeanMs = 0.0
        var lossPercent = 0.0
        /// Gilbert-Elliott bursts: per packet, enter / leave the bad state (every packet lost in it).
        var burstEnterPercent = 0.0
        var burstExitPercent = 100.0
        /// Packets held back so that later ones overtake them.
        var reorderPercent = 0.0
        var reorderMs = 0.0
        var duplicatePercent = 0.0
        /// Stalls: on average every `stallEverySeconds` the link stops for `stallMs`, then delivers the backlog at once.
        var stallEverySeconds = 0.0
        var stallMs = 0.0
    }

    init(name: String, minutes: Double, seed: UInt64, network n: Network) {
        self.name = name
        frames = Int(minutes * 6_000)
        var rng = SplitMix64(seed: seed)
        let start = Self.startNs
        var stalls: [(from: UInt64, to: UInt64)] = []
        if n.stallEverySeconds > 0 {
            var t = Double(start)
            while t < Double(start) + Double(frames) * 1e7 {
                t += -log(max(rng.nextUnit(), 1e-12)) * n.stallEverySeconds * 1e9
                stalls.append((UInt64(t), UInt64(t + n.stallMs * 1e6)))
            }
        }
        var inBurst = false
        var out: [BenchPacket] = []
        for k in 0..<frames {
            let sent = Self.sentNs(k)
            if inBurst { if rng.nextUnit() * 100 < n.burstExitPercent { inBurst = false } }
            else if rng.nextUnit() * 100 < n.burstEnterPercent { inBurst = true }
            let lost = inBurst || rng.nextUnit() * 100 < n.lossPercent
            let copies = rng.nextUnit() * 100 < n.duplicatePercent ? 2 : 1
            for _ in 0..<copies {
                var delay = n.baseMs
                if n.exponentialMeanMs > 0 {
                    delay += min(300, -n.exponentialMeanMs * log(max(rng.nextUnit(), 1e-12)))
                } else {
                    delay += rng.nextUnit() * n.jitterMs
                }
                if rng.nextUnit() * 100 < n.reorderPercent { delay += n.reorderMs }
                var arrival = sent + UInt64(delay * 1e6)
                // A stall holds everything that would arrive during it until its end.
                if let s = stalls.first(where: { $0.from <= arrival && arrival < $0.to }) { arrival = s.to }
                if !lost { out.append(BenchPacket(index: k, sentNs: sent, arrivalNs: arrival)) }
            }
        }
        packets = out.enumerated().sorted { ($0.element.arrivalNs, $0.offset) < ($1.element.arrivalNs, $1.offset) }.map(\.element)
        minTransitNs = packets.map { $0.arrivalNs - $0.sentNs }.min() ?? 0
    }

    /// The traces of the comparison.
    static func standard(minutes: Double, seed: UInt64) -> [(trace: JitterTrace, about: String)] {
        [
            (JitterTrace(name: "low jitter", minutes: minutes, seed: seed, network: Network(jitterMs: 5)),
             "uniform 0-5 ms, no loss"),
            (JitterTrace(name: "30 ms jitter, 5 % loss", minutes: minutes, seed: seed + 1, network: Network(jitterMs: 30, lossPercent: 5)),
             "uniform 0-30 ms, 5 % random loss"),
            (JitterTrace(name: "heavy tail", minutes: minutes, seed: seed + 2, network: Network(exponentialMeanMs: 10, lossPercent: 1)),
             "exponential, mean 10 ms (95th percentile 30 ms), 1 % loss"),
            (JitterTrace(name: "bursty", minutes: minutes, seed: seed + 3,
                         network: Network(jitterMs: 10, burstEnterPercent: 1, burstExitPercent: 30, stallEverySeconds: 20, stallMs: 150)),
             "uniform 0-10 ms; loss bursts (mean 3.3 packets, 3 % of packets); a 150 ms stall every 20 s on average, backlog delivered at once"),
            (JitterTrace(name: "reordering", minutes: minutes, seed: seed + 4,
                         network: Network(jitterMs: 10, reorderPercent: 10, reorderMs: 15, duplicatePercent: 1)),
             "uniform 0-10 ms; 10 % held back 15 ms (overtaken); 1 % duplicated"),
        ]
    }
}
