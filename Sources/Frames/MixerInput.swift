import RealTime

/// One incoming stream's place in the mix.
public final class MixerInput: Sendable {
    public let source: any FrameSource
    /// Linear gain, changed at run time by control threads.
    public let gain: Gauge
    /// Frames this input had nothing for (silence was mixed instead).
    public let underruns = Counter()
    /// nil: always mixed (a fixed input). Otherwise the slot is mixed only while a control thread
    /// has activated it; streams come and go at run time without a lock (see `SlotHandOff`).
    public let handOff: SlotHandOff?

    public init(source: any FrameSource, gain: Double = 1, handOff: SlotHandOff? = nil) {
        self.source = source
        self.gain = Gauge(gain)
        self.handOff = handOff
    }
}
