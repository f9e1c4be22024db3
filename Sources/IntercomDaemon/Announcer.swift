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
/// voices while it speaks, as the announcement's level says, and restores them after. An
/// emergency goes before every other waiting announcement and cuts one being played, which is
/// played again, whole, after it: an alarm never waits behind a reminder being read.
final class Announcer: @unchecked Sendable {
    // @unchecked: `thread` is set and joined by the main thread; the rest is immutable or behind locks/atomics.
    private let player: ClipPlayer
    /// The notification tones and the in-call gain, as the last reload left them.
    private let sounds: TerminalSounds
    /// How texts are spoken; a reload replaces it (`apply`).
    private struct Voice: Sendable {
        var section: SpeechSection
        /// nil: espeak-ng could not start (logged): tones only.
        var cache: SpeechCache?
        var duckGain: Double { pow(10, section.duckDB / 20) }
    }
    private let voice: Mutex<Voice>
    /// Texts to speak into the cache before waiting again (at start, and after a reload).
    private let toPrepare = Mutex<[String]>([])
    /// The call's voices (the network streams' mixer inputs), ducked or muted while speaking.
    private let callInputs: [MixerInput]
    /// What waits, what plays, and whether that was cut for an emergency (to be played again).
    private struct Line {
        var queue: [Announcement] = []
        var playing: Announcement?
        var cut = false

        /// Where an emergency goes, and a cut announcement: after the emergencies waiting.
        var afterEmergencies: Int { queue.firstIndex { $0.priority != .emergency } ?? queue.endIndex }
    }
    private let line = Mutex(Line())
    private let abort = Flag(false)
    private let wake: Doorbell
    private let stopRequest: StopSignal
    private var thread: WorkerThread?
    private let log: Logger
    private let sampleRate: Double
    let statistics = AnnouncerStatistics()

    /// `prepare`: texts spoken into the cache at start.
    init(sounds: TerminalSounds, speech: SpeechSection, sampleRate: Int, callInputs: [MixerInput], prepare: [String], logger: Logger) throws(SystemError) {
        player = sounds.announcements
        self.sounds = sounds
        self.sampleRate = Double(sampleRate)
        self.callInputs = callInputs
        log = logger
        wake = try Doorbell()
        stopRequest = try StopSignal()
        var cache: SpeechCache?
        do {
            cache = try Self.cache(speech, sampleRate: sampleRate)
        } catch {
            logger.error("speech: \(error); notifications sound their tones but are not read aloud")
        }
        voice = Mutex(Voice(section: speech, cache: cache))
        toPrepare.withLock { $0 = prepare }
    }

    private static func cache(_ speech: SpeechSection, sampleRate: Int) throws(SpeechError) -> SpeechCache {
        try SpeechCache(voice: SpeechVoice(name: speech.voice, wordsPerMinute: speech.wordsPerMinute, pitch: speech.pitch),
                        sampleRate: sampleRate, peakDBFS: speech.levelDB)
    }

    /// A reload's `[speech]` and the texts this terminal reads (main thread): a new voice, rate,
    /// pitch or level starts a new cache, from the next text on; `prepare` is spoken into the
    /// cache on the speech thread. A voice espeak-ng refuses changes nothing of `[speech]` and is returned.
    func apply(_ speech: SpeechSection, prepare: [String]) -> SpeechError? {
        let held = voice.withLock { $0 }
        var next = held
        next.section = speech
        var refusal: SpeechError?
        let spoken = { (s: SpeechSection) in [s.voice, "\(s.wordsPerMinute)", "\(s.pitch)", "\(s.levelDB)"] }
        if spoken(speech) != spoken(held.section) || held.cache == nil {
            do throws(SpeechError) {
                next.cache = try Self.cache(speech, sampleRate: Int(sampleRate))
            } catch {
                refusal = error
                next = held
            }
        }
        voice.withLock { $0 = next }
        toPrepare.withLock { $0 = prepare }
        wake.ring()
        return refusal
    }

    func start() throws(SystemError) {
        thread = try WorkerThread.start(name: "intercom-speech") { [self] in run() }
    }

