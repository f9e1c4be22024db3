import Foundation
import Frames
import Posix
import RealTime

/// Audio-thread side of one remote stream: reorders received packets by sequence number,
/// decodes one frame per call and adapts its delay to the measured network jitter.
///
/// Three pieces: `ReorderStore` holds the packets, `TargetPolicy` turns their transit into the
/// target delay, and this type is the playout state machine that applies it, one named
/// `PlayoutOutcome` per step. The `DriftCorrector` reads it through `pull`, whose
/// `PlayoutReport` states the delay, the target and the buffer's own steps.
///
/// Threads: the network thread only pushes into `queue`; every other method runs on the audio
/// thread and neither allocates, locks nor logs (all storage is allocated in `init`).
/// `statistics` may be read from any thread.
///
/// One packet carries one frame of `settings.frameSize` samples.
///
/// Delay model. Each packet's transit `arrival - timestamp` (ns, unknown offset included) goes into a
/// window of the last ~2 s of packets (`DelayEstimator`). The *current delay* is how late the frame
/// being played is compared with the fastest transit in the window:
/// `now - (playout timestamp in ns + minimum transit)`. A packet arrives in time iff its relative
/// transit is at most the current delay, so the current delay is steered to the target.
///
/// Adaptation policy:
/// - desired = clamp(95th percentile of relative transit + frame/2 + margin, minDelay, maxDelay),
///   the margin being how far the 99th percentile reaches beyond the 95th plus a quarter frame,
///   at most half a frame (`TargetPolicy`); the percentiles leave out a stall's backlog (see `measure`);
/// - the target grows to `desired` immediately; it shrinks once per `shrinkIntervalMs` (3 s)
///   by half its distance to `desired` (at least a frame), and only in a pause of `shrinkPauseMs`
///   (1 s): the delay heard holds still while someone talks;
/// - current delay below target - frame/2 (- 3/4 frame under a drift corrector, see
///   `insertBelowTarget`): one frame is inserted at once (silence during a silence
///   gap, concealment during speech; nothing consumed). An underrun (overdue packet, nothing
///   buffered) also grows the delay: the frame is concealed and the packet played when it comes,
///   unless that would put the delay past target + frame with later packets at hand (a stall's
///   backlog): then it is late;
/// - current delay above target + one frame: a frame is dropped where it costs nothing audible: a
///   silence frame of a DTX gap (i.e. at the start of a talk spurt), a missing packet that would
///   otherwise be concealed (skipped instead), or a decoded frame that is a pause between words
///   (quieter than `quietLevelDBFS`; up to two per call). Speech frames are dropped too
///   (`dropInSpeech`), one per `shrinkIntervalMs / (excess in frames)`, at least
///   `minDropIntervalFrames` apart: after a long stall (the network held packets back, or nobody
///   read the buffer) the delay comes back in seconds, not minutes.
///   Fine, inaudible steering is left to the drift controller (`bufferLevelMs`, `currentDelayMs`).
/// - a silence of the network (over `resetGapMs`) after which the minimum transit has moved by more
///   than the jitter seen before is a new timeline (a sender's capture back from a stall): the
///   window before it is forgotten and the target learned again (`TargetPolicy`);
/// - FEC look-ahead: a lost frame can come back from the next packet's FEC only if that packet is
///   buffered when the frame is due, i.e. at two frames of delay or more. On a link with little
///   jitter the target is less; any lost frame, or one FEC repaired, keeps the desired delay at
///   two frames or more for `fecHoldMs`: a lossy link pays up to a frame, a clean one nothing, a
///   jittery one (already above two frames) nothing either. Any loss, not only one whose next
///   packet carried FEC: a sender puts no FEC into silence, and a link that loses packets in the
///   silence before a talk then has its look-ahead (its frame added in that silence) when the
///   talker starts, instead of growing by a frame in the middle of the talk. Not for a sender
///   whose speech has come without FEC (`fecAbsentAfterFrames`): the frame would buy nothing.
public final class JitterBuffer: FrameSource, @unchecked Sendable {
    // @unchecked: all mutable state is touched by the audio thread only (the queue is SPSC).
    public let settings: JitterSettings
    public let queue: PacketQueue
    public let statistics = JitterStatistics()
    /// Monotonic nanoseconds: the clock arrivals are stamped with (the drift corrector reads it too).
    public let clock: @Sendable () -> UInt64
    /// The speaker's offset from this read's nominal moment (see `PlayoutLead`).
    public let playoutLead: PlayoutLead

