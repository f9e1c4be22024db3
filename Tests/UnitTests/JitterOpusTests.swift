import AudioPipeline
import Codec
import IntercomConfig
import IntercomDaemon
import Jitter
import SignalTools
import TestSupport
import XCTest

/// The jitter buffer with the real Opus decoder: FEC recovers a single lost packet, concealment
/// covers a burst, and the played audio still matches what was sent.
final class JitterOpusTests: XCTestCase {
    func testOpusThroughTheJitterBufferRecoversLossWithFECAndConcealment() throws {
        let frame = 480
        let encoder = try OpusEncoder(daemonConfig { $0.opus.expectedLossPercent = 10 })
        let speech = Signals.toInt16(Signals.chirp(from: 200, to: 3000, duration: 2, sampleRate: 48000, amplitude: 0.4))
        final class Clock: @unchecked Sendable { var now: UInt64 = 1_000_000_000 }
        let clock = Clock()
        let buffer = JitterBuffer(settings: JitterSettings(daemonConfig(frame: frame)), decoder: try OpusDecoder(sampleRate: 48000), clock: { clock.now })
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
        // At the daemon's 10 ms floor the first FEC repair holds the delay at two frames, which
        // inserts one concealed frame: the stream is compared with what was sent from there on.
        XCTAssertEqual(s.inserted.load, 1, "the FEC look-ahead's one frame")
        let tail = Array(speech[(60 * frame)...])
        let found = try XCTUnwrap(Correlation.findDelay(reference: Signals.toFloat(tail), in: Signals.toFloat(played), maxLag: 48000 * 3 / 4))
        XCTAssertGreaterThan(found.peak, 0.8, "the played stream still matches what was sent")
        print(String(format: "jitter+opus: played %.2f s, FEC %d, concealed %d, correlation %.3f, delay %.1f ms",
                     Double(played.count) / 48000, s.fecRecovered.load, s.lost.load, found.peak, Double(found.lagSamples) / 48))
    }

    /// A sender with FEC off: the same losses are all concealed and none is counted as recovered
    /// (libopus asked for FEC that is not there conceals and reports success).
    func testLossesFromASenderWithoutFECAreCountedAsConcealedNotRecovered() throws {
        let frame = 480
        let encoder = try OpusEncoder(daemonConfig { $0.opus.fec = false })
        let speech = Signals.toInt16(Signals.chirp(from: 200, to: 3000, duration: 2, sampleRate: 48000, amplitude: 0.4))
        final class Clock: @unchecked Sendable { var now: UInt64 = 1_000_000_000 }
        let clock = Clock()
        let buffer = JitterBuffer(settings: JitterSettings(daemonConfig(frame: frame)), decoder: try OpusDecoder(sampleRate: 48000), clock: { clock.now })
        let lost: Set<Int> = [50, 51, 52, 120]
        var packet = [UInt8](repeating: 0, count: 1500)
        var out = [Int16](repeating: 0, count: frame)
        for f in 0..<(speech.count / frame + 10) {
            if f < speech.count / frame {
                let n = speech.withUnsafeBufferPointer { encoder.encode($0.baseAddress! + f * frame, frameSize: frame, into: &packet, capacity: 1500) }
                if !lost.contains(f) {
                    _ = packet.withUnsafeBytes { raw in
                        buffer.queue.push(payload: UnsafeRawBufferPointer(rebasing: raw[0..<n]), sequence: UInt16(f), timestamp: UInt32(f * frame),
                                          marker: f == 0, arrivalNanos: clock.now)
                    }
                }
            }
            _ = buffer.readFrame(into: &out, count: frame)
            clock.now += 10_000_000
        }
        XCTAssertEqual(buffer.statistics.fecRecovered.load, 0)
        XCTAssertEqual(buffer.statistics.lost.load, 4)
    }

    /// A peer sending 20 ms packets (GStreamer's opusenc default) to a 10 ms terminal: every packet
    /// plays as two frames, none as silence or a decoding error.
    func testPacketsLongerThanAFramePlayWhole() throws {
        try playLongerPackets(minDelayMs: 20, arrivalAfterRead: false)
    }

    /// The same at the daemon's default minimum delay (10 ms, below a 20 ms packet), packets landing
    /// just after the reader's tick: the second half of each packet is due before the next packet
    /// arrives and must come from the decoded packet, not from concealment (a GStreamer interop run
    /// once played 319 of 552 frames, 251 concealed, this way).
    func testSecondHalfOfALongPacketPlaysBeforeTheNextPacketArrives() throws {
        try playLongerPackets(minDelayMs: 10, arrivalAfterRead: true)
    }

    private func playLongerPackets(minDelayMs: Double, arrivalAfterRead: Bool) throws {
        let frame = 480, packetSamples = 960
        let encoder = try OpusEncoder(.default)
        let speech = Signals.toInt16(Signals.chirp(from: 200, to: 3000, duration: 2, sampleRate: 48000, amplitude: 0.4))
        final class Clock: @unchecked Sendable { var now: UInt64 = 1_000_000_000 }
        let clock = Clock()
        let buffer = JitterBuffer(settings: JitterSettings(daemonConfig(frame: frame) { $0.jitter.minDelayMs = minDelayMs }), decoder: try OpusDecoder(sampleRate: 48000), clock: { clock.now })
        var packet = [UInt8](repeating: 0, count: 1500)
        var played: [Int16] = []
        var out = [Int16](repeating: 0, count: frame)
        let packets = speech.count / packetSamples
        var underrunsWhileStreaming = 0
        for f in 0..<(2 * packets + 10) {
            if f == 2 * packets - 1 { underrunsWhileStreaming = buffer.statistics.underruns.load }  // the rest is the stream's end
            if arrivalAfterRead {
                _ = buffer.readFrame(into: &out, count: frame)
                played += out
            }
            if f % 2 == 0, f / 2 < packets {
                let p = f / 2
                let n = speech.withUnsafeBufferPointer { encoder.encode($0.baseAddress! + p * packetSamples, frameSize: packetSamples, into: &packet, capacity: 1500) }
                _ = packet.withUnsafeBytes { raw in
                    buffer.queue.push(payload: UnsafeRawBufferPointer(rebasing: raw[0..<n]), sequence: UInt16(p), timestamp: UInt32(p * packetSamples),
                                      marker: p == 0, arrivalNanos: clock.now + (arrivalAfterRead ? 1_000_000 : 0))
                }
            }
            if !arrivalAfterRead {
                _ = buffer.readFrame(into: &out, count: frame)
                played += out
            }
            clock.now += 10_000_000
        }
        let s = buffer.statistics
        XCTAssertEqual(s.decodeErrors.load, 0)
        XCTAssertGreaterThanOrEqual(s.played.load, 2 * packets - 2, "each packet plays as two frames")
        XCTAssertEqual(underrunsWhileStreaming, 0, "no second half concealed")
        let found = try XCTUnwrap(Correlation.findDelay(reference: Signals.toFloat(speech), in: Signals.toFloat(played), maxLag: 48000 / 5))
        XCTAssertGreaterThan(found.peak, 0.8, "the played stream matches what was sent")
        print(String(format: "20 ms packets into 10 ms frames (min delay %.0f ms): played %d frames from %d packets, underruns %d, silence %d, correlation %.3f",
                     minDelayMs, s.played.load, packets, underrunsWhileStreaming, s.silenceFrames.load, found.peak))
    }
}
