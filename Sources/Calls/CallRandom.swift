// A tiny seeded generator: the engine draws call ids and its first message id from it, so that
// a run is reproducible from its seed (the integrator seeds it from the system's randomness).
// The same algorithm as SignalTools.SplitMix64, kept here on purpose: the engine depends on
// nothing but the system layer, and ten lines are cheaper than a dependency on the DSP library.

struct CallRandom: RandomNumberGenerator, Sendable {  // SplitMix64
    private var state: UInt64
    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
