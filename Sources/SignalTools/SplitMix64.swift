/// SplitMix64 pseudo-random generator (Steele, Lea & Flood, 2014).
///
/// Test signals must be reproducible across runs and platforms, which the system
/// generator does not promise; SplitMix64 is tiny, fast and statistically adequate
/// for noise. A value type, so each user owns its own stream (trivially Sendable).
public struct SplitMix64: RandomNumberGenerator, Sendable {
    public private(set) var state: UInt64

    public init(seed: UInt64) {
        state = seed
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Uniform in [0, 1) with 53 random bits.
    public mutating func nextUnit() -> Double {
        Double(next() >> 11) * 0x1.0p-53
    }
}