    private let decoder: FrameDecoder
    private var store: ReorderStore
    private var policy: TargetPolicy
    private let frameSize: Int
    private let frameNs: Int64
    private let maxDelayNs: Int64
    private let shrinkIntervalNs: Int64
    private let minDropIntervalNs: Int64
    /// Sum of squares over a frame below which it counts as a pause (from `quietLevelDBFS`).
    private let quietEnergy: Int64
    private let resetGapNs: Int64
    private let consumerStallNs: Int64
    /// A read or an arrival this much later than the one before is held up (`readerHeldUp`, `arrivalStalls`).
    public static let heldUpFrames: Int64 = 3
    private let heldUpNs: Int64
    private let underrunConcealFrames: Int
    /// A frame is inserted when the delay is this far below the target: half a frame, where
    /// whole frames are played as pulled; more under a drift corrector (`insertBelowTarget`).
    private var insertBelowNs: Int64
    private let scratch: UnsafeMutablePointer<Int16>

    // Timestamp extension (relative to the first packet ever).
    private var haveOrigin = false
    private var origin: UInt32 = 0
    private var newestExtended: Int64 = 0

    // The playout state machine.
    private enum Mode { case buffering, playing }
    private var mode = Mode.buffering
    /// Playing: the sequence to play next, and the extended timestamp of the frame about to be played.
    private var nextSeq: UInt16 = 0
    private var playout: Int64 = 0
    /// Frames of the current underrun.
    private var underrunRun = 0
    /// When the current delay started to exceed target + frame in continuous speech (-1: it does not).
    private var excessSince: Int64 = -1
    /// End (timestamp) of the samples the decoder still holds from a packet longer than a frame.
    private var carriedUntil: Int64 = .min
    /// Delay of the last frame played beyond the fastest transit, ns.
    private var currentDelayNs: Int64 = 0
    /// When `readFrame` last ran (0: not yet), and when the last packet was accepted.
    private var lastReadNanos: Int64 = 0
    private var lastAcceptedArrival: Int64 = 0
    /// The packet ingested last: its sequence, timestamp and arrival (arrival 0: none yet).
    private var lastIngested: (sequence: UInt16, timestamp: UInt32, arrival: UInt64) = (0, 0, 0)
    /// When the last frame above the quiet level was read: since then the stream is in a pause.
    private var quietSinceNs: Int64 = .min / 2
    /// Whether the last frame read was above the quiet level, and how many frames of speech in a
    /// row since then were followed by a packet without FEC for them (`fecAbsentAfterFrames`).
    private var lastFrameLoud = false
    private var speechWithoutFEC = 0
    /// The window's fastest transit at the last refresh (nil: none yet), and its moves (`pathShiftMs`).
    private var lastMinimumTransitNs: Int64?
    private var pathShiftNs: Int64 = 0

    /// The steps of the last read, and the one that produced its frame.
    public private(set) var outcomes = PlayoutOutcomes()
    public private(set) var lastOutcome = PlayoutOutcome.waiting

