import AudioPipeline
import Codec
import IntercomConfig
import IntercomDaemon
import Posix
import RTP
import SignalTools
import TestSupport
import Transport
import XCTest

/// Media over real UDP sockets on loopback: Opus in RTP, unicast and multicast.
final class TransportTests: XCTestCase {
    private let frame = 480
    private let speechLike = Signals.toInt16(Signals.chirp(from: 200, to: 4000, duration: 1, sampleRate: 48000, amplitude: 0.5))

    /// Receives whatever arrives within `seconds` and parses it as RTP.
    private func receivePackets(_ socket: UDPSocket, expected: Int, seconds: Double = 2) -> [(RTPPacket, [UInt8])] {
        var out: [(RTPPacket, [UInt8])] = []
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 2048, alignment: 4)
        defer { buffer.deallocate() }
        let deadline = Date().addingTimeInterval(seconds)
        while out.count < expected, Date() < deadline {
            guard socket.waitReadable(milliseconds: 50), let (n, _) = socket.receive(into: buffer) else { continue }
            let bytes = Array(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            let parsed = bytes.withUnsafeBytes { RTPParser.parse($0, expectedPayloadType: 96) }
            if case let .success(p) = parsed { out.append((p, bytes)) }
        }
        return out
    }

    private func sendAll(_ sender: MediaSender) {
        speechLike.withUnsafeBufferPointer { pcm in
            for f in 0..<(speechLike.count / frame) { sender.send(pcm.baseAddress! + f * frame) }
        }
    }

    func testUnicastOpusRTPArrivesInOrderDecodesToTheSentAudioAndIsMarkedEF() throws {
        let receiver = try UDPSocket(bind: .loopback(port: 0))
        let socket = try UDPSocket(bind: .loopback(port: 0))
        try socket.setDSCP(46)
        XCTAssertEqual(socket.dscp, 46, "voice is marked expedited forwarding")
        let sender = MediaSender(encoder: try OpusEncoder(.default), rtp: try RTPSender(payloadType: 96), socket: socket,
                                 peers: [receiver.local], frameSize: frame)
        sendAll(sender)
        let count = speechLike.count / frame
        let packets = receivePackets(receiver, expected: count)
        XCTAssertEqual(packets.count, count)
        XCTAssertEqual(sender.packetsSent.load, count)
        guard let first = packets.first?.0 else { return }
        XCTAssertTrue(first.header.marker, "a talk spurt starts with the marker bit")
        for (k, (p, _)) in packets.enumerated() {
            XCTAssertEqual(p.header.sequence, first.header.sequence &+ UInt16(k))
            XCTAssertEqual(p.header.timestamp, first.header.timestamp &+ UInt32(k * frame))
            XCTAssertEqual(p.header.ssrc, first.header.ssrc)
            if k > 0 { XCTAssertFalse(p.header.marker) }
        }
        // Decode and compare with what was sent.
        let decoder = try OpusDecoder(sampleRate: 48000)
        var decoded: [Int16] = []
        var pcm = [Int16](repeating: 0, count: frame)
        for (p, bytes) in packets {
            let n = bytes.withUnsafeBytes { raw in
                decoder.decode(raw.baseAddress!.assumingMemoryBound(to: UInt8.self) + p.payloadOffset, length: p.payloadLength,
                               into: &pcm, frameSize: frame)
            }
            XCTAssertEqual(n, frame)
            decoded += pcm
        }
        let found = try XCTUnwrap(Correlation.findDelay(reference: Signals.toFloat(speechLike), in: Signals.toFloat(decoded), maxLag: 1000))
        XCTAssertGreaterThan(found.peak, 0.9, "decoded audio matches the sent audio")
    }

    func testMulticastReachesTwoReceiversOnLoopback() throws {
        let group = try XCTUnwrap(IPv4Endpoint("239.255.0.17:0"))
        let first = try UDPSocket(bind: IPv4Endpoint(address: 0, port: 0), reuse: true)
        let port = first.local.port
        let second = try UDPSocket(bind: IPv4Endpoint(address: 0, port: port), reuse: true)
        for r in [first, second] { try r.joinMulticast(group: group.address, interface: 0x7F00_0001) }
        let socket = try UDPSocket(bind: .loopback(port: 0))
        // On one host the receivers are local, so loopback must be on here (terminals keep it off).
        try socket.configureMulticastSending(interface: 0x7F00_0001, ttl: 1, loopback: true)
        let sender = MediaSender(encoder: try OpusEncoder(.default), rtp: try RTPSender(payloadType: 96), socket: socket,
                                 peers: [IPv4Endpoint(address: group.address, port: port)], frameSize: frame)
        sendAll(sender)
        let count = speechLike.count / frame
        XCTAssertEqual(receivePackets(first, expected: count).count, count)
        XCTAssertEqual(receivePackets(second, expected: count).count, count)
    }

    func testSendingAFrameDoesNotAllocate() throws {
        final class Box: @unchecked Sendable { var allocations: UInt64 = 0; var error: Error? }
        let box = Box()
        let receiver = try UDPSocket(bind: .loopback(port: 0))
        let sender = MediaSender(encoder: try OpusEncoder(.default), rtp: try RTPSender(payloadType: 96),
                                 socket: try UDPSocket(bind: .loopback(port: 0)), peers: [receiver.local], frameSize: frame)
        let pcm = speechLike
        let t = Thread {
            AllocationCounter.trackCurrentThread()
            pcm.withUnsafeBufferPointer { p in
                sender.send(p.baseAddress!)  // warm-up
                AllocationCounter.arm()
                for f in 1..<(pcm.count / 480) { sender.send(p.baseAddress! + f * 480) }
                AllocationCounter.disarm()
            }
            box.allocations = AllocationCounter.count
        }
        t.start()
        while !t.isFinished { usleep(1000) }
        XCTAssertEqual(box.allocations, 0, AllocationCounter.callers.joined(separator: "; "))
    }
}
