import Foundation
import Frames
import Posix
import RealTime

/// Audio-thread side of one remote stream: reorders received packets by sequence number,
/// decodes one frame per call and adapts its delay to the measured network jitter.
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
/// `now - (playoutTimestamp in ns + minimum transit)`. A packet arrives in time iff its relative
/// transit is at most the current delay, so the current delay is steered to the target.
///
/// Adaptation policy:
/// - desired = clamp(95th percentile of relative transit + one frame, minDelay, maxDelay); the
///   percentile leaves out a stall's backlog (see `measure`);
/// - the target grows to `desired` immediately; it shrinks once per `shrinkIntervalMs` (3 s)
///   by half its distance to `desired` (at least a frame);
/// - current delay below target - frame/2: one frame is inserted at once (silence during a silence
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
/// - FEC look-ahead: a lost frame can come back from the next packet's FEC only if that packet is
///   buffered when the frame is due, i.e. at two frames of delay or more. On a link with little
///   jitter the target is less; a loss that FEC would have repaired but for that (`fecMissed`), or
///   did repair, keeps the desired delay at two frames or more for `fecHoldMs`: a lossy link pays
///   up to a frame, a clean one nothing, a jittery one (already above two frames) nothing either.
public final class JitterBuffer: FrameSource, @unchecked Sendable {
    // @unchecked: all mutable state is touched by the audio thread only (the queue is SPSC).
    public let settings: JitterSettings
    public let queue: PacketQueue
    public let statistics = JitterStatistics()
    /// Effective reorder capacity (power of two).
    public let capacity: Int

    /// Monotonic nanoseconds: the clock arrivals are stamped with (the drift corrector reads it too).
    public let clock: @Sendable () -> UInt64

    private let decoder: FrameDecoder
    private let frameSize: Int
    private let frameNs: Int64
    private let minDelayNs: Int64
    private let maxDelayNs: Int64
    private let shrinkIntervalNs: Int64
    private let minDropIntervalNs: Int64
    /// Sum of squares over a frame below which it counts as a pause (from `quietLevelDBFS`).
    private let quietEnergy: Int64
    private let resetGapNs: Int64
    private let backlogSpacingNs: Int64
    private let consumerStallNs: Int64
    /// When `readFrame` last ran (0: not yet).
    private var lastReadNanos: Int64 = 0
    private let underrunConcealFrames: Int
    private let fecHoldNs: Int64
    /// Until when the desired delay stays at two frames or more for FEC look-ahead (.min: no hold).
    private var fecHoldUntil: Int64 = .min
    private let estimator: DelayEstimator

    // Reorder store: slot = sequence & mask.
    private let mask: Int
    private let maxPayload: Int
    private let payloads: UnsafeMutableRawPointer
    private let lengths: UnsafeMutablePointer<Int>
    private let states: UnsafeMutablePointer<UInt8>  // 0 empty, 1 filled, 2 played
    private let sequences: UnsafeMutablePointer<UInt16>
    private let timestamps: UnsafeMutablePointer<Int64>  // extended (64-bit) RTP timestamps
    private let markers: UnsafeMutablePointer<Bool>

    private enum Mode { case buffering, playing }
    private var mode = Mode.buffering
    /// Any packet in the store (buffering) / `highest` valid.
    private var haveAny = false
    private var lowest: UInt16 = 0    // buffering: oldest sequence stored
    private var highest: UInt16 = 0   // newest sequence stored
    private var nextSeq: UInt16 = 0   // playing: the sequence to play next
    /// Playing: extended timestamp of the frame about to be played.
    private var playout: Int64 = 0
    private var underrunRun = 0
    /// When the current delay started to exceed target + frame in continuous speech (-1: it does not).
    private var excessSince: Int64 = -1
    /// End (timestamp) of the samples the decoder still holds from a packet longer than a frame.
    private var carriedUntil: Int64 = .min
    private let scratch: UnsafeMutablePointer<Int16>

    // Timestamp extension (relative to the first packet ever).
    private var haveOrigin = false
    private var origin: UInt32 = 0
    private var newestExtended: Int64 = 0
    private var lastAcceptedArrival: Int64 = 0

    private let initialTargetNs: Int64
    private var targetNs: Int64
    private var lastTargetChange: Int64 = 0
    private var currentDelayNs: Int64 = 0

