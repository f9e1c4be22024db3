import AudioPipeline
import Codec
import Control
import Foundation
import Frames
import Jitter
import Logging
import Posix
import RealTime
import RTP
import Transport

/// The daemon's network side, built from `[network]`, `[opus]` and `[jitter]`: the media socket,
/// the sender, one remote-stream slot per `max_streams` (each a mixer input), and the network
/// thread that drives them.
final class NetworkMedia: Service, @unchecked Sendable {
    // @unchecked: built on the main thread; afterwards the loop's state is the network thread's.
    var serviceName: String { "network" }
    let streams: [RemoteStream]
    let doorbell: Doorbell
    private(set) var loop: NetworkLoop?
    private(set) var socket: UDPSocket?
    private var thread: WorkerThread?
    private let config: DaemonConfig
    private let log: Logger
    /// The Opus encoder's look-ahead in samples, once `open` made it.
    private(set) var encoderLookahead = 0

    /// Creates the stream slots; their mixer inputs must go into the mixer before `open`.
    init(config: DaemonConfig, logger: Logger, playoutLead: PlayoutLead) throws {
        self.config = config
        log = logger
        doorbell = try Doorbell()
        streams = try WireToSpeaker.streamSlots(config, playoutLead: playoutLead)
    }

    var mixerInputs: [MixerInput] { streams.map(\.input) }

    /// Opens the socket and the encoder; `tee` receives a copy of each microphone frame.
    func open(engine: AudioEngine, tee: SampleRing?) throws {
        let n = config.network, o = config.opus, a = config.audio
        let peers = n.peers.compactMap(IPv4Endpoint.init)
        // The configuration was checked: these parse.
        let groups = n.multicastGroups.map { IPv4Endpoint(address: try! IPv4Endpoint.parseAddress($0), port: UInt16(n.listenPort)) }
        let interface = try! IPv4Endpoint.parseAddress(n.multicastInterface)
        let bind = IPv4Endpoint(address: try! IPv4Endpoint.parseAddress(n.bindAddress), port: UInt16(n.listenPort))
        let socket = try UDPSocket(bind: bind, reuse: !groups.isEmpty)
        try socket.setDSCP(UInt8(n.dscp))
        // A caller with caller_voice = "multicast" sends to the group (interface, TTL, loopback as configured).
        let callsMulticast = config.callsEnabled && config.calls.callerVoice == .multicast
        if peers.contains(where: \.isMulticast) || !groups.isEmpty || callsMulticast {
            try socket.configureMulticastSending(interface: interface, ttl: UInt8(n.multicastTtl), loopback: n.multicastLoopback)
        }
        for g in groups { try socket.joinMulticast(group: g.address, interface: interface) }

        let sender = try MicrophoneToWire.sender(config, socket: socket, chain: engine.microphoneChain)
        encoderLookahead = sender.encoderLookahead
        let receiver = WireToSpeaker.receiver(config, slots: streams, ownSSRC: sender.ssrc, audioRunning: engine.stats.running)
        loop = try NetworkLoop(socket: socket, sender: sender, receiver: receiver, microphone: engine.microphone,
                           doorbell: doorbell, frameSize: a.framesPerPeriod, tee: tee,
                           captureGaps: engine.stats.captureGapFrames)
        self.socket = socket
        log.info("""
            network: receiving on \(socket.local)\(groups.isEmpty ? "" : " and groups \(n.multicastGroups.joined(separator: ","))"), \
            sending to \(peers.isEmpty ? "nobody" : peers.map(\.description).joined(separator: ",")) as SSRC \(String(format: "%08x", sender.ssrc)), \
            opus \(o.application) \(o.bitrate) bit/s\(o.fec ? " FEC" : "")\(o.dtx ? " DTX" : ""), \
            encoder look-ahead \(String(format: "%.1f", Double(encoderLookahead) * 1000 / Double(a.sampleRate))) ms, \
            jitter \(formatNumber(config.jitter.minDelayMs))-\(formatNumber(config.jitter.maxDelayMs)) ms, up to \(n.maxStreams) streams
            """)
    }

    func start() throws(SystemError) {
        guard let loop else { return }
        let t = WorkerThread(name: "intercom-net") { loop.run() }
        try t.start(priority: Int32(config.network.priority))
        if case let .normal(reason) = t.scheduling, config.network.priority > 0 {
            log.warning("network thread: real-time priority \(config.network.priority) refused (\(reason)); normal scheduling")
        }
        thread = t
    }

    func stop() {
        loop?.requestStop()
        thread?.join()
        thread = nil
    }

    /// The streams being played now, read from their atomic counters (any thread).
    /// The remote-stream slots the audio thread mixes now.
    private var playing: [RemoteStream] { streams.filter { $0.input.handOff?.isActive == true } }

    func mediaStreams() -> [MediaStream] {
        playing.map { s in
            let j = s.jitter.statistics
            return MediaStream(source: s.sourceDescription, received: max(0, j.received.load - s.receivedAtStart.load),
                               played: max(0, j.played.load - s.playedAtStart.load), delayMs: j.currentDelayMs.load)
        }
    }

