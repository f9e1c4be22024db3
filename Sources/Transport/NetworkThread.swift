import Codec
import Frames
import Glibc
import Jitter
import Posix
import RTP
import RealTime

// The network thread, top to bottom: its loop (`NetworkLoop`), the sending path (a microphone
// frame → `MediaSender` → each peer) and the receiving path (a datagram → `MediaReceiver` →
// `StreamTable` → the stream's jitter-buffer queue). One file so the whole path on this thread
// reads in order, the way trx's and speexclient's single loop does.

/// The network thread's body: one `poll` over the microphone doorbell, the routes doorbell and
/// the media socket. A rung microphone doorbell means frames are waiting: each is encoded and sent
/// at once. A readable socket is drained, every datagram stamped with its arrival time and handed
/// to the receiver. Routes posted by another thread are applied between packets; idle streams are
/// evicted on the way. Nothing here allocates per frame, packet or route change.
public final class NetworkLoop: @unchecked Sendable {
    // @unchecked: all state belongs to the network thread; `stopRequest`, the counters and the
    // mailbox are made for other threads.
    public let sender: MediaSender?
    public let receiver: MediaReceiver?
    /// Set by `requestStop`; its bell wakes the loop at once.
    public let stopRequest: StopSignal
    /// Microphone frames read but not sent (no peers, or sending off).
    public let framesNotSent = Counter()
    /// Multicast joins and leaves the system refused while applying routes.
    public let membershipErrors = Counter()
    /// Route sets the network thread has applied (`post`).
    public var appliedRoutes: Int { routesApplied.load }

    private let socket: UDPSocket
    private let microphone: SampleRing
    private let doorbell: Doorbell
    private let routes = RoutesMailbox()
    private let routesDoorbell: Doorbell
    private let routesApplied = Counter()
    /// Multicast groups joined for routes (not those joined on the socket before).
    private let joined = EndpointList(capacity: MediaRoutes.maxEndpoints)
    /// Gets a copy of every microphone frame when set (local-mode recording).
    private let tee: SampleRing?
    private let frameSize: Int
    /// The audio engine's count of capture frames lost at restarts (`EngineStats.captureGapFrames`).
    private let captureGaps: Counter?
    private var captureGapsSent = 0
    private let frame: UnsafeMutablePointer<Int16>
    private let datagram: UnsafeMutableRawBufferPointer

    /// Sends to `sender`'s peers and takes datagrams from any source until routes are posted.
    public init(socket: UDPSocket, sender: MediaSender?, receiver: MediaReceiver?, microphone: SampleRing,
                doorbell: Doorbell, frameSize: Int, tee: SampleRing? = nil, captureGaps: Counter? = nil) throws(SystemError) {
        routesDoorbell = try Doorbell()
        stopRequest = try StopSignal()
        self.captureGaps = captureGaps
        self.socket = socket
        self.sender = sender
        self.receiver = receiver
        self.microphone = microphone
        self.doorbell = doorbell
        self.frameSize = frameSize
        self.tee = tee
        frame = .allocate(capacity: frameSize)
        frame.initialize(repeating: 0, count: frameSize)
        // Larger than any packet we accept; a bigger datagram is cut and then rejected by size.
        datagram = .allocate(byteCount: 4096, alignment: 8)
    }

    deinit {
        frame.deallocate()
        datagram.deallocate()
    }

    /// Any thread but the audio thread: from the next packet on, the microphone goes to
    /// `newRoutes.sendTo`, only `acceptFrom` is heard (nil: anyone; the streams of other sources
    /// are evicted) and the socket is a member of `joinGroups`. The newest routes always win: a
    /// set posted before the network thread took the previous one replaces it. Returns false,
    /// posting nothing, once the loop was asked to stop. Watch `appliedRoutes` to know when applied.
    @discardableResult
    public func post(_ newRoutes: MediaRoutes) -> Bool {
        let limit = MediaRoutes.maxEndpoints
        precondition(newRoutes.sendTo.count <= limit && (newRoutes.acceptFrom?.count ?? 0) <= limit
                     && newRoutes.joinGroups.count <= limit, "at most \(limit) endpoints per route list")
        precondition(newRoutes.protection == nil || newRoutes.acceptFrom != nil, "protected routes name their sources")
        guard !stopRequest.isSet else { return false }
        routes.post(newRoutes)
        routesDoorbell.ring()
        return true
    }

    /// Ends `run` at once (its stop signal's bell is among the descriptors it waits for).
    public func requestStop() { stopRequest.set() }

