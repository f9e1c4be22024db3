import AudioPipeline
import CAllocCounter
import Codec
import EchoCancel
import Foundation
import Frames
import IntercomDaemon
import Jitter
import Posix
import RealTime
import RTP
import SignalTools
import Transport

/// CPU of the full-duplex chain for one remote stream, stage by stage, on one thread and a
/// simulated clock (no devices, no sockets): what the audio and network threads do per frame.
///
///   microphone frame → loop canceller → AEC → mic gain → Opus encode → RTP header → decoded again (loop reference)
///   RTP parse → packet queue → jitter buffer (Opus decode) → drift corrector → mix → echo reference
struct ChainCPU {
    struct Result {
        var stagesNs: [(String, Double)]
        var totalNs: Double
        var allocations: UInt64
    }

    let frame = 480
    let frames: Int

    func measureOnce(far: [Int16], mic: [Int16]) throws -> Result {
        final class SimClock: @unchecked Sendable { var now: UInt64 = 1_000_000_000 }
        let clock = SimClock()
        // The daemon's own chain at its defaults (10 ms periods: `frame`), as a terminal in calls
        // runs it (with media on the wire, so with the loop canceller).
        let config = DaemonConfig.default.with { $0.room.id = "bench" }
        precondition(config.audio.framesPerPeriod == frame)
        let chain = try MicrophoneToWire.microphoneChain(config)
        let canceller = chain.canceller
        // The sent frame comes back decoded, as from the network thread, so that the loop canceller
        // (on by default) works as in the daemon.
        chain.loopCanceller!.enabled.set(true)
        let sentDecoder = try SentDecoder(sampleRate: config.audio.sampleRate, frameSize: frame, ring: chain.sentBack!,
                                          active: chain.loopCanceller!.enabled)
        let encoder = try OpusEncoder(config)
        var rtp = try RTPSender(payloadType: 96)
        let jitter = JitterBuffer(settings: JitterSettings(config), decoder: try OpusDecoder(sampleRate: config.audio.sampleRate),
                                  clock: { clock.now })
        let drift = try DriftCorrector(buffer: jitter, settings: DriftSettings(config))
        let mixer = Mixer(inputs: [MixerInput(source: drift)], frameSize: frame)
        let cleaned = UnsafeMutablePointer<Int16>.allocate(capacity: frame)
        let speaker = UnsafeMutablePointer<Int16>.allocate(capacity: frame)
        let packet = UnsafeMutableRawBufferPointer.allocate(byteCount: 1500, alignment: 4)
        defer { cleaned.deallocate(); speaker.deallocate(); packet.deallocate() }
        speaker.initialize(repeating: 0, count: frame)
        canceller.played(speaker); canceller.played(speaker)

        // The far end's packets, encoded beforehand: decoding is ours, encoding is the far end's.
        let farEncoder = try OpusEncoder(config)
        var farRTP = try RTPSender(payloadType: 96)
        var farPackets: [[UInt8]] = []
        far.withUnsafeBufferPointer { f in
            for i in 0..<frames {
                let n = farEncoder.encode(f.baseAddress! + i * frame, frameSize: frame,
                                          into: packet.baseAddress!.assumingMemoryBound(to: UInt8.self) + 12, capacity: 1488)
                _ = RTPWriter.writeHeader(farRTP.next(frameSamples: UInt32(frame), marker: i == 0), into: packet)
                farPackets.append(Array(packet[0..<(12 + max(n, 1))]))
            }
        }

        var spent = [Double](repeating: 0, count: 7)
        alloc_counter_track_current_thread()
        alloc_counter_reset()
        alloc_counter_arm(1)
        let start = MonotonicClock.nanoseconds()
        mic.withUnsafeBufferPointer { m in
            for i in 0..<frames {
                clock.now += 10_000_000
                var t = MonotonicClock.nanoseconds()
                func lap(_ stage: Int) {
                    let n = MonotonicClock.nanoseconds()
                    spent[stage] += Double(n - t)
                    t = n
                }
                // Microphone half (audio thread) and sending (network thread).
                chain.process(captured: m.baseAddress! + i * frame, into: cleaned)
                chain.handedOn()
                lap(0)
                let n = encoder.encode(cleaned, frameSize: frame, into: packet.baseAddress!.assumingMemoryBound(to: UInt8.self) + 12, capacity: 1488)
                _ = RTPWriter.writeHeader(rtp.next(frameSamples: UInt32(frame), marker: false), into: packet)
                lap(1)
                sentDecoder.sent(packet.baseAddress!.assumingMemoryBound(to: UInt8.self) + 12, length: n)
                lap(5)
                // Receiving (network thread).
                farPackets[i].withUnsafeBytes { bytes in
                    if case let .success(p) = RTPParser.parse(bytes, expectedPayloadType: 96) {
                        jitter.queue.push(payload: p.payload(in: bytes), sequence: p.header.sequence,
                                          timestamp: p.header.timestamp, marker: p.header.marker, arrivalNanos: clock.now)
                    }
                }
                lap(2)
                // Speaker half (audio thread): the mixer pulls the drift corrector, which pulls the
                // jitter buffer, which decodes; then the frame becomes the echo reference.
                mixer.mix(into: speaker)
                lap(3)
                canceller.played(speaker)
                lap(4)
            }
        }
        let total = Double(MonotonicClock.nanoseconds() - start)
        alloc_counter_arm(0)
        let per = { (x: Double) in x / Double(frames) }
        return Result(
            stagesNs: [("loop canceller + echo cancellation + mic gain + howl guard", per(spent[0])), ("Opus encode + RTP header", per(spent[1])),
                       ("sent frame decoded again (the loop canceller's reference)", per(spent[5])),
                       ("RTP parse + packet queue", per(spent[2])), ("mix: drift corrector → jitter buffer → Opus decode", per(spent[3])),
                       ("echo reference bookkeeping", per(spent[4]))],
            totalNs: per(total), allocations: alloc_counter_count())
    }

    /// Prints the Markdown table: the median of `runs` runs per stage.
    func report(far: [Int16], mic: [Int16], runs: Int) throws {
        var results: [Result] = []
        for _ in 0..<runs { results.append(try measureOnce(far: far, mic: mic)) }
        let framePeriodNs = 10_000_000.0
        func median(_ v: [Double]) -> Double { let s = v.sorted(); return s[s.count / 2] }
        print("\n### Full-duplex chain, one remote stream, 10 ms frames (median of \(runs) runs × \(frames) frames, one thread, simulated clock)\n")
        print("| stage | µs per frame | % of real time |")
        print("|---|---|---|")
        for (k, stage) in results[0].stagesNs.enumerated() {
            let m = median(results.map { $0.stagesNs[k].1 })
            print(String(format: "| %@ | %.1f | %.2f %% |", stage.0, m / 1000, m / framePeriodNs * 100))
        }
        let total = median(results.map(\.totalNs))
        print(String(format: "| **whole chain** (incl. timing overhead) | **%.1f** | **%.2f %%** of one core; lower is better |", total / 1000, total / framePeriodNs * 100))
        let allocations = results.map(\.allocations).reduce(0, +)
        print(String(format: "| heap allocations in the chain | %llu in %d frames | goal 0 |", allocations, runs * frames))
    }
}
