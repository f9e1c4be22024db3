import EchoCancel
import Frames
import Glibc
import Posix
import RealTime

/// The real-time loop: capture → microphone chain → microphone ring; mixer → playback → echo reference.
///
/// `run(devices:)` is the body of the audio thread. After start-up it allocates nothing, takes no
/// lock and logs nothing; everything it reports goes through atomic counters in `stats`.
public final class AudioEngine: @unchecked Sendable {
    // @unchecked: the buffers below belong to the audio thread; other threads touch only atomics.
    public let frameSize: Int
    public let mixer: Mixer
    /// Echo canceller, gain and mute, howl guard: what each captured frame goes through.
    public let microphoneChain: MicrophoneChain
    /// The chain's canceller, which the speaker half feeds with what was played.
    public var canceller: EchoCanceller { microphoneChain.canceller }
    /// Processed microphone frames, for the network sender or a recorder.
    public let microphone: SampleRing
    /// Unprocessed microphone frames, when someone wants them (local mode, measurements).
    public let rawMicrophone: SampleRing?
    public let stats = EngineStats()
    /// Set by any thread to end the running session at once: its bell is among the descriptors
    /// the audio thread waits for. Cleared by whoever starts the next session (`StopSignal.clear`).
    public let stopRequest: StopSignal
    /// Rung after each processed microphone frame, to wake the network sender at once.
    public let microphoneReady: Doorbell?
    /// Called once on the audio thread when a session starts (tests mark the thread here).
    public let onAudioThreadStart: (@Sendable () -> Void)?
    /// The device round-trip measurement, when the daemon offers it.
    public let loopback: LoopbackProbe?

    private let cleaned: UnsafeMutablePointer<Int16>
    private let speaker: UnsafeMutablePointer<Int16>
    private let silence: UnsafeMutablePointer<Int16>
    private var primePeriods = 2
    /// Frames kept queued for playback; below the buffer, playback is topped up at each wake-up.
    private var playbackFillFrames = 0
    private var keepsPlaybackFull = true
    /// A live talker's backlog limit: late audio is worse than none in a conversation.
    public static let liveCaptureBacklogMs = 50.0
    /// What one wake-up read from the capture device; only its newest frames are handed on when live.
    private let backlog: CaptureBacklog
    /// A live sender: frames read beyond the backlog's capacity in one wake-up are not sent.
    private let isLive: Bool
    /// The most frames one wake-up reads (2 s): a device that does not pace cannot hold the loop.
    private let maxDrainFrames: Int
    private var lastMixNanos = 0
    /// When the last microphone frame was processed, and whether the streams restarted since.
    private let frameNanos: Double
    private var captureClock: CaptureClock
    /// Samples written to playback and read from capture since the streams last started: one
    /// clock for both (the device's), for the loopback test.
    private var playPosition = 0
    private var capturePosition = 0

    /// - Parameter maxCaptureBacklogMs: for a live sender: a captured backlog beyond this (at
    ///   least 4 frames) is echo-cancelled but not handed on, and counted as lost capture time.
    ///   nil: every frame is handed on (recorders, measurements).
    public init(frameSize: Int, mixer: Mixer, microphoneChain: MicrophoneChain, ringFrames: Int = 32,
                recordRaw: Bool = false, microphoneReady: Doorbell? = nil, maxCaptureBacklogMs: Double? = nil,
                loopback: LoopbackProbe? = nil, onAudioThreadStart: (@Sendable () -> Void)? = nil) throws(SystemError) {
        precondition(microphoneChain.frameSize == frameSize, "the microphone chain's frame must equal the period")
        self.frameSize = frameSize
        self.mixer = mixer
        self.microphoneChain = microphoneChain
        microphone = SampleRing(minimumCapacity: frameSize * ringFrames)
        rawMicrophone = recordRaw ? SampleRing(minimumCapacity: frameSize * ringFrames) : nil
        self.onAudioThreadStart = onAudioThreadStart
        self.loopback = loopback
        self.microphoneReady = microphoneReady
        stopRequest = try StopSignal()
        let frameNanos = Double(frameSize) * 1e9 / Double(microphoneChain.canceller.settings.sampleRate)
        self.frameNanos = frameNanos
        captureClock = CaptureClock(frameNanos: frameNanos)
        isLive = maxCaptureBacklogMs != nil
        backlog = CaptureBacklog(frameSize: frameSize,
                                 capacity: maxCaptureBacklogMs.map { max(4, Int(($0 * 1e6 / frameNanos).rounded(.up))) } ?? 1)
        maxDrainFrames = max(2 * backlog.capacity, Int(2e9 / frameNanos))
        cleaned = .allocate(capacity: frameSize)
        speaker = .allocate(capacity: frameSize)
        silence = .allocate(capacity: frameSize)
        for p in [cleaned, speaker, silence] { p.initialize(repeating: 0, count: frameSize) }
    }

