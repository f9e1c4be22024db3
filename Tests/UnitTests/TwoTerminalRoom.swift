import AudioPipeline
import Codec
import EchoCancel
import Foundation
import IntercomDaemon

/// Two terminals in a call that hear each other's speakers, simulated frame by frame with the real
/// parts: each terminal's microphone chain as the daemon builds it (`MicrophoneToWire`: its
/// `LoopCanceller` gets its reference through the chain's `sentBack` ring, a frame after it was
/// handed on, as from the network thread), Opus at the default settings between them,
/// whole frames of network and far jitter buffer, playback and capture latencies, and air in which
/// each microphone hears its own speaker and the other one (a direct path and one reflection each).
struct TwoTerminalRoom {
    enum LoopReference {
        /// No loop canceller.
        case none
        /// The frames as sent, before the encoder.
        case beforeCodec
        /// The sent packets decoded again, as the far end hears them.
        case decoded
    }

    struct Options {
        var loopReference = LoopReference.decoded
        var howlGuard = false
        var micGainDB = 6.0
        var speakerGainDB = 6.0
        /// Frames from a sent frame to the far speaker's write: network and jitter buffer, per receiver.
        var jitterFrames = [3, 4]
        var playbackFrames = 4
        var captureFrames = 1
        /// The other terminal's speaker in each terminal's microphone (nil: not heard).
        var crossGainDB: [Double?] = [0, 0]
        var crossDelaySamples = 48
        /// Terminals whose microphones hear nothing (a loop through one terminal only).
        var deaf: Set<Int> = []
    }

    let frame = 480
    let options: Options
    let chains: [MicrophoneChain]
    private let encoders: [OpusEncoder]
    private let decoders: [OpusDecoder]

    init(_ options: Options) throws {
        self.options = options
        var config = DaemonConfig()
        config.room.id = "a"  // terminals in a call: the media they send is keyed by it
        config.echo.howlGuard = options.howlGuard
        config.echo.loopCanceller = options.loopReference != .none
        precondition(config.networkMediaEnabled, "a loop canceller only with media on the wire")
        var chains: [MicrophoneChain] = []
        var encoders: [OpusEncoder] = [], decoders: [OpusDecoder] = []
        for _ in 0..<2 {
            let chain = try MicrophoneToWire.microphoneChain(config)
            chain.gain.gain.store(pow(10, options.micGainDB / 20))
            // The own speaker's echo comes playback + capture frames after it was written.
            chain.canceller.requestEchoDelay(samples: (options.playbackFrames + options.captureFrames) * frame)
            chains.append(chain)
            encoders.append(try OpusEncoder(config))
            decoders.append(try OpusDecoder(sampleRate: 48_000))
        }
        self.chains = chains
        self.encoders = encoders
        self.decoders = decoders
    }

    /// Runs `talkers[t]` (samples in terminal t's air) for `seconds`; returns what each terminal
    /// sent, relative to full scale 1.0.
    func run(talkers: [[Float]], seconds: Double) -> [[Float]] {
        let frames = Int(seconds * 100)
        let total = frames * frame
        let speakerGain = Float(pow(10, options.speakerGainDB / 20))
        let cross = options.crossGainDB.map { $0.map { Float(pow(10, $0 / 20)) } ?? 0 }
        var sent = [[Int16]](repeating: [Int16](repeating: 0, count: total), count: 2)
        var decoded = sent
        let margin = 20 * frame
        var speaker = [[Float]](repeating: [Float](repeating: 0, count: total + margin), count: 2)
        var air = speaker
        var mic = [Int16](repeating: 0, count: frame), out = mic, written = mic
        var packet = [UInt8](repeating: 0, count: 1500)
        for t in 0..<frames {
            for me in 0..<2 {
                // The far terminal's frame sent `jitterFrames` ago, decoded, written to my speaker now, heard after playback.
                let sentFrame = t - options.jitterFrames[me]
                let heardAt = (t + options.playbackFrames) * frame
                for i in 0..<frame {
                    let v = sentFrame >= 0 ? Float(decoded[1 - me][sentFrame * frame + i]) * speakerGain : 0
                    written[i] = Int16(max(-32768, min(32767, v.rounded())))
                    speaker[me][heardAt + i] = Float(written[i])
                }
                chains[me].canceller.played(written)
            }
            for me in 0..<2 {
                for i in 0..<frame {
                    let n = t * frame + i
                    var v = n < talkers[me].count ? talkers[me][n] : 0
                    v += speaker[me][n] + (n >= 144 ? 0.4 * speaker[me][n - 144] : 0)
                    let c = n - options.crossDelaySamples
                    if c >= 0 { v += cross[me] * (speaker[1 - me][c] + (c >= 144 ? 0.4 * speaker[1 - me][c - 144] : 0)) }
                    air[me][n] = v
                }
            }
            for me in 0..<2 {
                let from = (t - options.captureFrames) * frame
                for i in 0..<frame {
                    mic[i] = from >= 0 && !options.deaf.contains(me) ? Int16(max(-32768, min(32767, air[me][from + i].rounded()))) : 0
                }
                // Last frame's reference comes back now (the network thread took it after the doorbell).
                if t > 0 {
                    let back = (t - 1) * frame
                    let reference = options.loopReference == .beforeCodec ? sent[me] : decoded[me]
                    reference.withUnsafeBufferPointer { _ = chains[me].sentBack?.write($0.baseAddress! + back, count: frame) }
                }
                mic.withUnsafeMutableBufferPointer { m in
                    out.withUnsafeMutableBufferPointer { chains[me].process(captured: m.baseAddress!, into: $0.baseAddress!) }
                }
                chains[me].handedOn()
                let at = t * frame
                for i in 0..<frame { sent[me][at + i] = out[i] }
                // Through the codec, as the far end will hear it.
                let length = out.withUnsafeBufferPointer { o in
                    packet.withUnsafeMutableBufferPointer { encoders[me].encode(o.baseAddress!, frameSize: frame, into: $0.baseAddress!, capacity: 1500) }
                }
                decoded[me].withUnsafeMutableBufferPointer { d in
                    packet.withUnsafeBufferPointer { p in
                        _ = decoders[me].decode(p.baseAddress!, length: length, into: d.baseAddress! + at, frameSize: frame)
                    }
                }
            }
        }
        return sent.map { $0.map { Float($0) / 32768 } }
    }
}
