import AudioPipeline
import Codec
import IntercomConfig
import IntercomDaemon
import SignalTools
import TestSupport
import XCTest

final class OpusTests: XCTestCase {
    func testSpeechBandSignalSurvivesEncodeAndDecode() throws {
        let enc = try OpusEncoder(daemonConfig { $0.opus.bitrate = 32000 })
        let dec = try OpusDecoder(sampleRate: 48000)
        let frame = 480
        let input = Signals.toInt16(Signals.chirp(from: 200, to: 4000, duration: 1, sampleRate: 48000, amplitude: 0.5))
        var output: [Int16] = []
        var packet = [UInt8](repeating: 0, count: 1500)
        var pcm = [Int16](repeating: 0, count: frame)
        var bytes = 0
        for f in 0..<(input.count / frame) {
            let n = input.withUnsafeBufferPointer { enc.encode($0.baseAddress! + f * frame, frameSize: frame, into: &packet, capacity: packet.count) }
            XCTAssertGreaterThan(n, 0, n < 0 ? OpusDecoder.errorText(n) : "")
            bytes += max(0, n)
            let got = dec.decode(packet, length: n, into: &pcm, frameSize: frame)
            XCTAssertEqual(got, frame)
            output += pcm
        }
        XCTAssertEqual(Double(bytes * 8), 32000, accuracy: 32000 * 0.3, "1 s of audio at the configured 32 kbit/s (VBR)")
        // Opus delays by about its look-ahead; compare after aligning.
        let found = try XCTUnwrap(Correlation.findDelay(reference: Signals.toFloat(input), in: Signals.toFloat(output), maxLag: 1000))
        XCTAssertEqual(found.lagSamples, enc.lookahead, accuracy: 5, "VOIP look-ahead is 6.5 ms")
        XCTAssertGreaterThan(found.peak, 0.9)
    }

    func testLostPacketIsConcealedWithAFullFrame() throws {
        let dec = try OpusDecoder(sampleRate: 48000)
        var pcm = [Int16](repeating: 0, count: 480)
        XCTAssertEqual(dec.decode(nil, length: 0, into: &pcm, frameSize: 480), 480)
    }

    func testInvalidSettingsGiveOpusOwnMessage() {
        XCTAssertThrowsError(try OpusEncoder(daemonConfig { $0.audio.sampleRate = 44100 })) { error in
            XCTAssertEqual("\(error)", "opus: create encoder at 44100 Hz failed: invalid argument (-1)")
        }
        XCTAssertThrowsError(try OpusEncoder(daemonConfig { $0.opus.bitrate = -5 })) { error in
            XCTAssertTrue("\(error)".contains("set bitrate -5 failed: invalid argument"), "\(error)")
        }
    }

    func testLowDelayModeHasShortLookahead() throws {
        XCTAssertEqual(try OpusEncoder(daemonConfig { $0.opus.application = "restricted_lowdelay" }).lookahead, 120, "2.5 ms at 48 kHz")
    }
}
