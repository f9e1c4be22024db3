@testable import IntercomDaemon
import AudioPipeline
import Codec
import Posix
import TestSupport
import Transport
import XCTest

/// The loop canceller's reference through the daemon's own parts: the sender built by
/// `MicrophoneToWire` (real Opus, a real UDP socket) decodes each packet again into the chain's
/// `sentBack` ring, and the chain places it at the captured frame it was made from.
final class SentDecoderTests: XCTestCase {
    func testEachSentFrameComesBackDecodedAndInStep() throws {
        var config = DaemonConfig()
        config.security.mode = .lab  // a fixed stream: clear text
        config.echo.loopCanceller = true
        let chain = try MicrophoneToWire.microphoneChain(config)
        let loopback = try IPv4Endpoint.parseAddress("127.0.0.1")
        let receiver = try UDPSocket(bind: IPv4Endpoint(address: loopback, port: 0))
        let socket = try UDPSocket(bind: IPv4Endpoint(address: loopback, port: 0))
        config.network.peers = [receiver.local.description]
        let sender = try MicrophoneToWire.sender(config, socket: socket, chain: chain)
        let frame = chain.frameSize
        let speech = try Speech.naturalPhraseSamples(peakDBFS: -12).joined().map { $0 }
        var captured = [Int16](repeating: 0, count: frame), out = captured, back = captured
        var matched = 0.0, energy = 0.0
        let reference = try OpusDecoder(sampleRate: 48_000)
        var packet = [UInt8](repeating: 0, count: 1500)
        for t in 0..<200 {
            for i in 0..<frame { captured[i] = speech[t * frame + i] }
            captured.withUnsafeBufferPointer { c in out.withUnsafeMutableBufferPointer { chain.process(captured: c.baseAddress!, into: $0.baseAddress!) } }
            chain.handedOn()
            XCTAssertGreaterThan(out.withUnsafeBufferPointer { sender.send($0.baseAddress!) }, 0)
            // What the far end decodes from the datagram, against what came back to the chain.
            let n = packet.withUnsafeMutableBytes { receiver.receive(into: $0)?.count ?? 0 }
            XCTAssertGreaterThan(n, 12)
            _ = packet.withUnsafeBufferPointer { p in back.withUnsafeMutableBufferPointer {
                reference.decodeFrame(p.baseAddress! + 12, length: n - 12, into: $0.baseAddress!, frameSize: frame) } }
            var returned = [Int16](repeating: 0, count: frame)
            XCTAssertTrue(returned.withUnsafeMutableBufferPointer { chain.sentBack!.read(into: $0.baseAddress!, count: frame) },
                          "one frame back per frame sent")
            for i in 0..<frame {
                matched += Double(Int(returned[i]) - Int(back[i])) * Double(Int(returned[i]) - Int(back[i]))
                energy += Double(back[i]) * Double(back[i])
            }
            // Give it back for the chain to place (the test read it to compare).
            _ = returned.withUnsafeBufferPointer { chain.sentBack!.write($0.baseAddress!, count: frame) }
        }
        XCTAssertGreaterThan(energy, 0)
        XCTAssertEqual(matched, 0, "the frame handed back is what the far end decodes, bit for bit")
        XCTAssertEqual(chain.unmatchedSentFrames.load, 0)
        XCTAssertEqual(chain.loopCanceller!.lateReferenceFrames.load, 0, "every frame came back in time for its first use")
        XCTAssertEqual(sender.sentDecoder?.dropped.load, 0)
    }
}