    deinit {
        for p in [cleaned, speaker, silence] { p.deallocate() }
    }

    /// Runs one session on the calling (audio) thread until `stopRequest` or a device failure.
    public func run(devices: AudioDevices) -> SessionEnd {
        onAudioThreadStart?()
        stats.sessions.increment()
        primePeriods = devices.primePeriods
        playbackFillFrames = devices.playbackFillFrames
        keepsPlaybackFull = devices.keepsPlaybackFull
        guard let captureFds = try? devices.capture.pollDescriptors(),
              let playbackFds = try? devices.playback.pollDescriptors() else {
            return .deviceFailed(device: devices.capture.name, operation: "poll descriptors", code: -EIO)
        }
        // A playback queue kept below its buffer always has room, so its POLLOUT would spin (a
        // sound server's plugin ignores avail_min): it is topped up when capture wakes the loop,
        // once a period on the devices' one clock, or after a period without capture.
        var poller = Poller(capacity: captureFds.count + playbackFds.count + 1)
        let capture = poller.add(entries: captureFds)
        if keepsPlaybackFull { poller.add(entries: playbackFds) }
        let stopRung = poller.add(stopRequest.bell.descriptor, read: true)
        let periodMs = max(1, Int((frameNanos / 1e6).rounded(.up)))
        let stallMs = Int(4 * frameNanos / 1e6) + 200
        let timeoutMs = Int32(keepsPlaybackFull ? stallMs : periodMs)
        let pollsPerStall = keepsPlaybackFull ? 1 : max(1, stallMs / periodMs)

        if let failure = restart(devices) { return failure }
        stats.running.set(true)
        defer {
            stats.running.set(false)
            _ = devices.capture.drop()
            _ = devices.playback.drop()
        }
        // Below its buffer, playback is looked at again this soon after a capture wake-up that
        // found no room: a device whose capture and playback periods end together (one sound
        // server pass, linked devices) may show the playback period a moment after the capture
        // one. Written a period later instead, the frame meets a queue a period shorter, and
        // which of the two happens changes as the wake-ups drift past each other.
        let recheckMs = Int32(max(1, periodMs / 5))
        var recheckPlayback = false
        var silentPolls = 0
        while !stopRequest.isSet {
            let ready: Int
            do {
                ready = try poller.wait(timeoutMs: recheckPlayback ? recheckMs : timeoutMs)
            } catch {
                return .deviceFailed(device: devices.capture.name, operation: "poll", code: -error.errno.rawValue)
            }
            if stopRequest.isSet { break }
            if poller.events(at: stopRung).any { stopRequest.bell.drain() }  // a ring that raced a `clear`
            if poller.wasInterrupted { continue }  // not a timeout: a stopped and continued process, say
            if ready == 0 && recheckPlayback {
                recheckPlayback = false
                if let failure = fillPlayback(devices) { return failure }
                continue
            }
            recheckPlayback = false
            if ready == 0 {
                silentPolls += 1
                if !keepsPlaybackFull {
                    // A sound server's capture does not always signal a period that is there.
                    if devices.capture.available() >= frameSize {
                        silentPolls = 0
                        if let failure = processAvailableFrames(devices) { return failure }
                        continue
                    }
                    if let failure = fillPlayback(devices) { return failure }
                    if silentPolls % pollsPerStall != 0 { continue }
                }
                stats.pollTimeouts.increment()
                // A stream that stopped without an error: restart it; give up after a few tries.
                if silentPolls >= 3 * pollsPerStall { return .deviceFailed(device: devices.capture.name, operation: "poll (no audio)", code: -EIO) }
                if let failure = restart(devices) { return failure }
                continue
            }
            silentPolls = 0
            if let failure = fillPlayback(devices) { return failure }
            let (events, rc) = poller.withEntries(capture) { devices.capture.revents($0, count: $1) }
            if rc < 0 { return .deviceFailed(device: devices.capture.name, operation: "poll revents", code: rc) }
            if events & Int16(POLLERR) != 0 {
                if let failure = recoverXrun(devices, failed: devices.capture, code: -EPIPE) { return failure }
                continue
            }
            if events & Int16(POLLIN) == 0 { continue }
            let played = playPosition
            if let failure = processAvailableFrames(devices) { return failure }
            recheckPlayback = !keepsPlaybackFull && playPosition == played
        }
        return .stopped
    }

