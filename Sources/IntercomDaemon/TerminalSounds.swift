import AudioPipeline
import Calls
import Foundation
import Frames
import SignalTools
import Synchronization

/// The terminal's three sound channels, fixed mixer inputs (so the echo canceller hears them
/// too): the ring channel (the incoming-call chime, once or repeating, and the caller's
/// ringback), the cue channel (one short tone per event, `Cue`) and the announcement channel
/// (a notification's tone and its text read aloud, fed by the `Announcer`). Built from
/// `calls.chime_wav` and `[tones]`, rebuilt by a reload (`apply`); played by the calls side under
/// its engine lock (one thread at a time, as `TonePlayer` needs).
final class TerminalSounds: Sendable {
    let ring: TonePlayer
    let cues: TonePlayer
    /// The third channel: notifications (a tone, then speech), fed by the `Announcer`.
    let announcements: ClipPlayer
    /// What the announcer and the cues read when they play; a reload replaces it (`apply`).
    private let shared: Mutex<Shared>

    struct Shared: Sendable {
        /// The notification tones, rendered like the cues (`[tones]` may replace or trim each).
        var notificationTones: [NotificationTone: [Int16]]
        /// Linear gain of a cue during a call.
        var inCallGain: Double
    }

    /// Every sound of one configuration, rendered (files read) before anything is swapped.
    private struct Rendered {
        var ring: [[Int16]]
        var cues: [[Int16]]
        var shared: Shared
    }

    /// Ring channel's sounds, by index.
    private static let ringIndex: [Ring: Int] = [.chimeOnce: 0, .chimeRepeating: 1, .ringback: 2]

    init(config: DaemonConfig) throws {
        let r = try Self.render(config)
        ring = TonePlayer(sounds: r.ring)
        cues = TonePlayer(sounds: r.cues)
        shared = Mutex(r.shared)
        // Room for a long text read after a tone; the announcer feeds it as it drains.
        announcements = ClipPlayer(frameSize: config.audio.framesPerPeriod, seconds: 12, sampleRate: config.audio.sampleRate)
    }

    /// `[tones]` and `calls.chime_wav` of `config`, from the next tone on (a sound playing goes on
    /// in its new form). A WAV file that cannot be read changes nothing.
    func apply(_ config: DaemonConfig) throws {
        let r = try Self.render(config)
        ring.replace(sounds: r.ring)
        cues.replace(sounds: r.cues)
        shared.withLock { $0 = r.shared }
    }

    var current: Shared { shared.withLock { $0 } }

    /// Nothing sounds on any of the three channels, and nothing waits to.
    var isQuiet: Bool { !ring.isSounding && !cues.isSounding && announcements.queued == 0 }

    private static func render(_ config: DaemonConfig) throws -> Rendered {
        let rate = config.audio.sampleRate
        let t = config.tones
        let period = t.ringPeriodMs * rate / 1000
        func sound(_ name: String, notes: [Note], length: Int? = nil) throws -> [Int16] {
            try t.sound(name, notes: notes, sampleRate: rate, length: length)
        }
        let path = config.calls.chimeWav
        let chime = path.isEmpty ? Chime.generate(ChimeSettings(sampleRate: rate)) : try Chime.load(path: path, sampleRate: rate)
        let repeating = chime + [Int16](repeating: 0, count: max(0, period - chime.count))
        var tones: [NotificationTone: [Int16]] = [:]
        for tone in NotificationTone.allCases { tones[tone] = try sound(tone.rawValue, notes: tone.notes) }
        return Rendered(ring: [chime, repeating, try sound("ringback", notes: Cue.ringbackNotes, length: period)],
                        cues: try Cue.allCases.map { try sound($0.rawValue, notes: $0.notes) },
                        shared: Shared(notificationTones: tones, inCallGain: pow(10, t.inCallDB / 20)))
    }

    /// Heard with the speaker muted too (the far ends are silenced, not the terminal itself).
    var mixerInputs: [MixerInput] {
        [MixerInput(source: ring, isOwnSound: true), MixerInput(source: cues, isOwnSound: true),
         MixerInput(source: announcements, isOwnSound: true)]
    }

    func play(_ r: Ring) {
        switch r {
        case .off: ring.stop()
        case .chimeRepeating, .ringback: ring.play(Self.ringIndex[r]!, loop: true)
        case .chimeOnce: ring.play(Self.ringIndex[r]!)
        }
    }

    func play(_ cue: Cue, quiet: Bool) {
        cues.play(Cue.allCases.firstIndex(of: cue)!, gain: quiet ? current.inCallGain : 1)
    }
}
