import Foundation

/// `[selftest]`: the terminal's own periodic speaker-to-microphone check (docs/metrics.md).
public struct SelfTestSection: Sendable, Equatable {
    /// Time between checks; zero = off. The first runs one interval after the start.
    public var interval: Duration = .zero
    /// The test chirp's peak level, dBFS: quiet, so that someone in the room barely notices it.
    public var levelDbfs: Double = -30

    public init() {}

    public var isEnabled: Bool { interval > .zero }
    /// The chirp's linear gain against the technician's loopback test (-12 dBFS peak).
    public var gain: Double { min(1, pow(10, (levelDbfs + 12) / 20)) }

    public static let levelRange: ClosedRange<Double> = -60 ... -12
}

extension DaemonConfig {
    static let selfTestSection = SchemaSection(name: "selftest", comment: "The terminal checks its own speaker and microphone: a short quiet chirp, never during a call or a read-out; the result goes to the statistics, the metrics and the fault light (docs/metrics.md).", keys: [
        .duration("interval_s", \.selfTest.interval, .seconds,
                  "Seconds between checks, e.g. 86400 for once a day (the first one interval after the start); 0 = off", 0...604_800),
        .double("level_dbfs", \.selfTest.levelDbfs, "Peak level of the test chirp, dBFS (the technician's loopback test plays -12)",
                .range(SelfTestSection.levelRange)),
    ])
}