    /// The counters for `stats`; nil without a network. Stream counters are the slot's since start,
    /// as in the statistics log.
    func statistics() -> DaemonStatistics.Network? {
        guard let loop else { return nil }
        let sender = loop.sender, receiver = loop.receiver
        let playing = playing.map { s in
            let j = s.jitter.statistics
            return DaemonStatistics.Stream(
                ssrc: UInt32(truncatingIfNeeded: s.currentSSRC.load), source: s.sourceDescription, delayMs: j.currentDelayMs.load, targetMs: j.targetDelayMs.load,
                received: j.received.load, played: j.played.load, concealed: j.lost.load, fecRecovered: j.fecRecovered.load,
                fecMissed: j.fecMissed.load, late: j.late.load, underruns: j.underruns.load, cutBacks: j.cutBacks.load,
                inserted: j.inserted.load, dropped: j.dropped.load, newTimelines: j.newTimelines.load,
                driftPPM: j.driftPPM.load, trimPPM: j.driftTrimPPM.load, slewedMs: j.slewedMs.load, pauseJumpedMs: j.pauseJumpedMs.load, pathShiftMs: j.pathShiftMs.load,
                playoutDelayMs: j.playoutDelayMs.load, readerHeldUp: j.readerHeldUp.load, arrivalStalls: j.arrivalStalls.load)
        }
        let o = config.opus
        let opus = sender.map { _ in
            DaemonStatistics.OpusEncoding(application: o.application, bitrate: o.bitrate, fec: o.fec, dtx: o.dtx,
                                          lookaheadMs: Double(encoderLookahead) * 1000 / Double(config.audio.sampleRate))
        }
        let r = receiver?.statistics
        let srtp = DaemonStatistics.SRTP(authenticated: r?.authenticated.load ?? 0, unauthenticated: r?.unauthenticated.load ?? 0,
                                         replayed: r?.replayed.load ?? 0, failed: r?.unprotectFailed.load ?? 0,
                                         protectErrors: sender?.protectErrors.load ?? 0)
        let sent: Int = sender?.packetsSent.load ?? 0
        let sendErrors: Int = sender?.sendErrors.load ?? 0
        let fecCarried: Int = sender?.fecCarried.load ?? 0
        return DaemonStatistics.Network(
            ssrc: sender?.ssrc, opus: opus, sent: sent, sentPeakDBFS: sender?.peakLastSecondDBFS.load,
            sendErrors: sendErrors, fecCarried: fecCarried,
            datagrams: r?.datagrams.load ?? 0, accepted: r?.accepted.load ?? 0, malformed: r?.malformedTotal ?? 0,
            notRouted: r?.notRouted.load ?? 0, srtp: srtp, streams: playing)
    }

    /// One line for the statistics log: sending, receiving, and each active stream.
    func summary() -> String {
        guard let loop else { return "network: off" }
        var parts: [String] = []
        if let s = loop.sender {
            parts.append("sent=\(s.packetsSent.load) (\(s.bytesSent.load) B, dtx_silent=\(s.silentFrames.load), fec_carried=\(s.fecCarried.load), errors=\(s.sendErrors.load), srtp_errors=\(s.protectErrors.load))")
        }
        if let r = loop.receiver {
            let st = r.statistics, t = r.table
            parts.append("received=\(st.accepted.load)/\(st.datagrams.load) malformed=\(st.malformedTotal)[\(st.malformedSummary)] own=\(st.ownPackets.load) queue_full=\(st.queueFull.load) audio_stopped=\(st.audioStopped.load) not_routed=\(st.notRouted.load)")
            parts.append("srtp authenticated=\(st.authenticated.load) unauthenticated=\(st.unauthenticated.load) replayed=\(st.replayed.load) failed=\(st.unprotectFailed.load)")
            parts.append("streams active=\(t.active.load) started=\(t.started.load) evicted=\(t.evicted.load) refused=\(t.refused.load) probation=\(t.probation.load)")
            for s in playing {
                let j = s.jitter.statistics
                parts.append(String(
                    format: "[%08x from %@: delay=%.1f target=%.1f ms received=%d played=%d concealed=%d fec=%d fec_missed=%d late=%d underruns=%d inserted=%d dropped=%d cut_backs=%d stalls=%d silence=%d rebuffers=%d decode_errors=%d new_timelines=%d drift=%.0fppm trim=%.0fppm slewed=%.1fms pause_jumped=%.1fms path_shift=%.1fms]",
                    s.currentSSRC.load, s.sourceDescription, j.currentDelayMs.load, j.targetDelayMs.load,
                    j.received.load, j.played.load, j.lost.load, j.fecRecovered.load, j.fecMissed.load, j.late.load, j.underruns.load,
                    j.inserted.load, j.dropped.load, j.cutBacks.load, j.consumerStalls.load, j.silenceFrames.load, j.rebuffers.load, j.decodeErrors.load, j.newTimelines.load, j.driftPPM.load, j.driftTrimPPM.load, j.slewedMs.load, j.pauseJumpedMs.load, j.pathShiftMs.load))
            }
        }
        return "network: " + parts.joined(separator: " ")
    }
}
