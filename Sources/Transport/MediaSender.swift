import AudioPipeline
import RealTime
import RTP

/// One microphone frame in, one RTP/Opus packet out to every peer (unicast addresses, or one
/// multicast group). Runs on the network send thread; buffers are allocated once.
public final class MediaSender: @unchecked Sendable {
    // @unchecked: used by one sending thread; statistics are atomics.
    public let frameSize: Int
    public private(set) var rtp: RTPSender
    public let packetsSent = Counter()
    public let bytesSent = Counter()
    public let sendErrors = Counter()
    public let encodeErrors = Counter()

    private let encoder: OpusEncoder
    private let socket: UDPSocket
    private let peers: [UDPEndpoint]
    private let packet: UnsafeMutableRawBufferPointer
    private var talking = false

    public init(encoder: OpusEncoder, rtp: RTPSender, socket: UDPSocket, peers: [UDPEndpoint], frameSize: Int) {
        self.encoder = encoder
        self.rtp = rtp
        self.socket = socket
        self.peers = peers
        self.frameSize = frameSize
        packet = .allocate(byteCount: 1500, alignment: 4)
    }

    deinit { packet.deallocate() }

    /// Encodes and sends one frame. The first packet of a talk spurt carries the marker bit.
    /// Returns the packet length, or a negative Opus error code.
    @discardableResult
    public func send(_ pcm: UnsafePointer<Int16>) -> Int {
        let header = rtp.next(frameSamples: UInt32(frameSize), marker: !talking)
        talking = true
        guard case let .success(headerLength) = RTPWriter.writeHeader(header, into: packet) else {
            encodeErrors.increment()
            return -1
        }
        let payload = packet.baseAddress!.assumingMemoryBound(to: UInt8.self) + headerLength
        let encoded = encoder.encode(pcm, frameSize: frameSize, into: payload, capacity: packet.count - headerLength)
        guard encoded > 0 else {
            encodeErrors.increment()
            return encoded
        }
        let datagram = UnsafeRawBufferPointer(start: packet.baseAddress, count: headerLength + encoded)
        for i in 0..<peers.count {
            let n = socket.send(datagram, to: peers[i])
            if n < 0 { sendErrors.increment() } else { packetsSent.increment(); bytesSent.increment(by: n) }
        }
        return datagram.count
    }

    /// The next packet starts a new talk spurt (after mute or silence).
    public func endTalkSpurt() { talking = false }
}