    /// The microphone half: the capture device is read empty and every frame goes through the
    /// microphone chain in order (the canceller pairs by position); only the newest
    /// `backlog.capacity` of one wake-up are handed on. After a stall the room is therefore heard
    /// again at once, from just before capture resumed, and the sender's timestamps jump over the rest.
    private func processAvailableFrames(_ d: AudioDevices) -> SessionEnd? {
        // snd_pcm_delay first, for what it does, not what it says: it brings the device's pointer
        // up to date, which is where a plugin device (the sound server's) notices an overrun; read
        // without it, a stall's overrun went unnoticed and the streams were not restarted in step.
        _ = d.capture.delay()
        var avail = d.capture.available()
        if avail < 0 { return recoverXrun(d, failed: d.capture, code: Int32(avail)) }
        var read = 0, stale = 0
        // A sound server hands a backlog over one buffer at a time: ask again until it has no whole
        // frame. Bounded, so that a device that does not pace cannot hold the speaker half up.
        while avail >= frameSize && read < maxDrainFrames {
            while avail >= frameSize && read < maxDrainFrames {
                if backlog.isFull {
                    processCapturedFrame(backlog.oldest, send: !isLive)
                    backlog.removeOldest()
                    if isLive { stale += 1 }
                }
                let slot = backlog.nextSlot
                let got = readFrame(d.capture, into: slot)
                if got < 0 { return recoverXrun(d, failed: d.capture, code: Int32(got)) }
                backlog.commit()
                loopback?.captured(slot, position: capturePosition)
                capturePosition += frameSize
                read += 1
                avail -= frameSize
            }
            // The speaker keeps its pace while a long backlog is worked off.
            if let failure = fillPlayback(d) { return failure }
            avail = d.capture.available()
            if avail < 0 { return recoverXrun(d, failed: d.capture, code: Int32(avail)) }
        }
        // Each frame's capture instant, for the capture clock: the read time less the frames read
        // after it. Not snd_pcm_delay: right after this process was stopped, a sound server's
        // client library extrapolates its last timing and reports the stop as delay, which put
        // frames a stall too early and made the clock count the stall twice (1 run in 3 of a 1 s stop).
        let readAt = MonotonicClock.nanoseconds()
        let left = max(0, d.capture.delay() ?? 0)
        stats.captureDelayFrames.store(left)
        for n in 0..<read {
            let after = read - 1 - n
            let lost = captureClock.frameCaptured(at: readAt &- UInt64(Double(after) * frameNanos))
            let kept = n - (read - backlog.count)
            if kept >= 0 { backlog.setLost(lost, beforeKept: kept) } else if lost > 0 { stats.captureGapFrames.increment(by: lost) }
        }
        if stale > 0 {
            stats.staleCaptureFrames.increment(by: stale)
            stats.captureGapFrames.increment(by: captureClock.staleFramesNotCounted(stale, at: readAt))
        }
        while !backlog.isEmpty {
            let lost = backlog.lostBeforeOldest
            if lost > 0 { stats.captureGapFrames.increment(by: lost) }
            processCapturedFrame(backlog.oldest, send: true)
            backlog.removeOldest()
        }
        if let failure = fillPlayback(d) { return failure }
        // Re-pair only once capture has caught up (mid-backlog the frames read are old), and
        // after the fill, so that what was just written is still ahead of the echo.
        if left <= 2 * frameSize { canceller.realignIfOutOfStep() }
        return nil
    }

