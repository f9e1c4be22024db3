/// `[testing]`: for test runs only; a practice leaves it out.
public struct TestingSection: Sendable, Equatable {
    /// Every timer of the daemon runs this many times faster: hellos, presence timeouts,
    /// retransmissions, ringing, answer timeouts, reminders, session key lifetimes, history age
    /// and its pruning, the self-test interval. The audio clock is not touched. The accelerated
    /// soak (`scripts/soak.sh --accelerate 10`) covers 12 hours of these events in 72 minutes.
    public var timeScale: Double = 1

    public init() {}

    public static let timeScaleRange: ClosedRange<Double> = 1...100

    /// `seconds` of the daemon's time, in seconds of the wall clock.
    public func scaled(_ seconds: Double) -> Double { seconds / timeScale }
}

extension DaemonConfig {
    static let testingSection = SchemaSection(name: "testing", comment: "For test runs only; a terminal in a practice leaves this section out.", keys: [
        .double("time_scale", \.testing.timeScale,
                "Every timer of the daemon (hellos, presence, retries, ringing, reminders, session keys, history age, self-test) runs this many times faster; the audio does not. 1 in a practice",
                .range(TestingSection.timeScaleRange)),
    ])
}
