import AudioPipeline
import Codec
import IntercomConfig
import Foundation
import IntercomDaemon
import SignalTools
import TestSupport
import XCTest

/// Where the speech quality goes in the echo chain, stage by stage: each stage of the daemon's own
/// microphone chain (`MicrophoneToWire.microphoneChain`) switched on in turn by its configuration
/// keys, then Opus at the daemon's settings, scored with wide-band PESQ against the talker's clip.
/// One way: the far end is silent (nothing to cancel). Both ways: the far end talks as well, and
/// its echo reaches the microphone through a simulated room. Offline and deterministic (no
/// devices): the rig tests measure the same chain through ALSA.
final class SuiteEchoStagesTests: XCTestCase {
    struct Stage: Sendable {
        let name: String
        /// Not a step of the chain: the microphone through speexdsp's DC notch only, echo off.
        var notchOnly = false
        /// Not a step either: a variant of the defaults, compared with them.
        var aside = false
        let change: @Sendable (inout DaemonConfig) -> Void
    }

    /// The residual echo suppressor at the defaults' floors, written out so each row says what it runs.
    static let residualSuppression: @Sendable (inout DaemonConfig) -> Void = {
        $0.echo.noiseSuppressDb = 0; $0.echo.echoSuppressDb = -40; $0.echo.echoSuppressActiveDb = -15
    }

    /// Cumulative: each stage adds one element to the one before.
    static let stages: [Stage] = [
        Stage(name: "codec alone (echo.enabled = false)") { $0.echo.enabled = false; $0.echo.howlGuard = false; $0.echo.loopCanceller = false },
        Stage(name: "(speexdsp's DC notch alone, codec after it)", notchOnly: true) {
            $0.echo.enabled = false; $0.echo.howlGuard = false; $0.echo.loopCanceller = false
        },
        Stage(name: "+ the canceller's adaptive filter") {
            $0.echo.noiseSuppressDb = 0; $0.echo.echoSuppressDb = 0; $0.echo.echoSuppressActiveDb = 0
            $0.echo.residualGate = false; $0.echo.howlGuard = false; $0.echo.loopCanceller = false
        },
        Stage(name: "+ residual echo suppression (-40 dB, -15 dB in double talk; no delay)") {
            residualSuppression(&$0); $0.echo.residualGate = false; $0.echo.howlGuard = false; $0.echo.loopCanceller = false
        },
        Stage(name: "+ the residual gate") { residualSuppression(&$0); $0.echo.howlGuard = false; $0.echo.loopCanceller = false },
        Stage(name: "+ the howl guard") { residualSuppression(&$0); $0.echo.loopCanceller = false },
        Stage(name: "+ the loop canceller, no loop to remove (the defaults)") { residualSuppression(&$0) },
        Stage(name: "(the defaults with speexdsp's noise suppression at -15 dB: its preprocessor, a frame of delay)", aside: true) {
            residualSuppression(&$0); $0.echo.noiseSuppressDb = -15
        },
    ]

    /// A wall terminal's speaker-to-microphone path: 20 ms of device buffering, a direct path at
    /// -6 dB 1.5 ms later, and reflections that die away over about 100 ms (seeded).
    static func roomEcho(of far: [Int16]) -> [Float] {
        var random = SplitMix64(seed: 17)
        var taps: [(delay: Int, gain: Float)] = [(960 + 72, 0.5)]
        for _ in 0..<24 {
            let ms = 3 + Double(random.next() % 97)
            let sign: Float = random.next() & 1 == 0 ? 1 : -1
            taps.append((960 + Int(ms * 48), sign * 0.25 * Float(exp(-ms / 30))))
        }
        var echo = [Float](repeating: 0, count: far.count)
        for (delay, gain) in taps where delay < far.count {
            for i in delay..<far.count { echo[i] += gain * Float(far[i - delay]) }
        }
        return echo
    }

    /// speexdsp's echo canceller filters the microphone with this before anything else
    /// (`filter_dc_notch16` in mdf.c, radius 0.992 at 48 kHz): two zeros at DC, a second-order
    /// high-pass near 70 Hz whose phase turns the voice's fundamental and lower harmonics.
    static func speexDCNotch(_ x: [Int16]) -> [Int16] {
        let r = 0.992, den2 = r * r + 0.7 * (1 - r) * (1 - r)
        var m0 = 0.0, m1 = 0.0
        return x.map { v in
            let vin = Double(v), out = m0 + vin
            m0 = m1 + 2 * (-vin + r * out)
            m1 = vin - den2 * out
            return Int16(max(-32768, min(32767, (r * out).rounded())))
        }
    }

