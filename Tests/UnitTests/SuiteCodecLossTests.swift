import Codec
import IntercomConfig
import Foundation
import Impairment
import IntercomDaemon
import Jitter
import SignalTools
import TestSupport
import XCTest

/// The codec alone through the impairment relay's loss models: the bar for the rig's speech quality
/// through loss (`SuiteSpeechQualityTests`). The natural clip is encoded at the daemon's Opus
/// settings, each packet kept or lost by the relay's own `ImpairmentModel`, and decoded as an ideal
/// receiver would with one packet of look-ahead: a lost frame comes from the next packet's FEC when
/// that packet arrived, from Opus's concealment otherwise. No jitter, no devices, no time stretched.
final class SuiteCodecLossTests: XCTestCase {
    struct Condition {
        let name: String
        let profile: ImpairmentProfile
        let fec: Bool
        var expectedLoss = 5
    }

    /// The same chain as the rig's `SuiteSpeechQualityTests.bursty` relay options.
    static let bursty = ImpairmentProfile(burstEnterPercent: 2, burstExitPercent: 30, burstLossPercent: 80)

    /// The clip through Opus and `profile` (seeded), after `leadIn` of silence that streams and
    /// loses packets as the rig's streams do before the talker speaks. Decoded twice from the same
    /// packets: by the ideal receiver, and by the daemon's receive chain (`JitterBuffer` and
    /// `DriftCorrector`, as `WireToSpeaker` builds them) on a simulated clock, packets arriving
    /// every 10 ms and frames read half a frame after them. Returns both WAVs' paths (the lead-in
    /// cut) and the loss in percent over the clip.
    func run(_ condition: Condition, seed: UInt64, clip: [Int16], label: String) throws -> (ideal: String, chain: String, loss: Double) {
        let config = daemonConfig { $0.opus.fec = condition.fec; $0.opus.expectedLossPercent = condition.expectedLoss }
        let frame = config.audio.framesPerPeriod, frameNs: UInt64 = 10_000_000
        let leadIn = 200  // frames: 2 s
        let input = [Int16](repeating: 0, count: leadIn * frame) + clip
        let encoder = try OpusEncoder(config)
        var profile = condition.profile
        profile.seed = seed
        var model = try ImpairmentModel(profile: profile)
        var packets: [[UInt8]?] = []
        var buffer = [UInt8](repeating: 0, count: 1500)
        for f in 0..<(input.count / frame) {
            let n = input.withUnsafeBufferPointer { encoder.encode($0.baseAddress! + f * frame, frameSize: frame, into: &buffer, capacity: buffer.count) }
            XCTAssertGreaterThan(n, 0, "Opus encodes every frame")
            packets.append(model.sendTimes(arrivalNs: UInt64(f) * frameNs).isEmpty ? nil : Array(buffer.prefix(n)))
        }

        let decoder = try OpusDecoder(sampleRate: config.audio.sampleRate)
        var ideal: [Int16] = [], pcm = [Int16](repeating: 0, count: frame)
        for (i, packet) in packets.enumerated() {
            let n: Int
            if let packet {
                n = packet.withUnsafeBytes { decoder.decode($0, into: &pcm, frameSize: frame) }
            } else if i + 1 < packets.count, let next = packets[i + 1] {
                let fec = next.withUnsafeBytes { decoder.decodeFEC(from: $0, into: &pcm, frameSize: frame) }
                n = fec >= 0 ? fec : decoder.conceal(into: &pcm, frameSize: frame)
            } else {
                n = decoder.conceal(into: &pcm, frameSize: frame)
            }
            XCTAssertEqual(n, frame, "every frame decodes or is concealed")
            if i >= leadIn { ideal += pcm }
        }

        final class Clock: @unchecked Sendable { var now: UInt64 = 1_000_000_000 }
        let clock = Clock(), start = clock.now
        let jitter = JitterBuffer(settings: JitterSettings(config), decoder: try OpusDecoder(sampleRate: config.audio.sampleRate), clock: { clock.now })
        let chain = try DriftCorrector(buffer: jitter, settings: DriftSettings(config))
        var played: [Int16] = []
        for f in 0..<(packets.count + 20) {
            clock.now = start + UInt64(f) * frameNs
            if f < packets.count, let packet = packets[f] {
                _ = packet.withUnsafeBytes { jitter.queue.push(payload: $0, sequence: UInt16(truncatingIfNeeded: f), timestamp: UInt32(f * frame),
                                                               marker: f == 0, arrivalNanos: clock.now) }
            }
            clock.now += frameNs / 2
            if !chain.readFrame(into: &pcm, count: frame) { pcm = [Int16](repeating: 0, count: frame) }
            if f >= leadIn { played += pcm }
        }

        let base = NSTemporaryDirectory() + "codec-loss-\(getpid())-\(label)"
        try WAVAudio(sampleRate: config.audio.sampleRate, channels: 1, samples: ideal).write(path: base + "-ideal.wav")
        try WAVAudio(sampleRate: config.audio.sampleRate, channels: 1, samples: played).write(path: base + "-chain.wav")
        let clipPackets = packets[leadIn...]
        return (base + "-ideal.wav", base + "-chain.wav", Double(clipPackets.filter { $0 == nil }.count) / Double(clipPackets.count) * 100)
    }