    /// Runs until `requestStop`.
    public func run() {
        var poller = Poller(capacity: 4)
        let microphoneRung = poller.add(doorbell.descriptor, read: true)
        let routesRung = poller.add(routesDoorbell.descriptor, read: true)
        let readable = poller.add(socket.descriptor, read: true)
        poller.add(stopRequest.bell.descriptor, read: true)
        var lastEviction = MonotonicClock.nanoseconds()
        applyPostedRoutes()  // posted before the thread started
        while !stopRequest.isSet {
            // 100 ms: idle streams are evicted even when nothing arrives.
            do { try poller.wait(timeoutMs: 100) } catch { usleep(10_000); continue }
            // Routes first: frames and datagrams that woke us with them already follow them.
            if poller.events(at: routesRung).any {
                routesDoorbell.drain()
                applyPostedRoutes()
            }
            if poller.events(at: microphoneRung).any {
                doorbell.drain()
                sendWaitingFrames()
            }
            if poller.events(at: readable).any { receiveWaitingDatagrams() }
            let now = MonotonicClock.nanoseconds()
            if now - lastEviction > 100_000_000, let receiver {
                receiver.table.evictIdle(now: now)
                lastEviction = now
            }
        }
    }

    /// Every whole microphone frame waiting in the ring goes out as one packet.
    private func sendWaitingFrames() {
        // Lost capture time is skipped before the frames now waiting: they were captured after
        // the restart, unless this thread fell behind by more than a batch (then the jump lands
        // a few frames early, which a receiver hears as the same gap).
        if let captureGaps, captureGaps.load != captureGapsSent {
            let lost = captureGaps.load
            sender?.skipLostFrames(lost - captureGapsSent)
            captureGapsSent = lost
        }
        while microphone.read(into: frame, count: frameSize) {
            tee?.write(frame, count: frameSize)
            if let sender, sender.hasPeers {
                sender.send(frame)
            } else {
                // The timestamp keeps pace with capture, so a later send starts after a gap.
                sender?.skipLostFrames(1)
                sender?.sentDecoder?.notSent()
                framesNotSent.increment()
            }
        }
    }

    private func applyPostedRoutes() {
        guard let r = routes.take() else { return }
        sender?.replacePeers(with: r.sendTo, protection: r.outbound)
        receiver?.replaceAccepted(any: r.acceptsAny, sources: r.acceptFrom, sessions: r.inbound, protected: r.outbound != nil)
        updateMemberships(r.joinGroups)
        routesApplied.increment()
    }

    /// Leaves the groups joined for earlier routes that `groups` lacks, then joins the new ones.
    private func updateMemberships(_ groups: EndpointList) {
        let interface = socket.multicastInterface
        var i = 0
        while i < joined.count {
            if groups.contains(address: joined[i].address) {
                i += 1
            } else {
                if case .failure = socket.setMembership(false, group: joined[i].address, interface: interface) { membershipErrors.increment() }
                joined.remove(at: i)
            }
        }
        for k in 0..<groups.count where !joined.contains(address: groups[k].address) {
            switch socket.setMembership(true, group: groups[k].address, interface: interface) {
            case .success: joined.append(groups[k])
            case .failure(.addressInUse): break  // joined on the socket before the routes: not ours to leave
            default: membershipErrors.increment()
            }
        }
    }

    private func receiveWaitingDatagrams() {
        let buffer = UnsafeMutableRawBufferPointer(datagram)
        while let (count, from) = socket.receive(into: buffer) {
            guard let receiver else { continue }
            receiver.handle(UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count]), from: from, arrival: MonotonicClock.nanoseconds())
        }
    }
}

