import Foundation

/// What a terminal's daemon knows of its own timing: its configuration and what its audio thread
/// has counted. The far terminal is assumed to be set up the same (one installation, one image).
public struct TerminalTiming: Sendable, Equatable {
    public var periodMs: Double
    public var bufferPeriods: Int
    /// Periods kept queued for playback (audio.playback_fill_periods).
    public var fillPeriods: Int
    /// The echo canceller's preprocessor holds one frame (0 when it is bypassed).
    public var processingDelayMs: Double
    public var codecLookaheadMs: Double
    public var jitterMinMs: Double
    public var jitterMaxMs: Double
    /// Capture and playback xruns since the daemon started.
    public var xruns: Int
    /// The longest one frame's processing has taken on the audio thread.
    public var processMaxMs: Double

    public init(periodMs: Double, bufferPeriods: Int, fillPeriods: Int? = nil, processingDelayMs: Double, codecLookaheadMs: Double,
                jitterMinMs: Double, jitterMaxMs: Double, xruns: Int, processMaxMs: Double) {
        self.periodMs = periodMs
        self.bufferPeriods = bufferPeriods
        self.fillPeriods = fillPeriods ?? bufferPeriods
        self.processingDelayMs = processingDelayMs
        self.codecLookaheadMs = codecLookaheadMs
        self.jitterMinMs = jitterMinMs
        self.jitterMaxMs = jitterMaxMs
        self.xruns = xruns
        self.processMaxMs = processMaxMs
    }
}

/// The whole path to another room, mouth to ear, estimated from the two loopback measurements and
/// the terminal's own timing, part by part; and what a technician could change. Pure, so it is
/// tested on crafted measurements.
public struct PathBudget: Sendable, Equatable {
    public struct Part: Sendable, Equatable {
        public var name: String
        public var ms: Double
        /// Where the figure comes from: "measured" or "configured".
        public var source: String
    }
    public var parts: [Part]
    public var totalMs: Double
    /// The goal the estimate is held to: 40 ms at 10 ms frames and above, 15 ms in low-delay mode.
    public var goalMs: Double
    /// Period size and playback buffer advice (the jitter-buffer advice is the network summary's).
    public var recommendations: [String]

    /// Opus frame sizes a period can have (ms): the encoder takes one period per packet.
    static let opusFrameMs: [Double] = [2.5, 5, 10, 20]

    public static func estimate(device: LoopbackAnalysis.Result, network: RoundTripSummary, terminal t: TerminalTiming) -> PathBudget? {
        guard let playback = device.playbackBufferMs, let path = device.pathMs, let rtt = network.medianMs,
              let p95 = network.p95Ms, let fastest = network.minMs else { return nil }
        // The far end's jitter buffer aims at the 95th percentile of one-way transit above the
        // fastest packet plus half a frame plus its tail's margin (the Jitter module's rule), within
        // its configured bounds. The probes give no tail: the least margin, a quarter frame
        // (`JitterSettings.tailMarginFrames`).
        let jitter = min(t.jitterMaxMs, max(t.jitterMinMs, (p95 - fastest) / 2 + 0.75 * t.periodMs))
        let parts = [
            Part(name: "capture period", ms: device.capturePeriodMs, source: "measured"),
            Part(name: "echo canceller and preprocessor", ms: t.processingDelayMs, source: "configured"),
            Part(name: "codec look-ahead", ms: t.codecLookaheadMs, source: "configured"),
            Part(name: "network (half the round trip)", ms: rtt / 2, source: "measured"),
            Part(name: "jitter buffer (far end)", ms: jitter, source: "measured path, configured bounds"),
            Part(name: "playback buffer (far end, as here)", ms: playback, source: "measured"),
            Part(name: "converters and air", ms: path, source: "measured"),
        ]
        let total = parts.map(\.ms).reduce(0, +)
        let goal = t.periodMs < 10 ? 15.0 : 40.0
        var advice: [String] = []
        if total > goal, let largest = parts.max(by: { $0.ms < $1.ms }) {
            advice.append(String(format: "the estimate (%.1f ms) is above the %.0f ms goal; the largest part is the %@ (%.1f ms)",
                                 total, goal, largest.name, largest.ms))
        }
        // The capture period, the preprocessor's frame and the playback buffer all scale with the period;
        // a smaller one is worth trying only on a machine that has kept up and has CPU to spare.
        let smaller = opusFrameMs.last { $0 < t.periodMs }
        if t.xruns > 0 {
            if t.fillPeriods < t.bufferPeriods {
                advice.append(String(format: "%d xruns since the daemon started: %g ms × %d periods queued is too little for this machine; raise audio.playback_fill_periods to %d",
                                     t.xruns, t.periodMs, t.fillPeriods, t.fillPeriods + 1))
            } else {
                advice.append(String(format: "%d xruns since the daemon started: %g ms × %d periods is too little for this machine; raise audio.buffer_periods to %d (or audio.period_ms)",
                                     t.xruns, t.periodMs, t.bufferPeriods, t.bufferPeriods + 1))
            }
        } else if let smaller, t.processMaxMs < smaller / 2 {
            let saved = (t.periodMs - smaller) * Double(2 + t.fillPeriods)
            let queue = t.fillPeriods < t.bufferPeriods ? "playback_fill_periods" : "buffer_periods"
            advice.append(String(format: "no xruns and one frame's processing at most %.2f ms: audio.period_ms = %g would save about %.0f ms (with %@ = %d; watch the xruns after the change)",
                                 t.processMaxMs, smaller, saved, queue, t.fillPeriods))
        } else if let smaller {
            advice.append(String(format: "one frame's processing took up to %.2f ms: a %g ms period would leave too little headroom; keep audio.period_ms = %g",
                                 t.processMaxMs, smaller, t.periodMs))
        }
        let configuredQueue = Double(t.fillPeriods) * t.periodMs
        if playback > configuredQueue + t.periodMs {
            advice.append(String(format: "the playback buffer measures %.1f ms against %.0f ms configured: the sound server or driver adds %.1f ms",
                                 playback, configuredQueue, playback - configuredQueue))
        }
        return PathBudget(parts: parts, totalMs: total, goalMs: goal, recommendations: advice)
    }
}