    /// - Parameter clock: monotonic nanoseconds, the clock the network thread stamps arrivals with
    ///   (tests pass a simulated one).
    /// - Parameter playoutLead: the mixer's, which the engine sets before each mix.
    public init(settings: JitterSettings, decoder: FrameDecoder, queue: PacketQueue? = nil,
                clock: @escaping @Sendable () -> UInt64 = { MonotonicClock.nanoseconds() },
                playoutLead: PlayoutLead = PlayoutLead()) {
        precondition(settings.frameSize > 0 && settings.sampleRate > 0)
        precondition(settings.minDelayMs >= 0 && settings.maxDelayMs >= settings.minDelayMs)
        self.settings = settings
        self.decoder = decoder
        self.clock = clock
        self.playoutLead = playoutLead
        frameSize = settings.frameSize
        frameNs = Int64(settings.frameSize) * 1_000_000_000 / Int64(settings.sampleRate)
        maxDelayNs = Int64(settings.maxDelayMs * 1e6)
        shrinkIntervalNs = Int64(settings.shrinkIntervalMs * 1e6)
        minDropIntervalNs = Int64(settings.minDropIntervalFrames) * frameNs
        let quietRMS = 32768 * exp(settings.quietLevelDBFS / 20 * log(10.0))
        quietEnergy = Int64(quietRMS * quietRMS * Double(settings.frameSize))
        resetGapNs = Int64(settings.resetGapMs * 1e6)
        consumerStallNs = Int64(settings.consumerStallMs * 1e6)
        heldUpNs = Self.heldUpFrames * Int64(settings.frameMs * 1e6)
        underrunConcealFrames = max(1, Int((settings.underrunConcealMs / settings.frameMs).rounded(.up)))
        insertBelowNs = frameNs / 2
        policy = TargetPolicy(settings: settings)

        let delayFrames = Int((settings.maxDelayMs / settings.frameMs).rounded(.up))
        var n = 1
        while n < max(settings.capacity, 2 * delayFrames + 8) { n <<= 1 }
        store = ReorderStore(capacity: n, maxPayloadBytes: settings.maxPayloadBytes)
        self.queue = queue ?? PacketQueue(slots: 64, maxPayloadBytes: settings.maxPayloadBytes)
        scratch = .allocate(capacity: settings.frameSize); scratch.initialize(repeating: 0, count: settings.frameSize)
        statistics.targetDelayMs.store(Double(policy.targetNs) / 1e6)
    }

    deinit { scratch.deallocate() }

    /// Effective reorder capacity (power of two).
    public var capacity: Int { store.capacity }

    /// Returns to the freshly initialised state for a new stream in the same slot: empties the queue
    /// and the reorder store, forgets the transit window, the timestamp base and the target, resets
    /// the gauges and the decoder. Counters keep counting.
    ///
    /// Precondition: neither the network thread (`queue.push`) nor the audio thread (`readFrame`)
    /// runs during the call; the caller hands the buffer over with atomics before and after.
    public func reset() {
        queue.reset()
        decoder.reset()
        store.reset()
        policy.reset()
        mode = .buffering
        nextSeq = 0
        playout = 0
        underrunRun = 0
        excessSince = -1
        carriedUntil = .min
        haveOrigin = false; origin = 0; newestExtended = 0
        lastAcceptedArrival = 0
        lastReadNanos = 0
        quietSinceNs = .min / 2
        lastMinimumTransitNs = nil
        lastFrameLoud = false
        speechWithoutFEC = 0
        currentDelayNs = 0
        outcomes = PlayoutOutcomes()
        lastOutcome = .waiting
        statistics.currentDelayMs.store(0)
        statistics.targetDelayMs.store(Double(policy.targetNs) / 1e6)
        statistics.bufferLevelMs.store(0)
        statistics.jitterPercentileMs.store(0)
        statistics.driftPPM.store(0)
    }

    /// Moves the edge below which a frame is inserted to `frames` under the target. A drift
    /// corrector pulls frames whole as its resampler needs them, so the delays the buffer sees
    /// spread over a frame above the age it holds; the edge sits below that spread. Call before
    /// the first read.
    public func insertBelowTarget(frames: Double) {
        insertBelowNs = Int64(frames * Double(frameNs))
    }

    // MARK: audio-thread state readable by the owner (audio thread)

