import Calls
import Foundation
import Hummingbird
import IntercomConfig
import NIOCore
import SiteAdmin
import SignalTools
import Speech
import Synchronization

/// A notification type as the page describes it, before or after it exists
/// (`POST /api/v1/notifications/preview`).
public struct NotificationPreview: Codable, Sendable {
    public var label: String
    /// Read aloud; empty or left out: the label.
    public var text: String?
    /// Left out: the priority's own.
    public var tone: NotificationTone?
    public var priority: NotificationPriority?
    public var readAloud: Bool?

    /// The longest text the preview reads (the page's field holds as much).
    public static let maxText = 200
}

/// What a notification sounds like at a terminal: its tone, then its text read aloud, by the
/// site's own `[tones]` and `[speech]` (`TonesSection.sound`, `SpeechCache`: the terminal's
/// code), as one WAV for the page to play. A tone a terminal plays from a WAV file of its own
/// is generated here when that file is not on the service's machine.
final class PreviewSounds: Sendable {
    /// The terminals' rate: the tones and the speech exactly as they play them.
    static let sampleRate = 48000

    /// The voice of the last `[speech]` asked for: espeak-ng starts once per voice, and a text
    /// heard again is read from the cache.
    private let voice = Mutex<(settings: SpeechSection, cache: SpeechCache)?>(nil)

    /// Blocking (espeak-ng): run it on a Dispatch thread.
    func render(_ p: NotificationPreview, tones: TonesSection, speech: SpeechSection) throws -> [UInt8] {
        let type = NotificationType(id: "preview", label: p.label, recipients: [], text: p.text ?? "", tone: p.tone,
                                    priority: p.priority ?? .normal, readAloud: p.readAloud ?? true)
        var own = tones
        if let path = own.wav[type.tone.rawValue], !FileManager.default.isReadableFile(atPath: path) { own.wav[type.tone.rawValue] = nil }
        var samples = try own.sound(type.tone.rawValue, notes: type.tone.notes, sampleRate: Self.sampleRate)
        if type.readAloud {
            samples += try cache(for: speech).clip(type.spokenText).samples
        }
        return try WAVAudio(sampleRate: Self.sampleRate, channels: 1, samples: samples).fileBytes()
    }

    private func cache(for speech: SpeechSection) throws -> SpeechCache {
        if let held = voice.withLock({ $0 }), held.settings == speech { return held.cache }
        let cache = try SpeechCache(voice: SpeechVoice(name: speech.voice, wordsPerMinute: speech.wordsPerMinute, pitch: speech.pitch),
                                    sampleRate: Self.sampleRate, peakDBFS: speech.levelDB, capacity: 16)
        voice.withLock { $0 = (speech, cache) }
        return cache
    }
}

extension SiteServer {
    /// The preview's route: a manager or technician listens before adding or changing a type.
    func addPreview(to api: RouterGroup<SiteContext>) {
        api.post("notifications/preview") { request, context -> Response in
            try self.require(context, .manager, .technician)
            let body = try await Self.decode(NotificationPreview.self, request)
            let label = body.label.trimmingCharacters(in: .whitespaces)
            guard !label.isEmpty, label.count <= 64 else { throw Problem.badInput("label", "\"label\" must be 1 to 64 characters") }
            guard (body.text ?? "").count <= NotificationPreview.maxText else {
                throw Problem.badInput("text", "\"text\" must be at most \(NotificationPreview.maxText) characters")
            }
            let (tones, speech) = try await self.editor.sounds()
            let sounds = self.previewSounds
            let rendered: Result<[UInt8], Error> = await onDispatchThread { Result { try sounds.render(body, tones: tones, speech: speech) } }
            let bytes: [UInt8]
            do { bytes = try rendered.get() } catch {
                throw Problem(.serviceUnavailable, "no-speech", "The preview could not be made", detail: "\(error)")
            }
            return Response(status: .ok, headers: [.contentType: "audio/wav", .cacheControl: "no-store"],
                            body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
        }
    }
}