    /// The talker's clip through the chain configured by `stage` and through Opus; `far` (if
    /// any) is played and its echo added to the microphone. Returns the path of the decoded WAV.
    func run(_ stage: Stage, near: [Int16], far: [Int16]?, label: String) throws -> String {
        let config = daemonConfig(frame: 480) {
            $0.room.id = "a"  // a terminal in calls: media on the wire, so the loop canceller where the stage has it
            stage.change(&$0)
        }
        let frame = config.audio.framesPerPeriod
        let chain = try MicrophoneToWire.microphoneChain(config)
        XCTAssertEqual(chain.loopCanceller?.enabled.isSet ?? false, config.echo.loopCanceller, "the loop canceller runs where the stage says")
        let encoder = try OpusEncoder(config)
        let decoder = try OpusDecoder(sampleRate: config.audio.sampleRate)
        let played = far.map { Array($0.prefix(near.count)) + [Int16](repeating: 0, count: max(0, near.count - $0.count)) }
            ?? [Int16](repeating: 0, count: near.count)
        let echo = Self.roomEcho(of: played)
        var microphone = (0..<near.count).map { Int16(max(-32768, min(32767, (Float(near[$0]) + echo[$0]).rounded()))) }
        if stage.notchOnly { microphone = Self.speexDCNotch(microphone) }
        var cleaned = [Int16](repeating: 0, count: frame), decoded = [Int16](repeating: 0, count: frame)
        var packet = [UInt8](repeating: 0, count: 1500), out: [Int16] = []
        for f in 0..<(near.count / frame) {
            played.withUnsafeBufferPointer { chain.canceller.played($0.baseAddress! + f * frame) }
            microphone.withUnsafeBufferPointer { chain.process(captured: $0.baseAddress! + f * frame, into: &cleaned) }
            let n = encoder.encode(cleaned, frameSize: frame, into: &packet, capacity: packet.count)
            XCTAssertGreaterThan(n, 0, "Opus encodes every frame")
            XCTAssertEqual(decoder.decodeFrame(packet, length: n, into: &decoded, frameSize: frame), frame)
            // The loop canceller's reference: what was sent, decoded again (the daemon's `SentDecoder`).
            if let loop = chain.loopCanceller, loop.enabled.isSet {
                decoded.withUnsafeBufferPointer { loop.sent($0.baseAddress!, index: f) }
            }
            out += decoded
        }
        // With no loop through another terminal, nothing shows one.
        XCTAssertEqual(chain.loopCanceller?.engagements.load ?? 0, 0, "\(stage.name), \(label): the loop canceller never engaged")
        let path = NSTemporaryDirectory() + "echo-stages-\(getpid())-\(label).wav"
        try WAVAudio(sampleRate: config.audio.sampleRate, channels: 1, samples: out).write(path: path)
        return path
    }

    /// A conversation: the near end says its first segment, the far end answers with its first,
    /// and so on, 0.25 s apart. Returns both ends' tracks on one timeline.
    static func turns(near: [[Int16]], far: [[Int16]]) -> (near: [Int16], far: [Int16]) {
        let gap = [Int16](repeating: 0, count: 12_000)
        var n = gap, f = gap
        for (a, b) in zip(near, far) {
            n += a + gap + [Int16](repeating: 0, count: b.count) + gap
            f += [Int16](repeating: 0, count: a.count) + gap + b + gap
        }
        return (n, f)
    }