    /// True once playout has started (false while buffering).
    public var isPlaying: Bool { mode == .playing }
    /// Target delay, ms.
    public var targetDelayMs: Double { Double(policy.targetNs) / 1e6 }
    /// Delay of the last frame played beyond the fastest transit, ms (see the type's comment).
    public var currentDelayMs: Double { Double(currentDelayNs) / 1e6 }
    /// Audio buffered beyond the playout point, ms.
    public var bufferLevelMs: Double {
        guard mode == .playing, store.haveAny else { return 0 }
        let ts = store.timestamp(store.highest)
        return Double(max(0, ts + Int64(frameSize) - playout)) * 1000 / Double(settings.sampleRate)
    }

    // MARK: reading frames

    /// Produces exactly one frame. Returns false when the frame is silence (buffering, DTX gap,
    /// long underrun).
    @discardableResult
    public func readFrame(into buffer: UnsafeMutablePointer<Int16>, count: Int) -> Bool {
        pull(into: buffer, count: count).audible
    }

    /// The moment a read stands for: now, moved by when the speaker will actually play the frame.
    @inline(__always)
    public func playoutNow() -> Int64 { Int64(bitPattern: clock()) &+ playoutLead.nanos }

    /// `readFrame`, telling the drift corrector what the read did to the delay.
    public func pull(into buffer: UnsafeMutablePointer<Int16>, count: Int) -> PlayoutReport {
        guard count == frameSize else {
            buffer.update(repeating: 0, count: count)
            return PlayoutReport(audible: false, quiet: true, playing: isPlaying, stepSamples: 0,
                                 delayMs: currentDelayMs, targetMs: targetDelayMs)
        }
        let now = playoutNow()
        let wasPlaying = mode == .playing
        let before = playout
        let corrections = statistics.inserted.load - statistics.dropped.load
        outcomes = PlayoutOutcomes()
        let consumerStalled = lastReadNanos > 0 && now - lastReadNanos > consumerStallNs
        // A stalled reader grew the delay by the time it did not read: a step like an underrun's
        // (the cut-back below, if any, is the buffer's own step back).
        let stalledSamples = consumerStalled ? Int((now - lastReadNanos - frameNs) * Int64(settings.sampleRate) / 1_000_000_000) : 0
        if lastReadNanos > 0 && now - lastReadNanos > heldUpNs { statistics.readerHeldUp.increment() }
        lastReadNanos = now
        drain()
        if policy.refresh(now: now, quietSince: quietSinceNs) {
            publishTarget()
            let minimum = policy.minimumTransitNs
            if let last = lastMinimumTransitNs, abs(minimum - last) >= frameNs / 4 {
                pathShiftNs += abs(minimum - last)
                statistics.pathShiftMs.store(Double(pathShiftNs) / 1e6)
            }
            lastMinimumTransitNs = minimum
        }
        if consumerStalled, mode == .playing, delay(now: now) > policy.targetNs + frameNs {
            // Nobody read for a while: that gap was heard already; do not drag its delay along.
            statistics.consumerStalls.increment()
            cutBack(now: now)
        }
        let audible = produce(into: buffer, now: now)
        let quiet = !audible || isQuiet(buffer)
        if !quiet { quietSinceNs = now }
        lastFrameLoud = !quiet
        statistics.currentDelayMs.store(Double(currentDelayNs) / 1e6)
        statistics.bufferLevelMs.store(bufferLevelMs)
        // Anything but one frame of playout advance is a step of the delay.
        let stepping = wasPlaying && mode == .playing
        let step = stepping ? frameSize - Int(playout - before) + stalledSamples : 0
        let correction = stepping ? (statistics.inserted.load - statistics.dropped.load - corrections) * frameSize : 0
        return PlayoutReport(audible: audible, quiet: quiet, playing: mode == .playing, stepSamples: step,
                             correctionSamples: correction, delayMs: currentDelayMs, targetMs: targetDelayMs,
                             floorMs: Double(policy.floorNs) / 1e6, floorTransitNs: policy.minimumTransitNs + policy.floorNs,
                             readerStalled: consumerStalled)
    }

    // MARK: ingest

    private func drain() {
        while let packet = queue.peek() {
            ingest(packet)
            queue.pop()
        }
    }

