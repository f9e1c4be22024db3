import Codec
import Frames
import Posix
import RealTime
import RTP

/// One microphone frame in, one RTP/Opus packet out to every peer (unicast addresses and/or
/// multicast groups). Runs on the network thread; buffers are allocated once, the peer list large
/// enough for any `MediaRoutes`.
public final class MediaSender: @unchecked Sendable {
    // @unchecked: used by one sending thread; statistics are atomics.
    public let frameSize: Int
    public private(set) var rtp: RTPSender
    public let packetsSent = Counter()
    public let bytesSent = Counter()
    public let sendErrors = Counter()
    public let encodeErrors = Counter()
    /// Frames not sent because the encoder found silence (DTX).
    public let silentFrames = Counter()
    /// Packets that carry FEC for the frame before them. libopus adds it only when the bitrate
    /// leaves room at the expected loss, so this shows whether `fec = true` has any effect.
    public let fecCarried = Counter()
    /// Frames not sent because SRTP refused to protect them (e.g. a key used up).
    public let protectErrors = Counter()
    /// Our stream's SSRC, readable from any thread (for the keys of our outbound SRTP session).
    public let ssrc: UInt32

    private let encoder: OpusEncoder
    private let socket: UDPSocket
    private let peers: EndpointList
    private let packet: UnsafeMutableRawBufferPointer
    private var talking = false
    /// Set while a call's media is protected: every packet goes out as SRTP.
    private var protection: SRTPSession?

    /// `protection`: SRTP from the first packet (calls set it with their routes instead).
    public init(encoder: OpusEncoder, rtp: RTPSender, socket: UDPSocket, peers: [IPv4Endpoint], frameSize: Int,
                protection: SRTPSession? = nil) {
        self.protection = protection
        self.encoder = encoder
        self.rtp = rtp
        ssrc = rtp.ssrc
        self.socket = socket
        self.peers = EndpointList(peers, capacity: max(peers.count, MediaRoutes.maxEndpoints))
        self.frameSize = frameSize
        packet = .allocate(byteCount: 1500, alignment: 4)
    }

    deinit {
        packet.deallocate()
    }

    public var hasPeers: Bool { peers.count > 0 }

    /// Samples the encoder delays the audio by (its look-ahead).
    public var encoderLookahead: Int { encoder.lookahead }

    /// Encodes and sends one frame. The first packet of a talk spurt carries the marker bit.
    /// Returns the packet length, 0 for a DTX frame not sent, or a negative Opus error code.
    @discardableResult
    public func send(_ pcm: UnsafePointer<Int16>) -> Int {
        let headerLength = RTPHeader.fixedLength  // no CSRCs, no extension
        let payload = packet.baseAddress!.assumingMemoryBound(to: UInt8.self) + headerLength
        let capacity = packet.count - headerLength - SRTPSession.trailerRoom
        let encoded = encoder.encode(pcm, frameSize: frameSize, into: payload, capacity: capacity)
        guard encoded > 0 else {
            encodeErrors.increment()
            return encoded
        }
        if encoded <= 2 && encoder.dtx {
            // With DTX the encoder says "nothing worth sending" with a 1-2 byte packet (RFC 7587 3.1.3).
            rtp.skip(frameSamples: UInt32(frameSize))
            talking = false
            silentFrames.increment()
            return 0
        }
        if OpusPacket.carriesFEC(UnsafeRawBufferPointer(start: payload, count: encoded)) { fecCarried.increment() }
        let header = rtp.next(frameSamples: UInt32(frameSize), marker: !talking)
        talking = true
        guard case .success(headerLength) = RTPWriter.writeHeader(header, into: packet) else {
            encodeErrors.increment()
            return -1
        }
        var length = headerLength + encoded
        if let protection {
            length = protection.protect(packet.baseAddress!, length: length)
            guard length > 0 else {
                protectErrors.increment()
                return length
            }
        }
        let datagram = UnsafeRawBufferPointer(start: packet.baseAddress, count: length)
        for i in 0..<peers.count {
            switch socket.send(datagram, to: peers[i]) {
            case .success(let n): packetsSent.increment(); bytesSent.increment(by: n)
            case .failure: sendErrors.increment()
            }
        }
        return datagram.count
    }

    /// `frames` of capture time were lost (an audio restart): the timestamp jumps over them, as
    /// over a DTX silence, and the next packet starts a talk spurt (RFC 3550 5.1).
    public func skipLostFrames(_ frames: Int) {
        guard frames > 0 else { return }
        rtp.skip(frameSamples: UInt32(truncatingIfNeeded: frames &* frameSize))
        talking = false
    }

    /// The next packet starts a new talk spurt.
    public func endTalkSpurt() { talking = false }

    /// Network thread, between frames: sends to `newPeers` from the next frame on, protected by
    /// `session` when set, which starts a talk spurt (a receiver that joins now needs the marker
    /// to start its playout cleanly).
    func replacePeers(with newPeers: EndpointList, protection session: SRTPSession?) {
        peers.replace(with: newPeers)
        protection = session
        talking = false
    }
}
