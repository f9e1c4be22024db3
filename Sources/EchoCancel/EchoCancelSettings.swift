/// Parameters of the echo canceller and its preprocessor. Defaults live in the daemon's config.
public struct EchoCancelSettings: Sendable, Equatable {
    public var sampleRate: Int
    /// Samples per processing frame (= one ALSA period).
    public var frameSize: Int
    /// Echo path length the adaptive filter models; must cover the device round trip.
    public var tailMilliseconds: Int
    /// Noise suppression, negative dB (0 turns the denoiser off).
    public var noiseSuppressDB: Int
    /// Residual echo suppression when only the far end talks / during double talk, negative dB.
    public var echoSuppressDB: Int
    public var echoSuppressActiveDB: Int
    public var agc: Bool
    /// Attenuate what the canceller leaves while the far end talks (`EchoGate`).
    public var residualGate: Bool

    /// Every value is the configuration's (`[echo]`, `[audio]`); their defaults live in its schema.
    public init(sampleRate: Int, frameSize: Int, tailMilliseconds: Int,
                noiseSuppressDB: Int, echoSuppressDB: Int, echoSuppressActiveDB: Int,
                agc: Bool, residualGate: Bool) {
        self.sampleRate = sampleRate
        self.frameSize = frameSize
        self.tailMilliseconds = tailMilliseconds
        self.noiseSuppressDB = noiseSuppressDB
        self.echoSuppressDB = echoSuppressDB
        self.echoSuppressActiveDB = echoSuppressActiveDB
        self.agc = agc
        self.residualGate = residualGate
    }

    public var tailSamples: Int { sampleRate * tailMilliseconds / 1000 }
}

public struct EchoCancelError: Error, CustomStringConvertible {
    public let description: String
}