    private func ingest(_ p: QueuedPacket) {
        statistics.received.increment()
        let last = lastIngested
        if last.arrival > 0, p.sequence == last.sequence &+ 1, p.timestamp == last.timestamp &+ UInt32(frameSize),
           p.arrivalNanos > last.arrival, Int64(p.arrivalNanos - last.arrival) > heldUpNs {
            statistics.arrivalStalls.increment()
        }
        lastIngested = (p.sequence, p.timestamp, p.arrivalNanos)
        let state = store.state(of: p.sequence)
        if state == .filled { statistics.duplicates.increment(); return }
        guard store.fits(p.payload.count) else { statistics.overflow.increment(); return }

        switch mode {
        case .playing:
            let d = ReorderStore.distance(p.sequence, nextSeq)
            if d < 0 {
                if state == .played { statistics.duplicates.increment(); return }
                statistics.late.increment()
                // A late packet's transit tells how much more delay was needed (unless it is ancient).
                if d > -store.capacity { _ = measure(p) }
                return
            }
            if d >= store.capacity { statistics.overflow.increment(); return }
            let ts = measure(p)
            store.store(sequence: p.sequence, timestamp: ts, marker: p.marker, payload: p.payload)
        case .buffering:
            if store.haveAny {
                let newLow = ReorderStore.distance(p.sequence, store.lowest) < 0 ? p.sequence : store.lowest
                let newHigh = ReorderStore.distance(p.sequence, store.highest) > 0 ? p.sequence : store.highest
                if ReorderStore.distance(newHigh, newLow) >= store.capacity {
                    // A jump this large before playout: the sender restarted; start over from this packet.
                    clearStore()
                }
            }
            let ts = measure(p)
            store.store(sequence: p.sequence, timestamp: ts, marker: p.marker, payload: p.payload)
        }
        lastAcceptedArrival = Int64(bitPattern: p.arrivalNanos)
    }

    /// Extends the packet's timestamp, records its transit, and returns the extended timestamp.
    private func measure(_ p: QueuedPacket) -> Int64 {
        let extended = extend(p.timestamp)
        let arrival = Int64(bitPattern: p.arrivalNanos)
        let firstOfStream = mode == .buffering && !store.haveAny
        switch policy.measure(transitNs: arrival - nanos(extended), arrivalNs: arrival, firstOfStream: firstOfStream) {
        case .counted: break
        case .leftOutOfBacklog: statistics.backlogPackets.increment()
        case .newTimeline: statistics.newTimelines.increment()
        }
        return extended
    }

    private func extend(_ ts: UInt32) -> Int64 {
        if !haveOrigin { haveOrigin = true; origin = ts; newestExtended = 0; return 0 }
        let rel = ts &- origin
        let delta = Int32(bitPattern: rel &- UInt32(truncatingIfNeeded: newestExtended))
        let ext = newestExtended + Int64(delta)
        if ext > newestExtended { newestExtended = ext }
        return ext
    }

    @inline(__always)
    private func nanos(_ samples: Int64) -> Int64 {
        let rate = Int64(settings.sampleRate)
        return samples / rate * 1_000_000_000 + samples % rate * 1_000_000_000 / rate
    }

    private func clearStore() {
        store.clear()
        carriedUntil = .min
    }

    private func publishTarget() {
        statistics.jitterPercentileMs.store(Double(policy.jitterNs) / 1e6)
        statistics.targetDelayMs.store(Double(policy.targetNs) / 1e6)
    }

    private func holdForFEC(now: Int64) {
        policy.holdForFEC(now: now)
        publishTarget()
    }

    /// A loss: the link loses packets, and the next loss may be in speech. Holds the look-ahead
    /// unless the sender has shown it puts no FEC into its speech (it would buy nothing).
    private func holdForFECAfterLoss(now: Int64) {
        if speechWithoutFEC < settings.fecAbsentAfterFrames { holdForFEC(now: now) }
    }

    @inline(__always)
    private func delay(now: Int64) -> Int64 { now - (nanos(playout) + policy.minimumTransitNs) }