    func stop() {
        abort.set(true)
        stopRequest.set()
        wake.ring()
        thread?.join()
        thread = nil
    }

    /// The announcements waiting, in the order they will play.
    var waiting: [Announcement] { line.withLock { $0.queue } }

    /// Nothing plays or waits.
    var isQuiet: Bool { line.withLock { $0.playing == nil && $0.queue.isEmpty } && player.queued == 0 }

    /// The `[speech]` in force.
    var speech: SpeechSection { voice.withLock { $0.section } }

    /// Queues an announcement (calls thread; returns at once).
    func announce(_ a: Announcement) {
        let cut = line.withLock { l -> Bool in
            guard a.priority == .emergency else {
                l.queue.append(a)
                return false
            }
            l.queue.insert(a, at: l.afterEmergencies)
            guard let playing = l.playing, playing.priority != .emergency else { return false }
            l.cut = true
            return true
        }
        if cut {
            abort.set(true)
            player.flush()
        }
        wake.ring()
    }

    /// Drops these notifications' announcements, the one playing included (calls thread).
    func silence(_ ids: [NotificationID]) {
        let current = line.withLock { l -> NotificationID? in
            l.queue.removeAll { ids.contains($0.id) }
            if let playing = l.playing, ids.contains(playing.id) { l.cut = false }  // not played again
            return l.playing?.id
        }
        if let current, ids.contains(current) {
            abort.set(true)
            player.flush()
        }
        wake.ring()
    }

    private func run() {
        while !stopRequest.isSet {
            prepareTexts()
            _ = wake.wait(seconds: 1)
            _ = wake.drain()
            while !stopRequest.isSet, let next = line.withLock({ l -> Announcement? in
                guard !l.queue.isEmpty else { return nil }
                l.playing = l.queue.removeFirst()
                l.cut = false
                // Cleared under the lock: an emergency that comes from now on cuts this one.
                abort.set(false)
                return l.playing
            }) {
                play(next)
                line.withLock { l in
                    l.playing = nil
                    if l.cut {
                        l.queue.insert(next, at: l.afterEmergencies)
                        l.cut = false
                    }
                }
            }
        }
    }

    /// Speaks the texts waiting to be prepared into the cache; an announcement queued meanwhile
    /// goes first (the rest are prepared after it).
    private func prepareTexts() {
        guard let cache = voice.withLock({ $0.cache }) else { return }
        while !stopRequest.isSet, line.withLock({ $0.queue.isEmpty }),
              let text = toPrepare.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) {
            guard !cache.contains(text) else { continue }
            do { _ = try cache.clip(text) } catch { log.error("speech: \"\(text.prefix(40))\": \(error)") }
        }
    }

    private func play(_ a: Announcement) {
        // Cut short (acknowledged, an emergency, stopping): the channel drops what was fed of it.
        // Flushed from here, after the last sample fed, so that the next clip is kept whole.
        defer { if abort.isSet { player.flush() } }
        let saved = callInputs.map(\.gain.load)
        let (cache, duckGain) = voice.withLock { ($0.cache, $0.duckGain) }
        let sounding = sounds.current
        switch a.level {
        case .overCall: for input in callInputs { input.gain.store(input.gain.load * duckGain) }
        case .callMuted: for input in callInputs { input.gain.store(0) }
        case .normal, .toneOnlyQuiet: break
        }
        defer { for (input, g) in zip(callInputs, saved) { input.gain.store(g) } }
        var tone = sounding.notificationTones[a.tone] ?? []
        if a.level == .toneOnlyQuiet { tone = tone.map { Int16((Double($0) * sounding.inCallGain).rounded()) } }
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
        while player.queued > 0, !abort.isSet, !stopRequest.sleep(seconds: 0.005) {}
    }

    /// Feeds `samples` as the ring drains; false when aborted (acknowledged, or stopping).
    private func feed(_ samples: [Int16]) -> Bool {
        var at = 0
        while at < samples.count {
            if abort.isSet || stopRequest.isSet { return false }
            at = player.feed(samples, from: at)
            if at < samples.count { stopRequest.sleep(seconds: 0.01) }
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