    /// - Parameter clock: monotonic nanoseconds, the clock the network thread stamps arrivals with
    ///   (tests pass a simulated one).
    public init(settings: JitterSettings, decoder: FrameDecoder, queue: PacketQueue? = nil,
                clock: @escaping @Sendable () -> UInt64 = { MonotonicClock.nanoseconds() }) {
        precondition(settings.frameSize > 0 && settings.sampleRate > 0)
        precondition(settings.minDelayMs >= 0 && settings.maxDelayMs >= settings.minDelayMs)
        self.settings = settings
        self.decoder = decoder
        self.clock = clock
        frameSize = settings.frameSize
        frameNs = Int64(settings.frameSize) * 1_000_000_000 / Int64(settings.sampleRate)
        minDelayNs = Int64(settings.minDelayMs * 1e6)
        maxDelayNs = Int64(settings.maxDelayMs * 1e6)
        shrinkIntervalNs = Int64(settings.shrinkIntervalMs * 1e6)
        minDropIntervalNs = Int64(settings.minDropIntervalFrames) * frameNs
        let quietRMS = 32768 * exp(settings.quietLevelDBFS / 20 * log(10.0))
        quietEnergy = Int64(quietRMS * quietRMS * Double(settings.frameSize))
        resetGapNs = Int64(settings.resetGapMs * 1e6)
        backlogSpacingNs = Int64(settings.backlogSpacingFrames * Double(frameNs))
        consumerStallNs = Int64(settings.consumerStallMs * 1e6)
        fecHoldNs = Int64(settings.fecHoldMs * 1e6)
        underrunConcealFrames = max(1, Int((settings.underrunConcealMs / settings.frameMs).rounded(.up)))
        let windowCount = max(16, Int((settings.windowMs / settings.frameMs).rounded(.up)))
        estimator = DelayEstimator(windowCount: windowCount, percentile: settings.percentile)

        let delayFrames = Int((settings.maxDelayMs / settings.frameMs).rounded(.up))
        var n = 1
        while n < max(settings.capacity, 2 * delayFrames + 8) { n <<= 1 }
        precondition(n <= 16_384, "capacity too large for 16-bit sequence arithmetic")
        capacity = n
        mask = n - 1
        maxPayload = settings.maxPayloadBytes
        self.queue = queue ?? PacketQueue(slots: 64, maxPayloadBytes: settings.maxPayloadBytes)
        payloads = .allocate(byteCount: n * settings.maxPayloadBytes, alignment: 16)
        payloads.initializeMemory(as: UInt8.self, repeating: 0, count: n * settings.maxPayloadBytes)
        lengths = .allocate(capacity: n); lengths.initialize(repeating: 0, count: n)
        states = .allocate(capacity: n); states.initialize(repeating: 0, count: n)
        sequences = .allocate(capacity: n); sequences.initialize(repeating: 0, count: n)
        timestamps = .allocate(capacity: n); timestamps.initialize(repeating: 0, count: n)
        markers = .allocate(capacity: n); markers.initialize(repeating: false, count: n)
        scratch = .allocate(capacity: settings.frameSize); scratch.initialize(repeating: 0, count: settings.frameSize)
        initialTargetNs = max(minDelayNs, min(maxDelayNs, frameNs))
        targetNs = initialTargetNs
        statistics.targetDelayMs.store(Double(targetNs) / 1e6)
    }

    deinit {
        payloads.deallocate(); lengths.deallocate(); states.deallocate()
        sequences.deallocate(); timestamps.deallocate(); markers.deallocate(); scratch.deallocate()
    }

    /// Returns to the freshly initialised state for a new stream in the same slot: empties the queue
    /// and the reorder store, forgets the transit window, the timestamp base and the target, resets
    /// the gauges and the decoder. Counters keep counting.
    ///
    /// Precondition: neither the network thread (`queue.push`) nor the audio thread (`readFrame`)
    /// runs during the call; the caller hands the buffer over with atomics before and after.
    public func reset() {
        queue.reset()
        decoder.reset()
        estimator.reset()
        states.update(repeating: 0, count: capacity)
        sequences.update(repeating: 0, count: capacity)
        mode = .buffering
        haveAny = false
        lowest = 0; highest = 0; nextSeq = 0
        playout = 0
        underrunRun = 0
        excessSince = -1
        carriedUntil = .min
        haveOrigin = false; origin = 0; newestExtended = 0; lastExtended = 0
        lastAcceptedArrival = 0
        lastReadNanos = 0
        lastMeasuredArrival = .min / 2
        inBacklog = false
        targetNs = initialTargetNs
        lastTargetChange = 0
        fecHoldUntil = .min
        currentDelayNs = 0
        statistics.currentDelayMs.store(0)
        statistics.targetDelayMs.store(Double(targetNs) / 1e6)
        statistics.bufferLevelMs.store(0)
        statistics.jitterPercentileMs.store(0)
        statistics.driftPPM.store(0)
    }

