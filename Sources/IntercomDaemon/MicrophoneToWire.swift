import AudioPipeline
import Codec
import EchoCancel
import Posix
import RealTime
import RTP
import Transport

/// Microphone → wire: the send direction assembled in one place, each element in the order a
/// captured frame passes it.
///
/// 1. `AudioEngine.processAvailableFrames` reads the frame from ALSA capture (`ALSAPCM`) on `intercom-audio`.
/// 2. `MicrophoneChain`: `EchoCanceller` (speexdsp, reference = what was played; then
///    `LoopCanceller`, reference = what was sent, decoded again: step 4 hands it back; then the
///    residual suppressor and `EchoGate`) → `MicrophoneGain` (gain, mute) → `HowlGuard`.
/// 3. The engine's microphone ring; its `Doorbell` wakes `intercom-net` (`NetworkLoop`) at once.
/// 4. `MediaSender`: `OpusEncoder` → `RTPSender` (header) → `SRTPSession` (a call's media) →
///    `UDPSocket.send` to each peer of the current `MediaRoutes`; `SentDecoder` decodes each
///    packet again into the chain's `sentBack` ring.
public enum MicrophoneToWire {
    /// Step 2: what the audio thread does to each captured frame.
    public static func microphoneChain(_ config: DaemonConfig) throws -> MicrophoneChain {
        let a = config.audio, e = config.echo, frame = a.framesPerPeriod
        // The loop runs through the network: without one there is none to cancel.
        let loop = config.networkMediaEnabled ? LoopCanceller(LoopCanceller.Settings(config)) : nil
        loop?.enabled.set(e.enabled && e.loopCanceller)
        let canceller = try EchoCanceller(EchoCancelSettings(config))
        canceller.bypass.set(!e.enabled)
        let gain = MicrophoneGain(frameSize: frame)
        gain.muted.set(config.mixer.micMuted)
        gain.gain.store(decibelsToGain(config.mixer.micGainDb))
        let howlGuard = HowlGuard(frameSize: frame, sampleRate: a.sampleRate)
        howlGuard.enabled.set(e.enabled && e.howlGuard)
        return MicrophoneChain(canceller: canceller, gain: gain, howlGuard: howlGuard, loopCanceller: loop)
    }

    /// Step 4: the network thread's half, sending on the media socket.
    static func sender(_ config: DaemonConfig, socket: UDPSocket, chain: MicrophoneChain) throws -> MediaSender {
        let n = config.network, a = config.audio
        let encoder = try OpusEncoder(config)
        let rtp = try RTPSender(payloadType: UInt8(n.payloadType))
        var decoder: SentDecoder?
        if let ring = chain.sentBack, let loop = chain.loopCanceller {
            decoder = try SentDecoder(sampleRate: a.sampleRate, frameSize: a.framesPerPeriod, ring: ring, active: loop.enabled)
        }
        return MediaSender(encoder: encoder, rtp: rtp, socket: socket, peers: n.peers.compactMap(IPv4Endpoint.init),
                           frameSize: a.framesPerPeriod, sentDecoder: decoder)
    }
}

// The library settings take every value the configuration decides; these are the only places
// they are filled in, so each default is written once: in the configuration schema.

extension EchoCancelSettings {
    /// `[echo]` at `[audio]`'s rate and period.
    public init(_ config: DaemonConfig) {
        let a = config.audio, e = config.echo
        self.init(sampleRate: a.sampleRate, frameSize: a.framesPerPeriod, tailMilliseconds: e.tailMs,
                  noiseSuppressDB: e.noiseSuppressDb, echoSuppressDB: e.echoSuppressDb,
                  echoSuppressActiveDB: e.echoSuppressActiveDb, agc: e.agc, residualGate: e.residualGate)
    }
}

extension LoopCanceller.Settings {
    /// `[echo]`'s loop tail at `[audio]`'s rate and period. The shortest loop is two periods: the
    /// sent frame, decoded again, comes back from the network thread within one (a real loop also
    /// passes the far jitter buffer and both devices' buffers, which is longer).
    public init(_ config: DaemonConfig) {
        let a = config.audio
        self.init(sampleRate: a.sampleRate, frameSize: a.framesPerPeriod, minimumDelayMilliseconds: Int(2 * a.periodMs),
                  spanMilliseconds: config.echo.loopTailMs)
    }
}

extension OpusEncoder {
    /// `[opus]` at `audio.sample_rate`.
    public convenience init(_ config: DaemonConfig) throws {
        let o = config.opus
        try self.init(sampleRate: config.audio.sampleRate, application: o.application == "voip" ? .voip : .restrictedLowDelay,
                      bitrate: o.bitrate, complexity: o.complexity, fec: o.fec,
                      expectedLossPercent: o.expectedLossPercent, dtx: o.dtx)
    }
}
