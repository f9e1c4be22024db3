import AudioPipeline
import Codec
import IntercomConfig
import IntercomDaemon
import SignalTools
import TestSupport
import XCTest

/// Reading the FEC flag from real libopus packets, in every framing the RFC allows.
final class OpusPacketTests: XCTestCase {
    private let frame = 480

    /// Encodes a 1 s chirp; returns the packets.
    private func packets(_ encoder: OpusEncoder) -> [[UInt8]] {
        let pcm = Signals.toInt16(Signals.chirp(from: 200, to: 3000, duration: 1, sampleRate: 48000, amplitude: 0.4))
        var out = [[UInt8]](), buf = [UInt8](repeating: 0, count: 1500)
        for f in 0..<(pcm.count / frame) {
            let n = pcm.withUnsafeBufferPointer { encoder.encode($0.baseAddress! + f * frame, frameSize: frame, into: &buf, capacity: 1500) }
            XCTAssertGreaterThan(n, 0)
            out.append(Array(buf[0..<n]))
        }
        return out
    }

    private func carries(_ p: [UInt8]) -> Bool { p.withUnsafeBytes { OpusPacket.carriesFEC($0) } }

    /// libopus itself is the judge. A packet is lost; the decoder asked for FEC from the next one
    /// gets the lost frame back (much closer to what decoding it would have given than
    /// concealment is) only if the next packet is flagged. Speech, at the daemon's defaults.
    func testOnlyFlaggedPacketsLetLibopusRecoverTheLostFrame() throws {
        let speech = try WAVAudio.read(path: try Speech.roomA()).samples
        let encoder = try OpusEncoder(.default)
        var all = [[UInt8]](), buf = [UInt8](repeating: 0, count: 1500)
        for f in 0..<(speech.count / frame) {
            let n = speech.withUnsafeBufferPointer { encoder.encode($0.baseAddress! + f * frame, frameSize: frame, into: &buf, capacity: 1500) }
            all.append(Array(buf[0..<n]))
        }
        var fec = [Int16](repeating: 0, count: frame), plc = fec, truth = fec
        var flagged = 0, recovered = 0, recoveredUnflagged = 0
        for i in 5..<all.count {
            let withFEC = try OpusDecoder(sampleRate: 48000), withPLC = try OpusDecoder(sampleRate: 48000), whole = try OpusDecoder(sampleRate: 48000)
            for p in all[(i - 5)..<(i - 1)] {  // the same history in all three; packet i - 1 is lost
                for d in [withFEC, withPLC, whole] { _ = p.withUnsafeBufferPointer { d.decodeFrame($0.baseAddress, length: p.count, into: &truth, frameSize: frame) } }
            }
            let lost = all[i - 1], next = all[i]
            _ = lost.withUnsafeBufferPointer { whole.decodeFrame($0.baseAddress, length: lost.count, into: &truth, frameSize: frame) }
            XCTAssertEqual(next.withUnsafeBufferPointer { withFEC.decode($0.baseAddress, length: next.count, into: &fec, frameSize: frame, fec: true) }, frame)
            XCTAssertEqual(withPLC.decode(nil, length: 0, into: &plc, frameSize: frame), frame)
            let error = { (x: [Int16]) in zip(x, truth).reduce(1.0) { $0 + pow(Double($1.0) - Double($1.1), 2) } }
            let closer = 10 * log10(error(plc) / error(fec))  // dB closer to the truth than concealment
            if carries(next) { flagged += 1 }
            if closer > 6 {
                recovered += 1
                if !carries(next) { recoveredUnflagged += 1 }
            }
        }
        print("opus FEC flag: \(flagged) of \(all.count - 5) speech packets flagged; libopus recovered a lost frame "
              + "(6 dB closer than concealment) from \(recovered), \(recoveredUnflagged) of them unflagged")
        XCTAssertEqual(recoveredUnflagged, 0, "no recovery from a packet the flag says carries nothing")
        XCTAssertGreaterThan(recovered, flagged / 5, "flagged packets do recover lost frames")
    }

    func testFECIsSeenInTheVoIPEncodersPacketsOnlyWhenItIsOn() throws {
        let on = packets(try OpusEncoder(daemonConfig { $0.opus.fec = true; $0.opus.expectedLossPercent = 10 })).map(carries)
        let off = packets(try OpusEncoder(daemonConfig { $0.opus.fec = false })).map(carries)
        let celt = packets(try OpusEncoder(daemonConfig { $0.opus.application = "restricted_lowdelay" })).map(carries)
        print("opus packets carrying FEC: on \(on.filter { $0 }.count)/\(on.count), off \(off.filter { $0 }.count), CELT \(celt.filter { $0 }.count)")
        XCTAssertGreaterThan(on.filter { $0 }.count, on.count / 2, "FEC on: most packets carry their predecessor")
        XCTAssertFalse(on[0], "the first packet has no predecessor to carry")
        XCTAssertEqual(off.filter { $0 }.count, 0, "FEC off")
        XCTAssertEqual(celt.filter { $0 }.count, 0, "CELT only")
    }

    /// The flag is found behind code 1, 2 and 3 framing too, and libopus accepts each packet.
    func testFlagIsReadThroughEveryFraming() throws {
        let all = packets(try OpusEncoder(daemonConfig { $0.opus.fec = true; $0.opus.expectedLossPercent = 10 }))
        let decoder = try OpusDecoder(sampleRate: 48000)
        var pcm = [Int16](repeating: 0, count: OpusDecoder.maxPacketSamples)
        for p in all.suffix(20) {
            let toc = p[0] & ~0x03, data = Array(p[1...])
            XCTAssertLessThan(data.count, 252)
            let framings: [(String, [UInt8])] = [
                ("code 1", [toc | 1] + data + data),
                ("code 2", [toc | 2, UInt8(data.count)] + data + data),
                ("code 3 CBR", [toc | 3, 2] + data + data),
                ("code 3 VBR with padding", [toc | 3, 0xC2, 3, UInt8(data.count)] + data + data + [0, 0, 0]),
            ]
            for (name, q) in framings {
                let n = q.withUnsafeBufferPointer { decoder.decodeFrame($0.baseAddress, length: q.count, into: &pcm, frameSize: 2 * frame) }
                XCTAssertEqual(n, 2 * frame, "\(name) is a valid packet")
                XCTAssertEqual(carries(q), carries(p), name)
            }
        }
    }

    func testTruncatedAndEmptyPacketsCarryNothingAndDoNotTrap() {
        for p: [UInt8] in [[], [0x40], [0x42], [0x42, 0xFF], [0x43, 0x00, 0x80], [0x43, 0x42, 0xFF, 0xFF], [0x43, 0x82, 0xFC]] {
            XCTAssertFalse(carries(p), "\(p)")
        }
    }
}