    // MARK: audio-thread state readable by the owner (audio thread)

    /// True once playout has started (false while buffering).
    public var isPlaying: Bool { mode == .playing }
    /// Playing: the (extended) RTP timestamp of the next frame. It advances one frame per frame
    /// played; any other jump is a delay step (insert, drop, an underrun's late packet).
    public var playoutTimestamp: Int64 { playout }
    /// Target delay, ms.
    public var targetDelayMs: Double { Double(targetNs) / 1e6 }
    /// Delay of the last frame played beyond the fastest transit, ms (see the type's comment).
    public var currentDelayMs: Double { Double(currentDelayNs) / 1e6 }
    /// Audio buffered beyond the playout point, ms: the drift controller's input.
    public var bufferLevelMs: Double {
        guard mode == .playing, haveAny else { return 0 }
        let ts = timestamps[Int(highest) & mask]
        return Double(max(0, ts + Int64(frameSize) - playout)) * 1000 / Double(settings.sampleRate)
    }

    // MARK: the frame source

    /// Produces exactly one frame (the signature of AudioPipeline's `FrameSource`).
    /// Returns false when the frame is silence (buffering, DTX gap, long underrun).
    @discardableResult
    public func readFrame(into buffer: UnsafeMutablePointer<Int16>, count: Int) -> Bool {
        guard count == frameSize else {
            buffer.update(repeating: 0, count: count)
            return false
        }
        let now = Int64(bitPattern: clock())
        let consumerStalled = lastReadNanos > 0 && now - lastReadNanos > consumerStallNs
        lastReadNanos = now
        drain()
        if estimator.refresh() { updateTarget(now: now) }
        if consumerStalled, mode == .playing, delay(now: now) > targetNs + frameNs {
            // Nobody read for a while: that gap was heard already; do not drag its delay along.
            statistics.consumerStalls.increment()
            cutBack(now: now)
        }
        let audible = produce(into: buffer, now: now)
        statistics.currentDelayMs.store(Double(currentDelayNs) / 1e6)
        statistics.bufferLevelMs.store(bufferLevelMs)
        return audible
    }

    // MARK: ingest

