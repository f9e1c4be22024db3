import CEspeakNG
import Synchronization

// The one file that calls libespeak-ng. Speech is made on the terminal itself (never a cloud
// service): espeak-ng is small, starts in milliseconds and speaks the practice's languages.

/// A refusal of espeak-ng, with its own message.
public struct SpeechError: Error, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }

    init(_ what: String, status: espeak_ng_STATUS) {
        var buffer = [CChar](repeating: 0, count: 256)
        espeak_ng_GetStatusCodeMessage(status, &buffer, buffer.count)
        let message = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        description = "\(what): \(message)"
    }
}

/// The voice a text is spoken with.
public struct SpeechVoice: Sendable, Equatable, Hashable {
    /// espeak-ng's voice name: a language ("de", "fr", "it", "en"), optionally "+variant" ("de+f3").
    public var name: String
    /// Words per minute (espeak-ng's 80...450).
    public var wordsPerMinute: Int
    /// Base pitch, 0...100 (50 = the voice's own).
    public var pitch: Int

    public init(name: String, wordsPerMinute: Int = 160, pitch: Int = 50) {
        self.name = name
        self.wordsPerMinute = wordsPerMinute
        self.pitch = pitch
    }
}

/// Text to 16-bit mono samples at espeak-ng's own rate (22,050 Hz). espeak-ng is one global
/// engine per process: every instance shares it under one lock, so synthesize off the audio thread.
public final class SpeechSynthesizer: Sendable {
    public let voice: SpeechVoice
    /// The samples' rate, Hz.
    public let sampleRate: Int

    /// The process-wide engine: nil until initialised (its rate once it is).
    private static let engine = Mutex<Int?>(nil)

    /// Opens espeak-ng (once per process) and checks that `voice` exists.
    public init(voice: SpeechVoice) throws(SpeechError) {
        self.voice = voice
        sampleRate = try Self.engine.withLock { (rate: inout Int?) throws(SpeechError) -> Int in
            if let rate { return rate }
            espeak_ng_InitializePath(nil)
            var context: espeak_ng_ERROR_CONTEXT?
            let status = espeak_ng_Initialize(&context)
            espeak_ng_ClearErrorContext(&context)
            guard status == ENS_OK else { throw SpeechError("espeak-ng data", status: status) }
            let output = espeak_ng_InitializeOutput(ENOUTPUT_MODE_SYNCHRONOUS, 0, nil)
            guard output == ENS_OK else { throw SpeechError("espeak-ng output", status: output) }
            espeak_SetSynthCallback(collect)
            rate = Int(espeak_ng_GetSampleRate())
            return rate!
        }
        try Self.engine.withLock { _ throws(SpeechError) in try select(voice) }
    }

    /// The samples of `text` (UTF-8, plain text: no SSML). Leading and trailing silence is kept
    /// short (espeak-ng's own pauses only).
    public func synthesize(_ text: String) throws(SpeechError) -> [Int16] {
        try Self.engine.withLock { _ throws(SpeechError) -> [Int16] in
            try select(voice)
            let sink = SampleSink()
            let box = Unmanaged.passRetained(sink)
            defer { box.release() }
            var bytes = Array(text.utf8)
            bytes.append(0)
            // A sentence pause at the end closes the utterance: without it espeak-ng carries its
            // intonation into the next text, and the same text would not sound the same twice.
            let status = espeak_ng_Synthesize(bytes, bytes.count, 0, POS_CHARACTER, 0, UInt32(espeakCHARS_UTF8 | espeakENDPAUSE),
                                              nil, box.toOpaque())
            guard status == ENS_OK else { throw SpeechError("espeak-ng synthesis of \"\(text.prefix(40))\"", status: status) }
            return sink.samples
        }
    }

    /// Selects the voice and its parameters (the engine's lock is held).
    private func select(_ voice: SpeechVoice) throws(SpeechError) {
        let status = espeak_ng_SetVoiceByName(voice.name)
        guard status == ENS_OK else { throw SpeechError("espeak-ng voice \"\(voice.name)\"", status: status) }
        _ = espeak_ng_SetParameter(espeakRATE, Int32(voice.wordsPerMinute), 0)
        _ = espeak_ng_SetParameter(espeakPITCH, Int32(voice.pitch), 0)
    }
}

/// Where the callback puts one synthesis's samples (passed as its user data).
private final class SampleSink {
    var samples: [Int16] = []
}

/// espeak-ng's synthesis callback: appends a chunk; 0 = go on.
private func collect(_ wav: UnsafeMutablePointer<Int16>?, _ count: Int32, _ events: UnsafeMutablePointer<espeak_EVENT>?) -> Int32 {
    guard let events, let user = events.pointee.user_data else { return 0 }
    let sink = Unmanaged<SampleSink>.fromOpaque(user).takeUnretainedValue()
    if let wav, count > 0 { sink.samples.append(contentsOf: UnsafeBufferPointer(start: wav, count: Int(count))) }
    return 0
}