    func testSuiteSpeechQualityStageByStageThroughTheEchoChain() throws {
        _ = try SuiteMode.require()
        let phrases = try Speech.naturalPhraseSamples()
        let synthetic = (near: try WAVAudio.read(path: try Speech.nearEnd()).samples, far: try WAVAudio.read(path: try Speech.farEnd()).samples)
        let clips = [("natural", try Speech.naturalNearEnd(), Self.turns(near: phrases, far: [5, 2, 7, 0, 6, 3, 1, 4].map { phrases[$0] })),
                     ("synthetic", try Speech.nearEnd(), Self.turns(near: [synthetic.near], far: [synthetic.far]))]
        var pairs: [(reference: String, recording: String)] = []
        var made: [String] = []
        // Per clip: the clip against itself (its own level), then one way and both ways per stage.
        for (name, nearPath, conversation) in clips {
            let near = try WAVAudio.read(path: nearPath).samples
            let nearTurns = NSTemporaryDirectory() + "echo-stages-\(getpid())-\(name)-near-turns.wav"
            try WAVAudio(sampleRate: 48_000, channels: 1, samples: conversation.near).write(path: nearTurns)
            made.append(nearTurns)
            pairs.append((nearPath, nearPath))
            for (i, stage) in Self.stages.enumerated() {
                pairs.append((nearPath, try run(stage, near: near, far: nil, label: "\(name)-\(i)-one")))
                pairs.append((nearTurns, try run(stage, near: conversation.near, far: conversation.far, label: "\(name)-\(i)-both")))
            }
        }
        made += pairs.map(\.recording).filter { $0.contains("echo-stages-") }
        defer { for p in made { unlink(p) } }
        let q = try Quality.measure(pairs)
        let perClip = 1 + 2 * Self.stages.count
        func pesq(_ clip: Int, _ stage: Int, both: Bool) throws -> Double {
            try XCTUnwrap(q[clip * perClip + 1 + 2 * stage + (both ? 1 : 0)].pesqWb, "PESQ was measured")
        }
        func level(_ clip: Int, _ stage: Int) -> Double {
            q[clip * perClip + 1 + 2 * stage].levelDb - q[clip * perClip].levelDb
        }

        SuiteMode.emit("### Speech quality stage by stage through the echo chain (PESQ-WB; offline: the daemon's chain and Opus, no devices)")
        SuiteMode.emit("")
        SuiteMode.emitTable(intro: "Each row adds one element of the microphone chain to the row above (by its `[echo]` keys), then Opus at the defaults (64 kbit/s). One way: the far end is silent, so there is no echo to remove and every loss is the chain's cost to the person in the room. Both ways: a conversation (the ends take turns, 0.25 s apart; no double talk), the far end's echo reaching the microphone (20 ms of buffering, a direct path at −6 dB, reflections over 100 ms), scored against the near end's track alone. Natural: alsa-utils' recorded voice, peaks at −6 dBFS (about 14 s); synthetic: espeak-ng. Higher is better; Δ is the step from the row above. The row in parentheses is not a stage: the microphone through speexdsp's DC notch alone (the second-order high-pass near 70 Hz speexdsp's canceller applies to the microphone before anything else, `filter_dc_notch16`), echo off: what the person in the room would lose if the canceller passed speexdsp's output on as it is. It does not: it hands on the microphone itself minus speexdsp's echo estimate, un-notched, wherever that estimate is more than 20 dB below the output, and speexdsp's own output only where there is echo to remove (`NearEndRestore`). That row and the one after it compare with the codec alone. Residual echo suppression is intercomd's own (`ResidualEchoSuppressor`: band gains from speexdsp's echo estimate, applied to the frame they were measured on, exactly 1 where there is no echo estimate); speexdsp's preprocessor is off by default. The loop canceller's row feeds its reference as the daemon does (the sent frames, decoded again) but has no loop to remove: its filter adapts under the voice and learns the voice's own periodicity (subtracted, that would cost 2.7 PESQ), but it subtracts only where a loop shows, and none does (`LoopCancellerTests`). The last row, in parentheses too, adds speexdsp's noise suppression to the defaults and compares with them. Pieces are aligned for PESQ on the band above 300 Hz (scripts/quality.py): a notch turns the phase of a voice's lowest harmonics, which moved full-band pieces by up to 4 ms and cut the stitched recording, a loss of up to 0.9 PESQ that was the measurement's, not the voice's.",
                            columns: ["stage", "one way, natural (Δ)", "level vs source", "both ways, natural (Δ)", "one way, synthetic (Δ)", "both ways, synthetic (Δ)"])
        for (i, stage) in Self.stages.enumerated() {
            func cell(_ clip: Int, both: Bool) throws -> String {
                let v = try pesq(clip, i, both: both)
                // The notch row and the row after it compare with the codec alone (the notch is not a step).
                let previous = i == 0 ? nil : (Self.stages[i].notchOnly || Self.stages[i - 1].notchOnly) ? 0
                    : Self.stages[i].aside ? Self.stages.lastIndex { !$0.aside } : i - 1
                return try previous.map { String(format: "%.2f (%+.2f)", v, v - (try pesq(clip, $0, both: both))) } ?? String(format: "%.2f", v)
            }
            SuiteMode.emit("| \(stage.name) | \(try cell(0, both: false)) | \(String(format: "%+.1f dB", level(0, i))) | \(try cell(0, both: true)) | \(try cell(1, both: false)) | \(try cell(1, both: true)) |")
        }
        SuiteMode.emit("")
        // The codec alone keeps natural speech wide-band clear; a chain that broke the clip shows here.
        XCTAssertGreaterThan(try pesq(0, 0, both: false), 3.5, "Opus alone at 64 kbit/s")
        XCTAssertLessThan(abs(level(0, 0)), 1, "Opus alone keeps the level")
    }
}
