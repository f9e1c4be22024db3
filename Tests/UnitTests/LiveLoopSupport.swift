import AudioPipeline
import Codec
import IntercomConfig
import Foundation
import IntercomDaemon
import Jitter
import Posix
import RealTime
import RTP
import SignalTools
import TestSupport
import Transport
import XCTest

/// 10 ms at 48 kHz: the frame of the live network loop tests.
let liveFrame = 480

/// A network loop on its own thread with a sender, a receiver and four stream slots, as the
/// daemon builds it; the test thread stands in for the audio thread (microphone ring, doorbell).
final class LiveLoop: @unchecked Sendable {
    // @unchecked: immutable after init; the loop's state is its thread's.
    let socket: UDPSocket
    let streams: [RemoteStream]
    let table: StreamTable
    let receiver: MediaReceiver
    let loop: NetworkLoop
    private let microphone = SampleRing(minimumCapacity: liveFrame * 32)
    private let doorbell: Doorbell
    private let tone = Signals.toInt16(Signals.sine(frequency: 440, duration: 0.01, sampleRate: 48000, amplitude: 0.3))
    private let finished = Flag(false)

    init(peers: [IPv4Endpoint] = [], bind: IPv4Endpoint = .loopback(port: 0)) throws {
        let frame = liveFrame
        socket = try UDPSocket(bind: bind)
        try socket.configureMulticastSending(interface: 0x7F00_0001, ttl: 1, loopback: true)
        streams = try (0..<4).map { _ in
            let jitter = JitterBuffer(settings: JitterSettings(daemonConfig(frame: frame)), decoder: try OpusDecoder(sampleRate: 48000))
            return RemoteStream(jitter: jitter, source: jitter, reset: { jitter.reset() })
        }
        // Idle eviction far away: evictions seen here are the routes'.
        table = StreamTable(streams: streams, idleTimeoutNanos: 10_000_000_000)
        receiver = MediaReceiver(table: table, payloadType: 96, ownSSRC: nil)
        let sender = MediaSender(encoder: try OpusEncoder(.default), rtp: try RTPSender(payloadType: 96), socket: socket,
                                 peers: peers, frameSize: frame)
        doorbell = try Doorbell()
        loop = try NetworkLoop(socket: socket, sender: sender, receiver: receiver, microphone: microphone,
                               doorbell: doorbell, frameSize: frame)
        let loop = loop, finished = finished
        Thread {
            AllocationCounter.trackCurrentThread()
            loop.run()
            finished.set(true)
        }.start()
    }

    /// `frames` microphone frames, as the audio thread hands them over.
    func speak(frames: Int) {
        tone.withUnsafeBufferPointer { pcm in
            for _ in 0..<frames {
                microphone.write(pcm.baseAddress!, count: pcm.count)
                doorbell.ring()
            }
        }
    }

    /// Posts and waits until the network thread has applied the routes.
    func apply(_ routes: MediaRoutes) -> Bool {
        let before = loop.appliedRoutes
        return loop.post(routes) && eventually { self.loop.appliedRoutes > before }
    }

    var activeSources: [String] {
        streams.filter { $0.input.handOff!.isActive }.map(\.sourceDescription)
    }

    func stop() {
        loop.requestStop()
        while !finished.isSet { usleep(1000) }
    }
}

/// A remote room: Opus in RTP from its own socket.
final class Talker {
    let socket: UDPSocket
    private let sender: MediaSender
    private let tone = Signals.toInt16(Signals.sine(frequency: 1000, duration: 0.01, sampleRate: 48000, amplitude: 0.3))

    /// `key`: SRTP under this key (for its RTP stream's SSRC).
    init(to peer: IPv4Endpoint, key: [UInt8]? = nil) throws {
        socket = try UDPSocket(bind: .loopback(port: 0))
        try socket.configureMulticastSending(interface: 0x7F00_0001, ttl: 1, loopback: true)
        let rtp = try RTPSender(payloadType: 96)
        sender = MediaSender(encoder: try OpusEncoder(.default), rtp: rtp, socket: socket, peers: [peer], frameSize: liveFrame,
                             protection: try key.map { try SRTPSession(key: $0, direction: .outbound(ssrc: rtp.ssrc)) })
    }

    func talk(frames: Int) {
        tone.withUnsafeBufferPointer { pcm in
            for _ in 0..<frames { sender.send(pcm.baseAddress!) }
        }
    }
}

/// Polls `condition` until it holds or `seconds` passed.
func eventually(within seconds: Double = 1, _ condition: () -> Bool) -> Bool {
    let deadline = MonotonicClock.nanoseconds() + UInt64(seconds * 1e9)
    while !condition() {
        if MonotonicClock.nanoseconds() > deadline { return false }
        usleep(500)
    }
    return true
}
