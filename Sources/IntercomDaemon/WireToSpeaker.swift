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
    static func streamSlots(_ config: DaemonConfig) throws -> [RemoteStream] {
        let a = config.audio, j = config.jitter
        let settings = JitterSettings(frameSize: a.framesPerPeriod, sampleRate: a.sampleRate,
                                      minDelayMs: j.minDelayMs, maxDelayMs: j.maxDelayMs)
        return try (0..<config.network.maxStreams).map { _ in
            let decoder = try OpusDecoder(sampleRate: a.sampleRate)
            let jitter = JitterBuffer(settings: settings, decoder: decoder)
            let drift = try DriftCorrector(buffer: jitter, settings: DriftSettings(enabled: j.driftCorrection))
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
    static func mixer(_ config: DaemonConfig, inputs: [MixerInput]) -> Mixer {
        let mixer = Mixer(inputs: inputs, frameSize: config.audio.framesPerPeriod)
        mixer.speakerMuted.set(config.mixer.speakerMuted)
        mixer.speakerGain.store(decibelsToGain(config.mixer.speakerGainDb))
        return mixer
    }
}
