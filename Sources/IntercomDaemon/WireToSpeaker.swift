import AudioPipeline
import Codec
import Frames
import Jitter
import Posix
import RealTime
import Transport

/// Wire → speaker: the receive direction assembled in one place, each element in the order a
/// datagram and then its frame pass it.
///
/// 1. `UDPSocket` → `NetworkLoop` (`intercom-net`) → `MediaReceiver`: SRTP check with the source's
///    `SRTPSession`, `RTPParser` (malformed: dropped and counted).
/// 2. `StreamTable`: which slot plays this SSRC and source (probation, idle eviction); the packet
///    goes into the slot's `PacketQueue`.
/// 3. On `intercom-audio`, per slot: `JitterBuffer` (reorder, `OpusDecoder`, FEC, concealment,
///    delay adaptation) → `DriftCorrector` (resampling by buffer level) → `MixerInput`.
/// 4. `Mixer` (every slot, the chime, local mode's far end) → `AudioEngine.fillPlayback` → ALSA
///    playback (`ALSAPCM`), and the same frame to `EchoCanceller.played` as the echo reference.
enum WireToSpeaker {
    /// Step 3: one slot per `network.max_streams`, made once (a new stream reuses a free slot).
    /// `playoutLead` is the mixer's: each slot reads its clock at the moment its frame will play.
    static func streamSlots(_ config: DaemonConfig, playoutLead: PlayoutLead) throws -> [RemoteStream] {
        let settings = JitterSettings(config)
        return try (0..<config.network.maxStreams).map { _ in
            let decoder = try OpusDecoder(sampleRate: config.audio.sampleRate)
            let jitter = JitterBuffer(settings: settings, decoder: decoder, playoutLead: playoutLead)
            let drift = try DriftCorrector(buffer: jitter, settings: DriftSettings(config))
            return RemoteStream(jitter: jitter, source: drift, reset: { drift.reset() })
        }
    }

    /// Steps 1 and 2: nil when the terminal does not listen (`network.listen_port = 0`).
    static func receiver(_ config: DaemonConfig, slots: [RemoteStream], ownSSRC: UInt32, audioRunning: Flag) -> MediaReceiver? {
        let n = config.network
        guard n.listenPort > 0 else { return nil }
        let table = StreamTable(streams: slots, idleTimeoutNanos: UInt64(n.streamTimeoutMs) * 1_000_000)
        return MediaReceiver(table: table, payloadType: UInt8(n.payloadType), ownSSRC: ownSSRC, audioRunning: audioRunning)
    }

    /// Step 4: `inputs` in mixing order.
    static func mixer(_ config: DaemonConfig, inputs: [MixerInput], playoutLead: PlayoutLead) -> Mixer {
        let mixer = Mixer(inputs: inputs, frameSize: config.audio.framesPerPeriod, playoutLead: playoutLead)
        mixer.speakerMuted.set(config.mixer.speakerMuted)
        mixer.speakerGain.store(decibelsToGain(config.mixer.speakerGainDb))
        return mixer
    }
}

// The library settings take every value the configuration decides; these are the only places
// they are filled in, so each default is written once: in the configuration schema.

extension JitterSettings {
    /// `[jitter]`'s delay bounds at `[audio]`'s rate and period; the rest is the library's tuning.
    public init(_ config: DaemonConfig) {
        self.init(frameSize: config.audio.framesPerPeriod, sampleRate: config.audio.sampleRate,
                  minDelayMs: config.jitter.minDelayMs, maxDelayMs: config.jitter.maxDelayMs)
    }
}

extension DriftSettings {
    /// `jitter.drift_correction`; the loop's tuning is the library's.
    public init(_ config: DaemonConfig) {
        self.init(enabled: config.jitter.driftCorrection)
    }
}