    /// Runs one captured frame through the microphone chain and hands it on (unless it is stale).
    private func processCapturedFrame(_ frame: UnsafeMutablePointer<Int16>, send: Bool) {
        let t0 = MonotonicClock.nanoseconds()
        rawMicrophone?.write(frame, count: frameSize)
        microphoneChain.process(captured: frame, into: cleaned)
        if send {
            if microphone.write(cleaned, count: frameSize) { microphoneChain.handedOn() } else { stats.micDrops.increment() }
        }
        microphoneReady?.ring()
        stats.frames.increment()
        noteCPU(since: t0)
    }

    /// The speaker half, paced by the playback device: while it holds less than the fill target
    /// (the whole buffer by default), mix a frame, write it (never waiting) and feed it to the echo
    /// canceller right after. A device or sound server that asks for data late never holds up the
    /// microphone; the canceller pairs the halves by stream position. What the device holds is
    /// judged by its free room (the buffer's own pointer, which moves as the device takes frames),
    /// not by snd_pcm_delay: a sound server's delay adds its own queue and moves by up to a period
    /// between its timing updates, and writes that follow it moved the delay heard while people
    /// talked (26-42 ms within one clip at 5 ms frames) and read as 80-160 ppm of drift at the far end.
    private func fillPlayback(_ d: AudioDevices) -> SessionEnd? {
        var space = d.playback.available()
        if space < 0 { return recoverXrun(d, failed: d.playback, code: Int32(space)) }
        let reserve = d.playbackGeometry.bufferFrames - playbackFillFrames
        var mixNanos = 0
        while space - reserve >= frameSize {
            let t0 = MonotonicClock.nanoseconds()
            // The frame goes behind what the device holds: it plays that much sooner than one
            // written the moment the fill target let it (0 on time, a period sooner a period late).
            // Only below the full buffer: there the writes follow capture, not the device; a full
            // buffer is written as the device asks, and on a sound server its free room moves in
            // the server's chunks (the far end slewed 10 ms in one CI run with the lead there).
            let lateFrames = keepsPlaybackFull ? 0 : space - reserve - frameSize
            mixer.playoutLead.store(nanos: -Int64(Double(lateFrames) * frameNanos / Double(frameSize)))
            mixer.mix(into: speaker)
            let probing = loopback?.replacePlayback(speaker) ?? false
            mixNanos += Int(MonotonicClock.nanoseconds() - t0)
            // The device reported room for the frame, so this write takes all of it without waiting.
            let n = d.playback.write(speaker, frames: frameSize)
            if n == -Int(EAGAIN) { stats.playbackShortWrites.increment(); break }
            if n < 0 { return recoverXrun(d, failed: d.playback, code: Int32(n)) }
            if n < frameSize {
                // Part of a frame played: stream positions no longer line up with the echo reference.
                stats.playbackShortWrites.increment()
                return restart(d)
            }
            if probing, let probe = loopback, probe.awaitingWriteTime {
                probe.wrote(position: playPosition, captureNow: capturePosition + max(0, d.capture.available()))
            }
            playPosition += frameSize
            canceller.played(speaker, ownSound: mixer.mixedMostlyOwnSound && !probing)
            space -= frameSize
        }
        lastMixNanos = mixNanos > 0 ? mixNanos : lastMixNanos
        if let p = d.playback.delay() { stats.playbackDelayFrames.store(p) }
        return nil
    }

