import AudioPipeline
import Codec
import IntercomConfig
import IntercomDaemon
import SignalTools
import TestSupport
import XCTest

/// Why the encoder's defaults are 64 kbit/s and 5 % expected loss: speech through the codec alone
/// (encode, decode, no loss), scored with wide-band PESQ against the clip (scripts/quality.py).
/// libopus 1.3 makes room for FEC at 5 % or less only when the bitrate has it; above 5 % it
/// narrows the band until the FEC fits, and that costs clean speech more than FEC gives back.
final class OpusDefaultsQualityTests: XCTestCase {
    private struct Encoded {
        let label: String
        let fecPackets: Int
        let frames: Int
        let path: String
    }

    private func encodeAndDecode(_ clip: [Int16], _ encoder: OpusEncoder, label: String) throws -> Encoded {
        let frame = 480
        let decoder = try OpusDecoder(sampleRate: 48000)
        var packet = [UInt8](repeating: 0, count: 1500), pcm = [Int16](repeating: 0, count: frame), out: [Int16] = []
        var fec = 0
        let frames = clip.count / frame
        for f in 0..<frames {
            let n = clip.withUnsafeBufferPointer { encoder.encode($0.baseAddress! + f * frame, frameSize: frame, into: &packet, capacity: 1500) }
            XCTAssertGreaterThan(n, 0)
            if packet.withUnsafeBytes({ OpusPacket.carriesFEC(UnsafeRawBufferPointer(rebasing: $0[0..<max(0, n)])) }) { fec += 1 }
            XCTAssertEqual(packet.withUnsafeBufferPointer { decoder.decodeFrame($0.baseAddress, length: n, into: &pcm, frameSize: frame) }, frame)
            out += pcm
        }
        let path = NSTemporaryDirectory() + "opus-defaults-\(getpid())-\(label.filter { $0.isLetter || $0.isNumber }).wav"
        try WAVAudio(sampleRate: 48000, channels: 1, samples: out).write(path: path)
        return Encoded(label: label, fecPackets: fec, frames: frames, path: path)
    }

    func testDefaultEncoderCarriesFECInSpeechAndSoundsBetterThanThe32kbitSettings() throws {
        let clip = try Speech.roomA()
        let speech = try WAVAudio.read(path: clip).samples
        let runs = [
            try encodeAndDecode(speech, OpusEncoder(.default), label: "default (64 kbit/s, FEC, 5 %)"),
            try encodeAndDecode(speech, OpusEncoder(daemonConfig { $0.opus.bitrate = 32000; $0.opus.fec = true; $0.opus.expectedLossPercent = 10 }), label: "32 kbit/s, FEC, 10 %"),
            try encodeAndDecode(speech, OpusEncoder(daemonConfig { $0.opus.bitrate = 32000; $0.opus.fec = true; $0.opus.expectedLossPercent = 5 }), label: "32 kbit/s, FEC, 5 %"),
            try encodeAndDecode(speech, OpusEncoder(daemonConfig { $0.opus.bitrate = 32000; $0.opus.fec = false; $0.opus.expectedLossPercent = 0 }), label: "32 kbit/s, no FEC"),
        ]
        defer { for r in runs { unlink(r.path) } }
        let q = try Quality.measure(runs.map { (reference: clip, recording: $0.path) })
        for (r, m) in zip(runs, q) {
            print(String(format: "opus %@: FEC in %d of %d packets, PESQ-WB %.2f, STOI %.3f", r.label, r.fecPackets, r.frames, m.pesqWb ?? .nan, m.stoi))
        }
        let pesq = try q.map { try XCTUnwrap($0.pesqWb) }
        XCTAssertGreaterThan(runs[0].fecPackets, runs[0].frames / 2, "the default protects most speech packets")
        XCTAssertEqual(runs[2].fecPackets, 0, "32 kbit/s at 5 % leaves no room for FEC")
        XCTAssertGreaterThanOrEqual(pesq[0], 3.3, "the default keeps wide-band speech clear")
        XCTAssertGreaterThan(pesq[0] - pesq[1], 1.0, "32 kbit/s forced to carry FEC loses its band")
    }
}
