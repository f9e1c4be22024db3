/// What a run of round-trip probes to another room shows: loss, the spread of the round trip, a
/// histogram, and what it means for the jitter buffer. A pure function of the replies, so it is
/// tested on crafted ones.
public struct RoundTripSummary: Sendable, Equatable {
    public struct Bin: Sendable, Equatable {
        public var fromMs: Double
        public var count: Int
        public init(fromMs: Double, count: Int) {
            self.fromMs = fromMs
            self.count = count
        }
    }

    public var sent: Int
    public var received: Int
    public var duplicates: Int
    public var lossPercent: Double
    public var minMs: Double?
    public var medianMs: Double?
    public var p95Ms: Double?
    public var maxMs: Double?
    /// Mean difference between consecutive round trips (the variation a jitter buffer absorbs).
    public var jitterMs: Double?
    public var binWidthMs: Double
    public var histogram: [Bin]
    /// Why the path is not fit for live audio, in words for a technician; empty when it is.
    public var problems: [String]
    /// What the measured path supports (jitter buffer bounds).
    public var recommendations: [String]

    public init(sent: Int, received: Int, duplicates: Int, lossPercent: Double, minMs: Double?, medianMs: Double?,
                p95Ms: Double?, maxMs: Double?, jitterMs: Double?, binWidthMs: Double, histogram: [Bin],
                problems: [String], recommendations: [String]) {
        self.sent = sent
        self.received = received
        self.duplicates = duplicates
        self.lossPercent = lossPercent
        self.minMs = minMs
        self.medianMs = medianMs
        self.p95Ms = p95Ms
        self.maxMs = maxMs
        self.jitterMs = jitterMs
        self.binWidthMs = binWidthMs
        self.histogram = histogram
        self.problems = problems
        self.recommendations = recommendations
    }

    /// Loss above this (percent) is a problem for speech even with FEC.
    public static let maxLossPercent = 1.0

    /// - Parameters:
    ///   - rttMs: the round trip of each probe that came back, by sequence number (0..<sent).
    ///   - jitterBounds: the configured jitter buffer's (min, max) delay, ms, to compare with.
    public static func summarise(sent: Int, rttMs: [Int: Double], duplicates: Int, jitterBounds: (min: Double, max: Double)) -> RoundTripSummary {
        let ordered = rttMs.keys.sorted().map { rttMs[$0]! }
        let sorted = ordered.sorted()
        let received = sorted.count
        let loss = sent > 0 ? Double(sent - received) / Double(sent) * 100 : 0
        func quantile(_ q: Double) -> Double? {
            sorted.isEmpty ? nil : sorted[min(sorted.count - 1, Int((Double(sorted.count - 1) * q).rounded()))]
        }
        var jitter: Double?
        if ordered.count > 1 {
            jitter = zip(ordered, ordered.dropFirst()).map { abs($1 - $0) }.reduce(0, +) / Double(ordered.count - 1)
        }
        let lo = sorted.first ?? 0, hi = sorted.last ?? 0
        // About 20 bins over the range, on a 0.1/0.2/0.5/1/2/5... ms grid.
        let width = [0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100].first { (hi - lo) / $0 <= 20 } ?? 200
        var bins: [Bin] = []
        if !sorted.isEmpty {
            let first = (lo / width).rounded(.down) * width
            let count = Int(((hi - first) / width).rounded(.down)) + 1
            // Edges rounded to the microsecond: 17 × 0.1 is not 1.7 in binary.
            bins = (0..<count).map { Bin(fromMs: ((first + Double($0) * width) * 1000).rounded() / 1000, count: 0) }
            for v in sorted { bins[min(count - 1, Int((v - first) / width))].count += 1 }
        }
        var r = RoundTripSummary(sent: sent, received: received, duplicates: duplicates, lossPercent: loss, minMs: sorted.first,
                                 medianMs: quantile(0.5), p95Ms: quantile(0.95), maxMs: sorted.last, jitterMs: jitter,
                                 binWidthMs: width, histogram: bins, problems: [], recommendations: [])
        guard received > 0 else {
            r.problems.append("no probe came back: the room is offline or unreachable (address, port, firewall)")
            return r
        }
        if loss > maxLossPercent {
            r.problems.append(String(format: "%.1f %% of the probes were lost: speech will break up; check the cabling, the switch or the Wi-Fi", loss))
        }
        // One way is about half the round trip; its variation is what the jitter buffer must hold.
        // The 95th percentile keeps the late-loss rate near 5 % before the buffer adapts upwards.
        let spread = (quantile(0.95)! - lo) / 2
        let needed = max(1, spread.rounded(.up))
        r.recommendations.append(String(format: "jitter.min_delay_ms = %.0f covers 95 %% of this path's variation (%.1f ms one way)", needed, spread))
        // 0 leaves the delay to the buffer's measurement: no floor to judge.
        if jitterBounds.min > 0 && jitterBounds.min < needed / 2 {
            r.recommendations.append(String(format: "the configured jitter.min_delay_ms (%.0f) is below what this path needs: expect late packets until the buffer adapts", jitterBounds.min))
        } else if jitterBounds.min > 3 * needed + 10 {
            r.recommendations.append(String(format: "the configured jitter.min_delay_ms (%.0f) adds delay this path does not need", jitterBounds.min))
        }
        let worst = (hi - lo) / 2
        if jitterBounds.max < worst {
            r.recommendations.append(String(format: "the configured jitter.max_delay_ms (%.0f) is below this path's worst variation (%.0f ms): those packets will be lost", jitterBounds.max, worst))
        }
        return r
    }
}