    // MARK: playout

    /// One step of a read: either the frame (`audible`) or a step that produced nothing.
    private enum Step {
        case frame(PlayoutOutcome, audible: Bool)
        case skip(PlayoutOutcome)
    }

    /// What earlier steps of this read did: at most one frame skipped or dropped to shrink the delay
    /// (`shrunk`) and two pauses per read.
    private struct ReadState {
        var shrunk = false
        var quietDrops = 0
    }

    private func produce(into out: UnsafeMutablePointer<Int16>, now: Int64) -> Bool {
        if mode == .buffering, !startPlayout(now: now) {
            return note(.waiting, audible: silence(out))
        }
        if delay(now: now) > maxDelayNs + frameNs { cutBack(now: now) }
        var read = ReadState()
        while true {
            let step: Step
            if playout < carriedUntil, let carried = playCarried(into: out, now: now) {
                step = carried
            } else if store.isFilled(nextSeq) {
                step = playPacket(into: out, now: now, read: &read)
            } else if store.haveAny && ReorderStore.distance(store.highest, nextSeq) > 0 {
                step = playMissing(into: out, now: now, read: &read)
            } else {
                step = underrun(into: out, now: now)
            }
            switch step {
            case .frame(let outcome, let audible): return note(outcome, audible: audible)
            case .skip(let outcome): outcomes.insert(outcome)
            }
        }
    }

    private func note(_ outcome: PlayoutOutcome, audible: Bool) -> Bool {
        outcomes.insert(outcome)
        lastOutcome = outcome
        return audible
    }

    /// Buffering: starts playout once the first packet is target - frame/2 late.
    private func startPlayout(now: Int64) -> Bool {
        guard store.haveAny else { currentDelayNs = 0; return false }
        let first = store.timestamp(store.lowest)
        let waited = now - (nanos(first) + policy.minimumTransitNs)
        currentDelayNs = waited
        guard waited >= policy.targetNs - frameNs / 2 else { return false }
        mode = .playing
        nextSeq = store.lowest
        playout = first
        underrunRun = 0
        return true
    }

    /// The last packet held more than a frame (a peer sending longer packets): its next frame is due
    /// now, whether or not the following packet has arrived yet. Nil when the decoder has none left.
    private func playCarried(into out: UnsafeMutablePointer<Int16>, now: Int64) -> Step? {
        let n = decoder.takeCarried(into: out, frameSize: frameSize)
        guard n > 0 else { carriedUntil = .min; return nil }
        playout += Int64(frameSize)
        currentDelayNs = delay(now: now)
        statistics.played.increment()
        return .frame(.carried, audible: finish(n, out))
    }

    /// The next packet is here.
    private func playPacket(into out: UnsafeMutablePointer<Int16>, now: Int64, read: inout ReadState) -> Step {
        underrunRun = 0
        let ts = store.timestamp(nextSeq)
        if ts > playout {
            // A silence gap (DTX) before this packet: play silence, grow or shrink for free.
            currentDelayNs = delay(now: now)
            let outcome: PlayoutOutcome
            if currentDelayNs < policy.targetNs - insertBelowNs {
                statistics.inserted.increment()  // playout stays: delay grows by a frame
                outcome = .gapInserted
            } else if currentDelayNs > policy.targetNs + frameNs && ts - playout >= 2 * Int64(frameSize) {
                playout += 2 * Int64(frameSize)
                statistics.dropped.increment()
                outcome = .gapDropped
            } else {
                playout = min(playout + Int64(frameSize), ts)
                outcome = .gapSilence
            }
            return .frame(outcome, audible: silence(out))
        }
        if ts < playout {
            // Overdue: its frame was concealed during an underrun. Playing it grows the delay; past
            // target + frame that growth would only be dropped again frame by frame, so with a later
            // packet at hand it is late now instead (a stall's backlog is let go at once, as its gap
            // has been heard already).
            if now - (nanos(ts) + policy.minimumTransitNs) > policy.targetNs + frameNs
                && ReorderStore.distance(store.highest, nextSeq) > 0 {
                store.markPlayed(nextSeq)
                statistics.late.increment()
                nextSeq &+= 1
                return .skip(.lateAfterUnderrun)
            }
            playout = ts  // played after an underrun: the delay has grown
        }
        currentDelayNs = delay(now: now)
        if currentDelayNs < policy.targetNs - insertBelowNs {
            statistics.inserted.increment()
            excessSince = -1
            return .frame(.insertedConcealment, audible: finish(decoder.conceal(into: out, frameSize: frameSize), out))
        }
        let above = currentDelayNs - policy.targetNs
        if above <= frameNs { excessSince = -1 }
        if settings.dropInSpeech && read.quietDrops < 2 && above > frameNs && store.isFilled(nextSeq &+ 1) {
            return dropOrPlay(into: out, now: now, timestamp: ts, above: above, read: &read)
        }
        let result = decoder.decode(store.payload(nextSeq), into: out, frameSize: frameSize)
        consume(ts: ts, decoded: result)
        statistics.played.increment()
        return .frame(.played, audible: finish(result, out))
    }