    private func drain() {
        while let packet = queue.peek() {
            ingest(packet)
            queue.pop()
        }
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

    /// True when the frame's RMS level is below `quietLevelDBFS` (a pause between words).
    private func isQuiet(_ frame: UnsafeMutablePointer<Int16>) -> Bool {
        var energy: Int64 = 0
        for i in 0..<frameSize { energy += Int64(frame[i]) * Int64(frame[i]) }
        return energy < quietEnergy
    }

    @inline(__always) private func distance(_ a: UInt16, _ b: UInt16) -> Int { Int(Int16(bitPattern: a &- b)) }

    private func ingest(_ p: QueuedPacket) {
        statistics.received.increment()
        let slot = Int(p.sequence) & mask
        let sameSeq = sequences[slot] == p.sequence
        if sameSeq && states[slot] == 1 { statistics.duplicates.increment(); return }
        guard p.payload.count <= maxPayload else { statistics.overflow.increment(); return }

        switch mode {
        case .playing:
            let d = distance(p.sequence, nextSeq)
            if d < 0 {
                if sameSeq && states[slot] == 2 { statistics.duplicates.increment(); return }
                statistics.late.increment()
                // A late packet's transit tells how much more delay was needed (unless it is ancient).
                if d > -capacity { measure(p) }
                return
            }
            if d >= capacity { statistics.overflow.increment(); return }
            measure(p)
            store(p, slot: slot)
            if !haveAny || distance(p.sequence, highest) > 0 { highest = p.sequence; haveAny = true }
        case .buffering:
            if haveAny {
                let newLow = distance(p.sequence, lowest) < 0 ? p.sequence : lowest
                let newHigh = distance(p.sequence, highest) > 0 ? p.sequence : highest
                if distance(newHigh, newLow) >= capacity {
                    // A jump this large before playout: the sender restarted; start over from this packet.
                    clearStore()
                    lowest = p.sequence; highest = p.sequence
                } else {
                    lowest = newLow; highest = newHigh
                }
            } else {
                lowest = p.sequence; highest = p.sequence
            }
            measure(p)
            haveAny = true
            store(p, slot: slot)
        }
        lastAcceptedArrival = Int64(bitPattern: p.arrivalNanos)
    }

    /// Extends the timestamp (cached in `lastExtended` for `store`) and records the packet's transit.
    private func measure(_ p: QueuedPacket) {
        lastExtended = extend(p.timestamp)
        let transit = Int64(bitPattern: p.arrivalNanos) - nanos(lastExtended)
        if mode == .buffering && !haveAny && estimator.count > 0 && abs(transit - estimator.minimum) > 2_000_000_000 {
            // First packet after a reset with a transit seconds away from the window's: a new
            // timestamp base (sender restart); the old measurements no longer apply.
            estimator.reset()
        }
        // A stall's backlog (the network went silent for longer than the buffer holds, then
        // delivered everything at once) is one event, not a run of jittery packets: only its
        // first packet counts. A stall now and then stays out of the percentile and costs its
        // backlog once; stalls frequent enough to be the network's rhythm still reach it.
        let arrival = Int64(bitPattern: p.arrivalNanos)
        let gap = arrival - lastMeasuredArrival
        lastMeasuredArrival = arrival
        if gap > targetNs + frameNs {
            inBacklog = true
        } else if inBacklog && gap <= backlogSpacingNs {
            statistics.backlogPackets.increment()
            return
        } else {
            inBacklog = false
        }
        estimator.add(transitNanos: transit)
    }

    /// Arrival of the last packet measured, and whether it arrived after a silence of the network.
    private var lastMeasuredArrival: Int64 = .min / 2
    private var inBacklog = false

    private var lastExtended: Int64 = 0

    private func store(_ p: QueuedPacket, slot: Int) {
        if let base = p.payload.baseAddress, p.payload.count > 0 {
            (payloads + slot * maxPayload).copyMemory(from: base, byteCount: p.payload.count)
        }
        lengths[slot] = p.payload.count
        sequences[slot] = p.sequence
        timestamps[slot] = lastExtended
        markers[slot] = p.marker
        states[slot] = 1
    }

    private func clearStore() {
        states.update(repeating: 0, count: capacity)
        haveAny = false
        carriedUntil = .min
    }

    /// After decoding the packet stamped `ts`: a result longer than a frame leaves the rest in the
    /// decoder, to be played until `carriedUntil` (timestamp units).
    private func noteCarry(_ result: Int, ts: Int64) {
        carriedUntil = result > frameSize ? ts + Int64(result) : .min
    }

    @inline(__always)
    private func isFilled(_ seq: UInt16) -> Bool {
        let slot = Int(seq) & mask
        return states[slot] == 1 && sequences[slot] == seq
    }

    @inline(__always)
    private func payload(_ seq: UInt16) -> UnsafeRawBufferPointer {
        let slot = Int(seq) & mask
        return UnsafeRawBufferPointer(start: payloads + slot * maxPayload, count: lengths[slot])
    }

    // MARK: adaptation

    private func updateTarget(now: Int64) {
        let p = estimator.percentileRelative
        statistics.jitterPercentileMs.store(Double(p) / 1e6)
        // A packet of relative transit r is in time iff r <= delay, and the delay never sits below
        // the band's lower edge, target - frame/2: p + frame/2 would do for the buffer alone. Not
        // yet: through the `DriftCorrector` the extra underruns it brings make the buffer drop
        // every minute or so with a 200 ppm sender (DriftTraceTests), so the margin stays a frame.
        let fecFloor = now < fecHoldUntil ? 2 * frameNs : 0
        let desired = max(minDelayNs, min(maxDelayNs, max(p + frameNs, fecFloor)))
        if desired > targetNs {
            targetNs = desired
            lastTargetChange = now
        } else if desired < targetNs, now - lastTargetChange >= shrinkIntervalNs {
            // Half the way down (at least a frame): a target left high by one burst comes back in a
            // few intervals, while a jitter that keeps returning still finds the delay it needs.
            targetNs = max(desired, targetNs - max(frameNs, (targetNs - desired) / 2))
            lastTargetChange = now
        }
        statistics.targetDelayMs.store(Double(targetNs) / 1e6)
    }

    /// Starts or extends the FEC look-ahead (see the type's comment) and applies it at once;
    /// nothing when the look-ahead is off (`fecHoldMs` 0).
    private func holdForFEC(now: Int64) {
        guard fecHoldNs > 0 else { return }
        fecHoldUntil = now + fecHoldNs
        updateTarget(now: now)
    }

    @inline(__always)
    private func delay(now: Int64) -> Int64 { now - (nanos(playout) + estimator.minimum) }

    // MARK: playout

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

    private func rebuffer(_ out: UnsafeMutablePointer<Int16>) -> Bool {
        mode = .buffering
        clearStore()
        underrunRun = 0
        excessSince = -1
        statistics.rebuffers.increment()
        return silence(out)
    }

    /// The delay is beyond the maximum (the consumer ran slow for a while, faster than dropping can
    /// undo, or a long stall's backlog): skip buffered frames until it is back at the target. One
    /// audible jump instead of an ever-growing lag; the maximum is a promise to the listener.
    private func cutBack(now: Int64) {
        while delay(now: now) > targetNs, haveAny, distance(highest, nextSeq) > 0 {
            let slot = Int(nextSeq) & mask
            if isFilled(nextSeq) {
                states[slot] = 2
                playout = timestamps[slot] + Int64(frameSize)
            } else {
                playout += Int64(frameSize)
            }
            nextSeq &+= 1
            statistics.dropped.increment()
        }
        statistics.cutBacks.increment()
        excessSince = -1
    }

    private func produce(into out: UnsafeMutablePointer<Int16>, now: Int64) -> Bool {
        if mode == .buffering {
            guard haveAny else { currentDelayNs = 0; return silence(out) }
            let first = timestamps[Int(lowest) & mask]
            let waited = now - (nanos(first) + estimator.minimum)
            currentDelayNs = waited
            guard waited >= targetNs - frameNs / 2 else { return silence(out) }
            mode = .playing
            nextSeq = lowest
            playout = first
            underrunRun = 0
        }

        if delay(now: now) > maxDelayNs + frameNs { cutBack(now: now) }
        var droppedThisCycle = false
        var quietDrops = 0
        while true {
            if playout < carriedUntil {
                // The last packet held more than a frame (a peer sending longer packets): its next
                // frame is due now, whether or not the following packet has arrived yet.
                let n = decoder.takeCarried(into: out, frameSize: frameSize)
                if n > 0 {
                    playout += Int64(frameSize)
                    currentDelayNs = delay(now: now)
                    statistics.played.increment()
                    return finish(n, out)
                }
                carriedUntil = .min
            }
            if isFilled(nextSeq) {
                underrunRun = 0
                let slot = Int(nextSeq) & mask
                let ts = timestamps[slot]
                if ts > playout {
                    // A silence gap (DTX) before this packet: play silence, grow or shrink for free.
                    currentDelayNs = delay(now: now)
                    if currentDelayNs < targetNs - frameNs / 2 {
                        statistics.inserted.increment()  // playout stays: delay grows by a frame
                    } else if currentDelayNs > targetNs + frameNs && ts - playout >= 2 * Int64(frameSize) {
                        playout += 2 * Int64(frameSize)
                        statistics.dropped.increment()
                    } else {
                        playout = min(playout + Int64(frameSize), ts)
                    }
                    return silence(out)
                }
                if ts < playout {
                    // Overdue: its frame was concealed during an underrun. Playing it grows the
                    // delay; past target + frame that growth would only be dropped again frame by
                    // frame, so with a later packet at hand it is late now instead (a stall's
                    // backlog is let go at once, as its gap has been heard already).
                    if now - (nanos(ts) + estimator.minimum) > targetNs + frameNs && distance(highest, nextSeq) > 0 {
                        states[slot] = 2
                        statistics.late.increment()
                        nextSeq &+= 1
                        continue
                    }
                    playout = ts  // played after an underrun: the delay has grown
                }
                currentDelayNs = delay(now: now)
                if currentDelayNs < targetNs - frameNs / 2 {
                    statistics.inserted.increment()
                    excessSince = -1
                    return finish(decoder.conceal(into: out, frameSize: frameSize), out)
                }
                let above = currentDelayNs - targetNs
                if above <= frameNs { excessSince = -1 }
                if settings.dropInSpeech && quietDrops < 2 && above > frameNs && isFilled(nextSeq &+ 1) {
                    // Too far above target with the next frame at hand: decode this one aside and
                    // drop it if it is a pause (nobody hears a pause 10 ms shorter). Speech frames go
                    // too, one at a time, once the excess has lasted `shrinkInterval · frame / excess`
                    // (at least `minDropInterval`): the longer the stall was, the sooner it is undone.
                    let result = decoder.decode(payload(nextSeq), into: scratch, frameSize: frameSize)
                    noteCarry(result, ts: ts)
                    states[slot] = 2
                    nextSeq &+= 1
                    playout = ts + Int64(frameSize)
                    if excessSince < 0 { excessSince = now }
                    let interval = max(minDropIntervalNs, shrinkIntervalNs / max(1, above / frameNs))
                    // A pause goes once the excess has lasted `minDropInterval`: readings jitter by
                    // up to a period with the audio thread's wake-ups, and a real excess persists.
                    let quiet = result > 0 && now - excessSince >= minDropIntervalNs && isQuiet(scratch)
                    if quiet || (!droppedThisCycle && now - excessSince >= interval) {
                        statistics.dropped.increment()
                        if quiet {
                            quietDrops += 1
                            statistics.droppedQuiet.increment()
                        } else {
                            droppedThisCycle = true
                            excessSince = now
                        }
                        continue
                    }
                    out.update(from: scratch, count: frameSize)
                    statistics.played.increment()
                    return finish(result, out)
                }
                let result = decoder.decode(payload(nextSeq), into: out, frameSize: frameSize)
                noteCarry(result, ts: ts)
                states[slot] = 2
                nextSeq &+= 1
                playout = ts + Int64(frameSize)
                statistics.played.increment()
                return finish(result, out)
            }

            if haveAny && distance(highest, nextSeq) > 0 {
                // Missing, with later packets buffered: lost (or late; it will be counted late).
                underrunRun = 0
                var first = nextSeq &+ 1
                while !isFilled(first) && first != highest { first &+= 1 }
                if markers[Int(first) & mask] {
                    // The gap ends at the start of a talk spurt: it was silence, not loss.
                    nextSeq = first
                    continue
                }
                let missingTimestamp = timestamps[Int(first) & mask] - Int64(distance(first, nextSeq) * frameSize)
                if missingTimestamp < playout {
                    // Already covered by a frame concealed during an underrun: it is lost, not late.
                    statistics.lost.increment()
                    if first == nextSeq &+ 1 && fecHoldNs > 0 && decoder.carriesFEC(payload(first)) {
                        // Its repair arrived a moment too late: hold two frames from now on.
                        statistics.fecMissed.increment()
                        holdForFEC(now: now)
                    }
                    nextSeq &+= 1
                    continue
                }
                currentDelayNs = delay(now: now)
                if !droppedThisCycle && currentDelayNs > targetNs + frameNs {
                    // Shrink while concealing: skip the missing frame instead of concealing it.
                    statistics.dropped.increment()
                    droppedThisCycle = true
                    nextSeq &+= 1
                    playout += Int64(frameSize)
                    continue
                }
                let result: Int
                let fec = first == nextSeq &+ 1
                    ? decoder.decodeFEC(from: payload(first), into: out, frameSize: frameSize) : -1
                if fec >= 0 {
                    result = fec
                    statistics.fecRecovered.increment()
                    holdForFEC(now: now)  // the look-ahead pays: keep it
                } else {  // no next packet, or it carries no usable FEC data
                    result = decoder.conceal(into: out, frameSize: frameSize)
                    statistics.lost.increment()
                }
                nextSeq &+= 1
                playout += Int64(frameSize)
                return finish(result, out)
            }

            // Underrun: the next packet is overdue and nothing later has arrived.
            if now - lastAcceptedArrival > resetGapNs { return rebuffer(out) }
            currentDelayNs = delay(now: now)
            statistics.underruns.increment()
            playout += Int64(frameSize)
            underrunRun += 1
            if underrunRun > underrunConcealFrames { return silence(out) }
            return finish(decoder.conceal(into: out, frameSize: frameSize), out)
        }
    }
}