    /// CPU of one frame: the microphone half just measured plus the most recent mix.
    private func noteCPU(since t0: UInt64) {
        let spent = Int(MonotonicClock.nanoseconds() - t0) + lastMixNanos
        stats.processNanos.store(spent)
        if spent > stats.processNanosMax.load { stats.processNanosMax.store(spent) }
    }

    /// Reads exactly one frame into `frame`; negative errno on failure.
    private func readFrame(_ pcm: ALSAPCM, into frame: UnsafeMutablePointer<Int16>) -> Int {
        var done = 0
        while done < frameSize {
            let n = pcm.read(frame + done, frames: frameSize - done)
            if n == -Int(EINTR) || n == -Int(EAGAIN) { continue }
            if n < 0 { return n }
            done += n
        }
        return done
    }

    /// Priming only, before the streams start: a sound server may need a moment to accept the
    /// first frames, so this waits (bounded). The steady-state path never waits.
    private func primeFrame(_ pcm: ALSAPCM, _ buffer: UnsafePointer<Int16>) -> Int {
        var done = 0, waits = 0
        while done < frameSize {
            let n = pcm.write(buffer + done, frames: frameSize - done)
            if n == -Int(EINTR) { continue }
            if n == -Int(EAGAIN) {
                waits += 1
                if waits > 1000 { return -Int(EIO) }
                usleep(1000)
                continue
            }
            if n < 0 { return n }
            done += n
        }
        return done
    }

    /// xrun: let alsa-lib recover the stream, count it, then restart both streams in step
    /// with a fresh echo canceller, because the old capture/playback alignment is gone.
    private func recoverXrun(_ d: AudioDevices, failed pcm: ALSAPCM, code: Int32) -> SessionEnd? {
        if code == -EPIPE || code == -ESTRPIPE {
            if pcm.direction == .capture { stats.captureXruns.increment() } else { stats.playbackXruns.increment() }
        }
        let rc = pcm.recover(from: code)
        if rc < 0 { return .deviceFailed(device: pcm.name, operation: "recover", code: rc) }
        return restart(d)
    }

    /// Stops both streams and starts them again with playback primed with silence. Playback starts
    /// itself when priming completes (its start threshold); capture follows at once, or with it when linked.
    private func restart(_ d: AudioDevices) -> SessionEnd? {
        _ = d.capture.drop()
        if !d.isLinked { _ = d.playback.drop() }
        var rc = d.capture.prepare()
        if rc < 0 { return .deviceFailed(device: d.capture.name, operation: "prepare", code: rc) }
        rc = d.playback.prepare()
        if rc < 0 { return .deviceFailed(device: d.playback.name, operation: "prepare", code: rc) }
        canceller.reset()
        backlog.removeAll()
        loopback?.streamsRestarted()
        playPosition = 0
        capturePosition = 0
        if let failure = primePlayback(d) { return failure }
        if !d.playback.isRunning {
            rc = d.playback.start()
            if rc < 0 { return .deviceFailed(device: d.playback.name, operation: "start", code: rc) }
        }
        if !d.capture.isRunning {
            rc = d.capture.start()
            if rc < 0 { return .deviceFailed(device: d.capture.name, operation: "start", code: rc) }
        }
        return nil
    }

