/// What a link does to datagrams: delay, jitter, random and bursty loss, reordering, duplication.
///
/// Probabilities are percentages (0...100). Jitter is drawn **uniformly** in `0...jitterMs`, so every
/// delay of a packet that is not reordered lies in `baseDelayMs...baseDelayMs + jitterMs`.
public struct ImpairmentProfile: Sendable, Equatable, CustomStringConvertible {
    /// Fixed one-way delay added to every packet, in milliseconds.
    public var baseDelayMs: Double
    /// Upper bound of the uniform per-packet extra delay, in milliseconds.
    public var jitterMs: Double
    /// Independent random loss, percent of packets.
    public var lossPercent: Double
    /// Gilbert-Elliott: per-packet probability (percent) of going from the good to the bad state; 0 disables bursts.
    public var burstEnterPercent: Double
    /// Gilbert-Elliott: per-packet probability (percent) of leaving the bad state; mean burst length is 100 / this.
    public var burstExitPercent: Double
    /// Gilbert-Elliott: loss probability (percent) while in the bad state.
    public var burstLossPercent: Double
    /// Percent of packets held back by an extra `reorderDelayMs` so that later packets overtake them.
    public var reorderPercent: Double
    /// Extra hold-back of a reordered packet, in milliseconds.
    public var reorderDelayMs: Double
    /// Percent of packets sent twice; the copy gets its own base + jitter delay.
    public var duplicatePercent: Double
    /// Seed of the pseudo-random generator: same seed and same arrivals give the same decisions.
    public var seed: UInt64

    /// A profile; every impairment defaults to off.
    public init(
        baseDelayMs: Double = 0, jitterMs: Double = 0, lossPercent: Double = 0,
        burstEnterPercent: Double = 0, burstExitPercent: Double = 100, burstLossPercent: Double = 100,
        reorderPercent: Double = 0, reorderDelayMs: Double = 20, duplicatePercent: Double = 0, seed: UInt64 = 1
    ) {
        self.baseDelayMs = baseDelayMs
        self.jitterMs = jitterMs
        self.lossPercent = lossPercent
        self.burstEnterPercent = burstEnterPercent
        self.burstExitPercent = burstExitPercent
        self.burstLossPercent = burstLossPercent
        self.reorderPercent = reorderPercent
        self.reorderDelayMs = reorderDelayMs
        self.duplicatePercent = duplicatePercent
        self.seed = seed
    }

    /// A profile that forwards everything at once.
    public static let transparent = ImpairmentProfile()

    // Bounds a delay so that nanosecond arithmetic on UInt64 cannot overflow and a typo (e.g. 20000 for 20) is caught.
    static let maximumDelayMs = 60_000.0

    /// Throws `ImpairmentProfileError` naming the first invalid field.
    public func validate() throws(ImpairmentProfileError) {
        for (field, value) in [("baseDelayMs", baseDelayMs), ("jitterMs", jitterMs), ("reorderDelayMs", reorderDelayMs)] {
            guard value.isFinite, value >= 0, value <= Self.maximumDelayMs else {
                throw ImpairmentProfileError(field: field, value: value, reason: "must be a delay in 0...\(Int(Self.maximumDelayMs)) ms")
            }
        }
        for (field, value) in [
            ("lossPercent", lossPercent), ("burstEnterPercent", burstEnterPercent), ("burstExitPercent", burstExitPercent),
            ("burstLossPercent", burstLossPercent), ("reorderPercent", reorderPercent), ("duplicatePercent", duplicatePercent),
        ] {
            guard value.isFinite, value >= 0, value <= 100 else {
                throw ImpairmentProfileError(field: field, value: value, reason: "must be a percentage in 0...100")
            }
        }
        // With no way out of the bad state the link would go dead forever after the first burst.
        if burstEnterPercent > 0 && burstExitPercent == 0 {
            throw ImpairmentProfileError(field: "burstExitPercent", value: burstExitPercent,
                                         reason: "must be > 0 when burstEnterPercent > 0 (bursts would never end)")
        }
    }

    public var description: String {
        "delay \(baseDelayMs) ms + jitter 0...\(jitterMs) ms, loss \(lossPercent) %, "
            + "burst enter \(burstEnterPercent) % / exit \(burstExitPercent) % / loss \(burstLossPercent) %, "
            + "reorder \(reorderPercent) % by \(reorderDelayMs) ms, duplicate \(duplicatePercent) %, seed \(seed)"
    }
}

/// An invalid `ImpairmentProfile` field, its value and what is allowed.
public struct ImpairmentProfileError: Error, Equatable, CustomStringConvertible {
    /// Name of the offending property, e.g. "lossPercent".
    public let field: String
    /// The rejected value.
    public let value: Double
    /// What the field accepts.
    public let reason: String

    public var description: String { "invalid impairment profile: \(field) = \(value) \(reason)" }
}