    func testSuiteTheCodecAloneThroughTheRelaysLossModels() throws {
        let mode = try SuiteMode.require()
        let clipPath = try Speech.naturalNearEnd()
        let clip = try WAVAudio.read(path: clipPath).samples
        var conditions = [
            Condition(name: "5 % random", profile: ImpairmentProfile(lossPercent: 5), fec: true),
            Condition(name: "bursty (bursts of ~3)", profile: Self.bursty, fec: false),
            Condition(name: "bursty (bursts of ~3)", profile: Self.bursty, fec: true),
            Condition(name: "bursty (bursts of ~3)", profile: Self.bursty, fec: true, expectedLoss: 10),
            Condition(name: "bursty (bursts of ~3)", profile: Self.bursty, fec: true, expectedLoss: 20),
        ]
        let seeds: [UInt64] = mode.isSmoke ? [1] : Array(1...16)
        if mode.isSmoke { conditions = [conditions[2]] }
        var runs: [(condition: Int, seed: UInt64, ideal: String, chain: String, loss: Double)] = []
        for (c, condition) in conditions.enumerated() {
            for seed in seeds {
                let r = try run(condition, seed: seed, clip: clip, label: "\(c)-\(seed)")
                runs.append((c, seed, r.ideal, r.chain, r.loss))
            }
        }
        defer { for r in runs { unlink(r.ideal); unlink(r.chain) } }
        let q = try Quality.measure(runs.flatMap { [(clipPath, $0.ideal), (clipPath, $0.chain)] })
        func pesq(_ run: Int, chain: Bool) throws -> Double { try XCTUnwrap(q[2 * run + (chain ? 1 : 0)].pesqWb, "PESQ was measured") }

        SuiteMode.emit("### The codec alone through the relay's loss models (offline: Opus at the daemon's settings; an ideal receiver, and the daemon's receive chain)")
        SuiteMode.emit("")
        SuiteMode.emitTable(intro: "The bar for the rig's speech quality through loss (the table above): the natural clip (about 14 s, 1400 packets of 10 ms, after 2 s of silence that streams and loses packets as the rig's streams do before the talker speaks) encoded by Opus at the daemon's settings, each packet kept or lost by the impairment relay's own model (`ImpairmentModel`, the rig's relay options) over \(seeds.count) seeds. The same packets decoded twice. *Ideal*: a receiver with one packet of look-ahead and no jitter, a lost frame from the next packet's FEC where that packet came, Opus's concealment otherwise; nothing is stretched in time, so every loss of PESQ-WB there is the codec's. *Receive chain*: the daemon's `JitterBuffer` and `DriftCorrector` at the defaults on a simulated clock (packets every 10 ms, frames read half a frame after them, no jitter, no devices): what the buffer's delay steering (the FEC look-ahead's extra frame, drops and inserts) costs beyond the codec. Median and range over the seeds; Δ is the chain less the ideal, per seed. The rig's relay runs its seeds over the whole stream, not this clip alone, so its realisations differ.",
                            columns: ["loss", "FEC (expected loss)", "loss over the clip, median (range)", "PESQ-WB ideal, median (range)", "seeds below 3.3", "PESQ-WB receive chain, median (range)", "seeds below 3.3", "Δ chain − ideal, median (range)"])
        func median(_ v: [Double]) -> Double { let s = v.sorted(); return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2 }
        var medians: [Double] = []
        for (c, condition) in conditions.enumerated() {
            let indices = runs.indices.filter { runs[$0].condition == c }
            let ideal = try indices.map { try pesq($0, chain: false) }, chain = try indices.map { try pesq($0, chain: true) }
            let delta = zip(chain, ideal).map { $0 - $1 }, loss = indices.map { runs[$0].loss }
            medians += [median(ideal), median(chain)]
            SuiteMode.emit(String(format: "| %@ | %@ | %.1f %% (%.1f-%.1f) | %.2f (%.2f-%.2f) | %d of %d | %.2f (%.2f-%.2f) | %d of %d | %+.2f (%+.2f to %+.2f) |", condition.name,
                                  condition.fec ? "on (\(condition.expectedLoss) %)" : "off", median(loss), loss.min()!, loss.max()!,
                                  median(ideal), ideal.min()!, ideal.max()!, ideal.filter { $0 < 3.3 }.count, ideal.count,
                                  median(chain), chain.min()!, chain.max()!, chain.filter { $0 < 3.3 }.count, chain.count,
                                  median(delta), delta.min()!, delta.max()!))
        }
        SuiteMode.emit("")
        // Loss costs something, and the codec still decodes speech: a broken decode path shows here.
        XCTAssertTrue(medians.allSatisfy { $0 > 2 && $0 < 4.5 }, "PESQ-WB through loss: \(medians)")
    }
}