    private func primePlayback(_ d: AudioDevices) -> SessionEnd? {
        for _ in 0..<primePeriods {
            let put = primeFrame(d.playback, silence)
            if put < 0 { return .deviceFailed(device: d.playback.name, operation: "prime", code: Int32(put)) }
            canceller.played(silence)
            playPosition += frameSize
        }
        return nil
    }
}

// MARK: - The playback half's source: every far end mixed into one speaker frame

/// Sums N incoming streams (a fixed set of slots, each switched on and off at run time) with
/// per-stream gain into one speaker frame, saturating at full scale. Its output is both what is
/// played and the echo canceller's reference, so muting the speaker also mutes the reference.
/// Muting silences the inputs that follow it (the far ends), not the terminal's own tones.
public final class Mixer: @unchecked Sendable {
    // @unchecked: buffers are touched by the audio thread only; controls are atomics.
    public let inputs: [MixerInput]
    public let speakerMuted = Flag(false)
    public let speakerGain = Gauge(1)
    /// Output samples that hit full scale and were clipped.
    public let clippedSamples = Counter()
    /// Whether the last frame mixed was mostly the terminal's own sound (audio thread only).
    public private(set) var mixedMostlyOwnSound = false
    /// When the frame being mixed will play, against its nominal moment: set by the engine before
    /// each mix, read by the stream sources (their jitter buffers were made with it).
    public let playoutLead: PlayoutLead

    private let frame: Int
    // The inputs again as a plain buffer: iterating an Array goes through a generic coroutine
    // that allocates in unoptimised builds, and the audio thread must not allocate in any build.
    private let slots: UnsafeMutableBufferPointer<MixerInput>
    private let accumulator: UnsafeMutablePointer<Float>
    private let scratch: UnsafeMutablePointer<Int16>

    public init(inputs: [MixerInput], frameSize: Int, playoutLead: PlayoutLead = PlayoutLead()) {
        self.inputs = inputs
        self.playoutLead = playoutLead
        slots = .allocate(capacity: inputs.count)
        _ = slots.initialize(from: inputs)
        frame = frameSize
        accumulator = .allocate(capacity: frameSize)
        scratch = .allocate(capacity: frameSize)
        scratch.initialize(repeating: 0, count: frameSize)
    }

    deinit {
        slots.deinitialize().deallocate()
        accumulator.deallocate()
        scratch.deallocate()
    }

    /// Writes the next speaker frame into `out`.
    public func mix(into out: UnsafeMutablePointer<Int16>) {
        accumulator.update(repeating: 0, count: frame)
        let muted = speakerMuted.isSet
        var ownEnergy: Float = 0, otherEnergy: Float = 0
        for n in 0..<slots.count {
            let input = slots[n]
            if let h = input.handOff, !h.audioThreadMayRead() { continue }
            // A muted stream is still read: its buffer plays on in silence instead of piling up.
            guard input.source.readFrame(into: scratch, count: frame) else {
                input.underruns.increment()
                continue
            }
            if muted, !input.isOwnSound { continue }
            let g = Float(input.gain.load)
            var energy: Float = 0
            for i in 0..<frame {
                let v = Float(scratch[i]) * g
                accumulator[i] += v
                energy += v * v
            }
            if input.isOwnSound { ownEnergy += energy } else { otherEnergy += energy }
        }
        mixedMostlyOwnSound = ownEnergy > otherEnergy
        clippedSamples.increment(by: saturate(accumulator, gain: Float(speakerGain.load), into: out))
    }

    /// Scales and converts to Int16, clamping at full scale; returns how many samples clipped.
    private func saturate(_ src: UnsafeMutablePointer<Float>, gain: Float, into out: UnsafeMutablePointer<Int16>) -> Int {
        var clipped = 0
        for i in 0..<frame {
            let v = src[i] * gain
            if v >= 32767 { out[i] = .max; clipped += 1 }
            else if v <= -32768 { out[i] = .min; clipped += 1 }
            else { out[i] = Int16(v.rounded()) }
        }
        return clipped
    }
}