// MARK: - Sending: one microphone frame to every peer

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
    /// The loudest sample handed to the encoder in the last whole second, dBFS (-120: silence):
    /// what the other terminals get after every stage of the microphone chain.
    public let peakLastSecondDBFS = Gauge(-120)
    private var windowPeak: Int32 = 0
    private var windowSamples = 0

    private let encoder: OpusEncoder
    private let socket: UDPSocket
    private let peers: EndpointList
    private let packet: UnsafeMutableRawBufferPointer
    private var talking = false
    /// Set while a call's media is protected: every packet goes out as SRTP.
    private var protection: SRTPSession?
    /// Gets every frame as sent (decoded again), or silence for one not sent: the loop canceller's reference.
    public let sentDecoder: SentDecoder?

    /// `protection`: SRTP from the first packet (calls set it with their routes instead).
    public init(encoder: OpusEncoder, rtp: RTPSender, socket: UDPSocket, peers: [IPv4Endpoint], frameSize: Int,
                protection: SRTPSession? = nil, sentDecoder: SentDecoder? = nil) {
        self.protection = protection
        self.sentDecoder = sentDecoder
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

    private func measurePeak(_ pcm: UnsafePointer<Int16>) {
        for i in 0..<frameSize { windowPeak = max(windowPeak, abs(Int32(pcm[i]))) }
        windowSamples += frameSize
        guard windowSamples >= encoder.sampleRate else { return }
        peakLastSecondDBFS.store(windowPeak == 0 ? -120 : 20 * log10(Double(windowPeak) / 32767))
        windowPeak = 0
        windowSamples = 0
    }

    /// Samples the encoder delays the audio by (its look-ahead).
    public var encoderLookahead: Int { encoder.lookahead }

    /// Encodes and sends one frame. The first packet of a talk spurt carries the marker bit.
    /// Returns the packet length, 0 for a DTX frame not sent, or a negative Opus error code.
    @discardableResult
    public func send(_ pcm: UnsafePointer<Int16>) -> Int {
        let headerLength = RTPHeader.fixedLength  // no CSRCs, no extension
        let payload = packet.baseAddress!.assumingMemoryBound(to: UInt8.self) + headerLength
        let capacity = packet.count - headerLength - SRTPSession.trailerRoom
        measurePeak(pcm)
        let encoded = encoder.encode(pcm, frameSize: frameSize, into: payload, capacity: capacity)
        var handedBack = false
        defer { if !handedBack { sentDecoder?.notSent() } }
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
        if let sentDecoder {  // before SRTP encrypts the payload in place
            sentDecoder.sent(payload, length: encoded)
            handedBack = true
        }
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

// MARK: - Receiving: one datagram to its stream

/// Datagram in, jitter buffer out: drops and counts datagrams from sources not routed to us,
/// parses RTP strictly, drops and counts what is malformed or ours, finds (or starts) the sender's
/// stream and queues the payload for the audio thread. Network thread only; allocates nothing per
/// packet or route change.
public final class MediaReceiver: @unchecked Sendable {
    // @unchecked: used by the network thread only; statistics are atomics.
    public let table: StreamTable
    public let statistics = ReceiveStatistics()
    public let payloadType: UInt8
    /// Our own sender's SSRC: packets carrying it are our own coming back.
    public let ownSSRC: UInt32?
    /// Set while the audio thread plays. Packets queued while it does not would all be played
    /// late at once when it (re)starts, and make the jitter buffer believe in a huge jitter.
    private let audioRunning: Flag?
    /// Sources taken: any (until routes say otherwise), or those in `accepted`.
    private var acceptsAny = true
    private let accepted = EndpointList(capacity: MediaRoutes.maxEndpoints)
    /// While protected, only SRTP is heard: each accepted source's packets are checked with its session.
    private var protected = false
    private let sessions = SessionList()

    public init(table: StreamTable, payloadType: UInt8, ownSSRC: UInt32?, audioRunning: Flag? = nil) {
        precondition(RTPParseError.allCases.count == 9, "update statIndex")
        self.table = table
        self.payloadType = payloadType
        self.ownSSRC = ownSSRC
        self.audioRunning = audioRunning
    }

    /// Takes one datagram; a protected one is decrypted in place (so `datagram` is mutable).
    @inline(__always)
    public func handle(_ received: UnsafeMutableRawBufferPointer, from source: IPv4Endpoint, arrival: UInt64) {
        statistics.datagrams.increment()
        let index = acceptsAny ? -1 : accepted.firstMatch(source: source)
        guard acceptsAny || index >= 0 else { statistics.notRouted.increment(); return }
        var datagram = UnsafeRawBufferPointer(received)
        if protected {
            guard let session = sessions[index], received.count > 0 else { statistics.unprotectFailed.increment(); return }
            let n = session.unprotect(received.baseAddress!, length: received.count)
            guard n > 0 else {
                switch Int32(-n) {
                case SRTPError.authenticationFailed: statistics.unauthenticated.increment()
                case SRTPError.replayed, SRTPError.tooOld: statistics.replayed.increment()
                default: statistics.unprotectFailed.increment()
                }
                return
            }
            statistics.authenticated.increment()
            datagram = UnsafeRawBufferPointer(rebasing: received[0..<n])
        }
        let packet: RTPPacket
        switch RTPParser.parse(datagram, expectedPayloadType: payloadType) {
        case .success(let p): packet = p
        case .failure(let reason):
            statistics.malformed[reason.statIndex].increment()
            return
        }
        let h = packet.header
        if h.ssrc == ownSSRC { statistics.ownPackets.increment(); return }
        if let audioRunning, !audioRunning.isSet { statistics.audioStopped.increment(); return }
        guard let stream = table.route(ssrc: h.ssrc, source: source, sequence: h.sequence, now: arrival) else { return }
        let queued = stream.jitter.queue.push(
            payload: packet.payload(in: datagram), sequence: h.sequence, timestamp: h.timestamp,
            marker: h.marker, arrivalNanos: arrival)
        if queued { statistics.accepted.increment() } else { statistics.queueFull.increment() }
    }

    /// Network thread, between packets: takes datagrams from any source, or only from `sources`
    /// (checked by SRTP with the matching entry of `sessions` when `protected`), and evicts at
    /// once the streams of sources no longer taken, so the mixer stops playing them.
    func replaceAccepted(any: Bool, sources: EndpointList, sessions newSessions: SessionList, protected isProtected: Bool) {
        acceptsAny = any
        accepted.replace(with: sources)
        sessions.replace(with: newSessions)
        protected = isProtected
        if !any { table.evict { !accepted.matches(source: $0) } }
    }
}

/// Remote streams told apart by SSRC and source address, in a fixed number of slots.
///
/// Network thread only. An unknown stream is on probation until two packets with consecutive
/// sequence numbers arrived (RFC 3550 A.1), so stray or forged one-off packets (an SSRC flood)
/// never reach the speaker; probation entries are few and recycled oldest first. A stream that
/// passes takes a free slot (reset, then handed to the audio thread); with every slot taken it is
/// refused and counted. So floods cost neither memory nor other streams' slots. A stream silent
/// for `idleTimeoutNanos` is evicted: the audio thread is asked to let go, and the slot is free
/// again once it has.
public final class StreamTable: @unchecked Sendable {
    // @unchecked: used by the network thread only; statistics are atomics.
    public let streams: [RemoteStream]
    public let idleTimeoutNanos: UInt64
    /// Streams started, evicted, and packets of new streams refused for want of a slot.
    public let started = Counter()
    public let evicted = Counter()
    public let refused = Counter()
    public let active = Counter()
    /// Packets of streams still on probation (dropped).
    public let probation = Counter()

    // The streams again as a plain buffer: Array iteration may allocate in debug builds.
    private let slots: UnsafeMutableBufferPointer<RemoteStream>
    private let candidates: UnsafeMutableBufferPointer<Candidate>

    /// A stream on probation: its last sequence number and when it was last seen.
    private struct Candidate {
        var ssrc: UInt32 = 0
        var source = IPv4Endpoint(address: 0, port: 0)
        var sequence: UInt16 = 0
        var seen: UInt64 = 0
        var used = false
    }

    public init(streams: [RemoteStream], idleTimeoutNanos: UInt64, probationEntries: Int = 16) {
        self.streams = streams
        self.idleTimeoutNanos = idleTimeoutNanos
        slots = .allocate(capacity: streams.count)
        _ = slots.initialize(from: streams)
        candidates = .allocate(capacity: probationEntries)
        candidates.initialize(repeating: Candidate())
    }

    deinit {
        slots.deinitialize().deallocate()
        candidates.deallocate()
    }

    /// The slot of the stream (`ssrc`, `source`); nil while it is on probation or when refused.
    @inline(__always)
    public func route(ssrc: UInt32, source: IPv4Endpoint, sequence: UInt16, now: UInt64) -> RemoteStream? {
        for i in 0..<slots.count {
            let s = slots[i]
            if s.phase == .active && s.ssrc == ssrc && s.source == source {
                s.lastArrival = now
                return s
            }
        }
        guard passesProbation(ssrc: ssrc, source: source, sequence: sequence, now: now) else {
            probation.increment()
            return nil
        }
        return start(ssrc: ssrc, source: source, now: now)
    }

    /// True when this packet follows the candidate's previous one; records it otherwise.
    private func passesProbation(ssrc: UInt32, source: IPv4Endpoint, sequence: UInt16, now: UInt64) -> Bool {
        var oldest = 0
        for i in 0..<candidates.count {
            if candidates[i].used && candidates[i].ssrc == ssrc && candidates[i].source == source {
                if sequence == candidates[i].sequence &+ 1 {
                    candidates[i].used = false
                    return true
                }
                candidates[i].sequence = sequence
                candidates[i].seen = now
                return false
            }
            if !candidates[i].used || (candidates[oldest].used && candidates[i].seen < candidates[oldest].seen) { oldest = i }
        }
        candidates[oldest] = Candidate(ssrc: ssrc, source: source, sequence: sequence, seen: now, used: true)
        return false
    }

    private func start(ssrc: UInt32, source: IPv4Endpoint, now: UInt64) -> RemoteStream? {
        reclaimReleased()
        for i in 0..<slots.count where slots[i].phase == .free {
            let s = slots[i]
            // The slot is ours: nobody reads the buffer, so it may be reset for the new stream.
            s.reset()
            s.ssrc = ssrc
            s.source = source
            s.lastArrival = now
            s.currentSSRC.store(Int(ssrc))
            s.currentSource.store(Int(source.address) << 16 | Int(source.port))
            s.receivedAtStart.store(s.jitter.statistics.received.load)
            s.playedAtStart.store(s.jitter.statistics.played.load)
            s.phase = .active
            s.handOff.activate()
            started.increment()
            active.increment()
            return s
        }
        refused.increment()
        return nil
    }

    /// Asks the audio thread to release streams idle for longer than the timeout; frees released ones.
    public func evictIdle(now: UInt64) {
        for i in 0..<slots.count where slots[i].phase == .active && now &- slots[i].lastArrival > idleTimeoutNanos {
            release(slots[i])
        }
        reclaimReleased()
    }

    /// Evicts the streams whose source `rejected` returns true for (the routes changed).
    func evict(where rejected: (IPv4Endpoint) -> Bool) {
        for i in 0..<slots.count where slots[i].phase == .active && rejected(slots[i].source) { release(slots[i]) }
        reclaimReleased()
    }

    /// Evicts every stream (e.g. when the peers change).
    public func evictAll() {
        for i in 0..<slots.count where slots[i].phase == .active { release(slots[i]) }
        reclaimReleased()
    }

    private func release(_ s: RemoteStream) {
        s.phase = .draining
        s.handOff.requestRelease()
        evicted.increment()
        active.increment(by: -1)
    }

    private func reclaimReleased() {
        for i in 0..<slots.count where slots[i].phase == .draining && slots[i].handOff.isFree {
            slots[i].phase = .free
            slots[i].currentSSRC.store(0)
            slots[i].currentSource.store(0)
        }
    }
}

/// One slot for a remote talker: its jitter buffer (with its own Opus decoder) and its place in
/// the mixer. Slots are created once, at start-up; the `StreamTable` hands them to streams as
/// they appear and takes them back when they go idle, so a flood of new streams costs no memory.
public final class RemoteStream: @unchecked Sendable {
    // @unchecked: identity fields are the network thread's; the jitter buffer belongs to whoever
    // owns the slot (see SlotHandOff); statistics are atomics.
    public let jitter: JitterBuffer
    public let input: MixerInput

    /// For the statistics reader: SSRC, source address and port of the current stream (0 when free).
    public let currentSSRC = Counter()
    public let currentSource = Counter()
    /// The jitter buffer's cumulative counters when the current stream took the slot: the
    /// stream's own counts are the differences.
    public let receivedAtStart = Counter()
    public let playedAtStart = Counter()

    // Network thread only.
    enum Phase { case free, active, draining }
    var phase = Phase.free
    var ssrc: UInt32 = 0
    var source = IPv4Endpoint(address: 0, port: 0)
    var lastArrival: UInt64 = 0

    private let resetSource: @Sendable () -> Void

    /// - Parameters:
    ///   - source: what the mixer reads: the jitter buffer, or a drift corrector around it.
    ///   - reset: returns `source` (and the jitter buffer) to the state of a new stream; called by
    ///     the network thread while it owns the slot.
    public init(jitter: JitterBuffer, source: any FrameSource, reset: @escaping @Sendable () -> Void) {
        self.jitter = jitter
        input = MixerInput(source: source, handOff: SlotHandOff())
        resetSource = reset
    }

    /// Network thread, while the slot is free: ready for a new stream.
    func reset() { resetSource() }

    var handOff: SlotHandOff { input.handOff! }

    /// The stream's source as "a.b.c.d:port", for logs.
    public var sourceDescription: String {
        let v = currentSource.load
        return IPv4Endpoint(address: UInt32(truncatingIfNeeded: v >> 16), port: UInt16(truncatingIfNeeded: v)).description
    }
}