    /// Too far above target with the next frame at hand: decode this one aside and drop it if it is
    /// a pause (nobody hears a pause 10 ms shorter). Speech frames go too, one at a time, once the
    /// excess has lasted `shrinkInterval · frame / excess` (at least `minDropInterval`): the longer
    /// the stall was, the sooner it is undone.
    private func dropOrPlay(into out: UnsafeMutablePointer<Int16>, now: Int64, timestamp ts: Int64,
                            above: Int64, read: inout ReadState) -> Step {
        let result = decoder.decode(store.payload(nextSeq), into: scratch, frameSize: frameSize)
        consume(ts: ts, decoded: result)
        if excessSince < 0 { excessSince = now }
        let interval = max(minDropIntervalNs, shrinkIntervalNs / max(1, above / frameNs))
        // A pause goes once the excess has lasted `minDropInterval`: readings jitter by up to a
        // period with the audio thread's wake-ups, and a real excess persists.
        if result > 0 && now - excessSince >= minDropIntervalNs && isQuiet(scratch) {
            statistics.dropped.increment()
            statistics.droppedQuiet.increment()
            read.quietDrops += 1
            return .skip(.droppedPause)
        }
        if !read.shrunk && now - excessSince >= interval {
            statistics.dropped.increment()
            read.shrunk = true
            excessSince = now
            return .skip(.droppedSpeech)
        }
        out.update(from: scratch, count: frameSize)
        statistics.played.increment()
        return .frame(.played, audible: finish(result, out))
    }

    /// The next packet is missing while later ones are here: lost (or late; it will be counted late).
    private func playMissing(into out: UnsafeMutablePointer<Int16>, now: Int64, read: inout ReadState) -> Step {
        underrunRun = 0
        var first = nextSeq &+ 1
        while !store.isFilled(first) && first != store.highest { first &+= 1 }
        if store.marker(first) {
            // The gap ends at the start of a talk spurt: it was silence, not loss.
            nextSeq = first
            return .skip(.talkSpurtStart)
        }
        let missingTimestamp = store.timestamp(first) - Int64(ReorderStore.distance(first, nextSeq) * frameSize)
        if missingTimestamp < playout {
            // Already covered by a frame concealed during an underrun: it is lost, not late.
            statistics.lost.increment()
            if first == nextSeq &+ 1 && policy.holdsForFEC && decoder.carriesFEC(store.payload(first)) {
                statistics.fecMissed.increment()  // its repair arrived a moment too late
            }
            holdForFECAfterLoss(now: now)
            nextSeq &+= 1
            return .skip(.lostCovered)
        }
        currentDelayNs = delay(now: now)
        if !read.shrunk && currentDelayNs > policy.targetNs + frameNs {
            // Shrink while concealing: skip the missing frame instead of concealing it.
            statistics.dropped.increment()
            read.shrunk = true
            nextSeq &+= 1
            playout += Int64(frameSize)
            return .skip(.skippedMissing)
        }
        let fec = first == nextSeq &+ 1
            ? decoder.decodeFEC(from: store.payload(first), into: out, frameSize: frameSize) : -1
        nextSeq &+= 1
        playout += Int64(frameSize)
        if fec >= 0 {
            statistics.fecRecovered.increment()
            holdForFEC(now: now)  // the look-ahead pays: keep it
            return .frame(.fecRecovered, audible: finish(fec, out))
        }
        // No next packet, or it carries no usable FEC data.
        let result = decoder.conceal(into: out, frameSize: frameSize)
        statistics.lost.increment()
        holdForFECAfterLoss(now: now)
        return .frame(.concealedLoss, audible: finish(result, out))
    }

