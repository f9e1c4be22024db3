import AudioPipeline
import Jitter
import SignalTools
import XCTest

/// The jitter buffer with the real Opus decoder: FEC recovers a single lost packet, concealment
/// covers a burst, and the played audio still matches what was sent.
final class JitterOpusTests: XCTestCase {
    func testOpusThroughTheJitterBufferRecoversLossWithFECAndConcealment() throws {
        let frame = 480
        let encoder = try OpusEncoder(expectedLossPercent: 10)
        let speech = Signals.toInt16(Signals.chirp(from: 200, to: 3000, duration: 2, sampleRate: 48000, amplitude: 0.4))
        final class Clock: @unchecked Sendable { var now: UInt64 = 1_000_000_000 }
        let clock = Clock()
        let buffer = JitterBuffer(settings: JitterSettings(frameSize: frame), decoder: try OpusDecoder(), clock: { clock.now })
        let lost: Set<Int> = [50, 51, 52, 120]  // a burst of three and a single loss
        var packet = [UInt8](repeating: 0, count: 1500)
        var played: [Int16] = []
        var out = [Int16](repeating: 0, count: frame)
        let frames = speech.count / frame
        for f in 0..<(frames + 10) {
            if f < frames {
                let n = speech.withUnsafeBufferPointer { encoder.encode($0.baseAddress! + f * frame, frameSize: frame, into: &packet, capacity: 1500) }
                XCTAssertGreaterThan(n, 0)
                if !lost.contains(f) {
                    _ = packet.withUnsafeBytes { raw in
                        buffer.queue.push(payload: UnsafeRawBufferPointer(rebasing: raw[0..<n]), sequence: UInt16(f), timestamp: UInt32(f * frame),
                                          marker: f == 0, arrivalNanos: clock.now)
                    }
                }
            }
            _ = buffer.readFrame(into: &out, count: frame)
            played += out
            clock.now += 10_000_000
        }
        let s = buffer.statistics
        XCTAssertEqual(s.fecRecovered.load, 2, "the last packet of the burst and the single loss come back from FEC")
        XCTAssertEqual(s.lost.load, 2, "the first two of the burst are concealed")
        let found = try XCTUnwrap(Correlation.findDelay(reference: Signals.toFloat(speech), in: Signals.toFloat(played), maxLag: 48000 / 5))
        XCTAssertGreaterThan(found.peak, 0.8, "the played stream still matches what was sent")
        print(String(format: "jitter+opus: played %.2f s, FEC %d, concealed %d, correlation %.3f, delay %.1f ms",
                     Double(played.count) / 48000, s.fecRecovered.load, s.lost.load, found.peak, Double(found.lagSamples) / 48))
    }
}
