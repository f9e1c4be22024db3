import AudioPipeline
import Codec
import EchoCancel
import Posix
import RTP
import Transport

/// Microphone → wire: the send direction assembled in one place, each element in the order a
/// captured frame passes it.
///
/// 1. `AudioEngine.processAvailableFrames` reads the frame from ALSA capture (`ALSAPCM`) on `intercom-audio`.
/// 2. `MicrophoneChain`: `EchoCanceller` (speexdsp, reference = what was played; `EchoGate`) →
///    `MicrophoneGain` (gain, mute) → `HowlGuard`.
/// 3. The engine's microphone ring; its `Doorbell` wakes `intercom-net` (`NetworkLoop`) at once.
/// 4. `MediaSender`: `OpusEncoder` → `RTPSender` (header) → `SRTPSession` (a call's media) →
///    `UDPSocket.send` to each peer of the current `MediaRoutes`.
public enum MicrophoneToWire {
    /// Step 2: what the audio thread does to each captured frame.
    public static func microphoneChain(_ config: DaemonConfig) throws -> MicrophoneChain {
        let a = config.audio, e = config.echo, frame = a.framesPerPeriod
        let canceller = try EchoCanceller(EchoCancelSettings(config))
        canceller.bypass.set(!e.enabled)
        let gain = MicrophoneGain(frameSize: frame)
        gain.muted.set(config.mixer.micMuted)
        gain.gain.store(decibelsToGain(config.mixer.micGainDb))
        let howlGuard = HowlGuard(frameSize: frame, sampleRate: a.sampleRate)
        howlGuard.enabled.set(e.enabled && e.howlGuard)
        return MicrophoneChain(canceller: canceller, gain: gain, howlGuard: howlGuard)
    }

    /// Step 4: the network thread's half, sending on the media socket.
    static func sender(_ config: DaemonConfig, socket: UDPSocket) throws -> MediaSender {
        let n = config.network, a = config.audio
        let encoder = try OpusEncoder(config)
        let rtp = try RTPSender(payloadType: UInt8(n.payloadType))
        return MediaSender(encoder: encoder, rtp: rtp, socket: socket, peers: n.peers.compactMap(IPv4Endpoint.init),
                           frameSize: a.framesPerPeriod)
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

extension OpusEncoder {
    /// `[opus]` at `audio.sample_rate`.
    public convenience init(_ config: DaemonConfig) throws {
        let o = config.opus
        try self.init(sampleRate: config.audio.sampleRate, application: o.application == "voip" ? .voip : .restrictedLowDelay,
                      bitrate: o.bitrate, complexity: o.complexity, fec: o.fec,
                      expectedLossPercent: o.expectedLossPercent, dtx: o.dtx)
    }
}
