import AudioPipeline
import Calls
import Control
import Foundation
import Frames
import Logging
import Posix
import RealTime
import Speech
import Synchronization

/// The `intercom-speech` thread: plays the call engine's announcements one after another on the
/// announcement channel: the notification's tone, then its text, spoken by espeak-ng into the
/// cache (synthesis starts while the tone plays). Against a call it ducks or mutes the call's
/// voices while it speaks, as the announcement's level says, and restores them after.
final class Announcer: @unchecked Sendable {
    // @unchecked: `thread` is set and joined by the main thread; the rest is immutable or behind locks/atomics.
    private let player: ClipPlayer
    private let tones: [NotificationTone: [Int16]]
    /// nil: espeak-ng could not start (logged): tones only.
    private let cache: SpeechCache?
    /// The call's voices (the network streams' mixer inputs), ducked or muted while speaking.
    private let callInputs: [MixerInput]
    private let inCallGain: Double
    private let duckGain: Double
    private let queue = Mutex<[Announcement]>([])
    private let playing = Mutex<NotificationID?>(nil)
    private let abort = Flag(false)
    private let wake: Doorbell
    private let stopRequest = Flag(false)
    private var thread: WorkerThread?
    private let log: Logger
    private let prepare: [String]
    private let sampleRate: Double
    let statistics = AnnouncerStatistics()

    /// `prepare`: texts spoken into the cache at start.
    init(sounds: TerminalSounds, speech: SpeechSection, sampleRate: Int, callInputs: [MixerInput], prepare: [String], logger: Logger) {
        player = sounds.announcements
        tones = sounds.notificationTones
        inCallGain = sounds.inCallGain
        duckGain = pow(10, speech.duckDB / 20)
        self.sampleRate = Double(sampleRate)
        self.callInputs = callInputs
        self.prepare = prepare
        log = logger
        wake = try! Doorbell()
        do {
            cache = try SpeechCache(voice: SpeechVoice(name: speech.voice, wordsPerMinute: speech.wordsPerMinute, pitch: speech.pitch),
                                    sampleRate: sampleRate, peakDBFS: speech.levelDB)
        } catch {
            logger.error("speech: \(error); notifications sound their tones but are not read aloud")
            cache = nil
        }
    }

    func start() throws(SystemError) {
        thread = try WorkerThread.start(name: "intercom-speech") { [self] in run() }
    }

    func stop() {
        stopRequest.set(true)
        abort.set(true)
        wake.ring()
        thread?.join()
        thread = nil
    }

    /// Queues an announcement (calls thread; returns at once).
    func announce(_ a: Announcement) {
        queue.withLock { $0.append(a) }
        wake.ring()
    }

    /// Drops these notifications' announcements, the one playing included (calls thread).
    func silence(_ ids: [NotificationID]) {
        queue.withLock { $0.removeAll { ids.contains($0.id) } }
        if let current = playing.withLock({ $0 }), ids.contains(current) {
            abort.set(true)
            player.flush()
        }
        wake.ring()
    }

    private func run() {
        if let cache {
            for text in prepare where !stopRequest.isSet {
                do { _ = try cache.clip(text) } catch { log.error("speech: \"\(text.prefix(40))\": \(error)") }
            }
        }
        while !stopRequest.isSet {
            _ = wake.wait(seconds: 1)
            _ = wake.drain()
            while !stopRequest.isSet, let next = queue.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) {
                playing.withLock { $0 = next.id }
                abort.set(false)
                play(next)
                playing.withLock { $0 = nil }
            }
        }
    }

    private func play(_ a: Announcement) {
        let saved = callInputs.map(\.gain.load)
        switch a.level {
        case .overCall: for input in callInputs { input.gain.store(input.gain.load * duckGain) }
        case .callMuted: for input in callInputs { input.gain.store(0) }
        case .normal, .toneOnlyQuiet: break
        }
        defer { for (input, g) in zip(callInputs, saved) { input.gain.store(g) } }
        var tone = tones[a.tone] ?? []
        if a.level == .toneOnlyQuiet { tone = tone.map { Int16((Double($0) * inCallGain).rounded()) } }
        let rate = sampleRate
        let ahead = Double(player.queued) / rate
        let toneStart = MonotonicClock.seconds() + ahead
        statistics.announcements.increment()
        // The tone goes in whole (the ring holds seconds); synthesis runs while it plays.
        guard feed(tone) else { return }
        let toneEnd = toneStart + Double(tone.count) / rate
        if let text = a.text, !text.isEmpty, let cache {
            let clip: SpeechCache.Clip
            do {
                clip = try cache.clip(text)
            } catch {
                statistics.failures.increment()
                log.error("speech: \"\(text.prefix(40))\": \(error)")
                return
            }
            let ready = MonotonicClock.seconds()
            statistics.spoken.increment()
            if clip.cached { statistics.cached.increment() }
            statistics.lastSynthesisMs.store(clip.seconds * 1000)
            statistics.lastGapMs.store(max(0, ready - toneEnd) * 1000)
            guard feed(clip.samples) else { return }
        }
        // Until heard: the ducking ends with the last sample.
        while player.queued > 0, !abort.isSet, !stopRequest.isSet { usleep(5_000) }
    }

    /// Feeds `samples` as the ring drains; false when aborted (acknowledged, or stopping).
    private func feed(_ samples: [Int16]) -> Bool {
        var at = 0
        while at < samples.count {
            if abort.isSet || stopRequest.isSet { return false }
            at = player.feed(samples, from: at)
            if at < samples.count { usleep(10_000) }
        }
        return !abort.isSet
    }
}

/// What the announcer did, for `stats`.
final class AnnouncerStatistics: Sendable {
    let announcements = Counter()
    /// Texts read aloud, and how many of those came from the cache.
    let spoken = Counter()
    let cached = Counter()
    /// Synthesis failures (espeak-ng refused a text).
    let failures = Counter()
    /// The last text's synthesis time (0 when cached), and how long after its tone ended its
    /// first sample was ready (0: ready before the tone ended), ms.
    let lastSynthesisMs = Gauge(0)
    let lastGapMs = Gauge(0)

    var snapshot: DaemonStatistics.Speech {
        DaemonStatistics.Speech(announcements: announcements.load, spoken: spoken.load, cached: cached.load, failures: failures.load,
                                lastSynthesisMs: lastSynthesisMs.load, lastGapMs: lastGapMs.load)
    }
}