    /// The next packet is overdue and nothing later has arrived.
    private func underrun(into out: UnsafeMutablePointer<Int16>, now: Int64) -> Step {
        if now - lastAcceptedArrival > resetGapNs {
            mode = .buffering
            clearStore()
            underrunRun = 0
            excessSince = -1
            statistics.rebuffers.increment()
            return .frame(.rebuffered, audible: silence(out))
        }
        currentDelayNs = delay(now: now)
        statistics.underruns.increment()
        playout += Int64(frameSize)
        underrunRun += 1
        if underrunRun > underrunConcealFrames { return .frame(.underrunSilence, audible: silence(out)) }
        return .frame(.underrunConcealed, audible: finish(decoder.conceal(into: out, frameSize: frameSize), out))
    }

    /// The delay is beyond the maximum (the consumer ran slow for a while, faster than dropping can
    /// undo, or a long stall's backlog): skip buffered frames until it is back at the target. One
    /// audible jump instead of an ever-growing lag; the maximum is a promise to the listener.
    private func cutBack(now: Int64) {
        while delay(now: now) > policy.targetNs, store.haveAny, ReorderStore.distance(store.highest, nextSeq) > 0 {
            if store.isFilled(nextSeq) {
                store.markPlayed(nextSeq)
                playout = store.timestamp(nextSeq) + Int64(frameSize)
            } else {
                playout += Int64(frameSize)
            }
            nextSeq &+= 1
            statistics.dropped.increment()
        }
        statistics.cutBacks.increment()
        excessSince = -1
        outcomes.insert(.cutBack)
    }

    /// The packet at `nextSeq` (stamped `ts`) was decoded: mark it played and move playout past it.
    /// A result longer than a frame leaves the rest in the decoder, played until `carriedUntil`.
    private func consume(ts: Int64, decoded result: Int) {
        // A packet after a frame of speech carries FEC for it if its sender makes any.
        if decoder.carriesFEC(store.payload(nextSeq)) {
            speechWithoutFEC = 0
        } else if lastFrameLoud && speechWithoutFEC < settings.fecAbsentAfterFrames {
            speechWithoutFEC += 1
        }
        carriedUntil = result > frameSize ? ts + Int64(result) : .min
        store.markPlayed(nextSeq)
        nextSeq &+= 1
        playout = ts + Int64(frameSize)
    }

    /// True when the frame's RMS level is below `quietLevelDBFS` (a pause between words).
    private func isQuiet(_ frame: UnsafeMutablePointer<Int16>) -> Bool {
        var energy: Int64 = 0
        for i in 0..<frameSize { energy += Int64(frame[i]) * Int64(frame[i]) }
        return energy < quietEnergy
    }

    private func silence(_ out: UnsafeMutablePointer<Int16>) -> Bool {
        out.update(repeating: 0, count: frameSize)
        statistics.silenceFrames.increment()
        return false
    }

    /// Runs a decoder call's result: on error the frame becomes silence.
    private func finish(_ result: Int, _ out: UnsafeMutablePointer<Int16>) -> Bool {
        if result < 0 {
            statistics.decodeErrors.increment()
            out.update(repeating: 0, count: frameSize)
            return false
        }
        if result < frameSize { (out + result).update(repeating: 0, count: frameSize - result) }
        return true
    }
}
