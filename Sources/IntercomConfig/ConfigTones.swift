import Calls
import Foundation
import SignalTools
import TOMLKit

// `[tones]`: what the terminal sounds like. Every event has a generated tone (Calls' `Cue`);
// each can be replaced by a WAV file and made louder or softer.

/// `[tones]`.
public struct TonesSection: Sendable, Equatable {
    /// Peak level of the generated tones, dBFS.
    public var levelDB: Double = -12
    /// Event tones during a call are this much softer (dB, <= 0), so they do not cover the voices.
    public var inCallDB: Double = -12
    /// The repeating chime (a call waiting to be answered by hand) and the ringback start over
    /// every this many milliseconds.
    public var ringPeriodMs: Int = 3000
    /// Sound name → a 48 kHz WAV file played instead of the generated tone.
    public var wav: [String: String] = [:]
    /// Sound name → gain in dB applied to it (generated or WAV).
    public var gainDB: [String: Double] = [:]

    public init() {}

    /// Every sound a table may name: the event tones, the notification tones and the ringback (the
    /// chime is calls.chime_wav).
    public static let soundNames = Cue.allCases.map(\.rawValue) + NotificationTone.allCases.map(\.rawValue) + ["ringback"]
    public static let levelRange = -60.0...0.0
    public static let inCallRange = -40.0...0.0
    public static let gainRange = -40.0...20.0
    public static let ringPeriodMsRange = 1000...20_000
}

extension DaemonConfig {
    static let tonesSection = SchemaSection(name: "tones", comment: "Tones for every call event (docs/calls.md lists them); a terminal without a screen says everything with sound.", keys: [
        .double("level_db", \.tones.levelDB, "Peak level of the generated tones, dBFS", .range(TonesSection.levelRange)).reloaded(.live),
        .double("in_call_db", \.tones.inCallDB, "Event tones during a call are this much softer, dB", .range(TonesSection.inCallRange)).reloaded(.live),
        .int("ring_period_ms", \.tones.ringPeriodMs, "The chime of a call waiting to be answered by hand (auto_answer off) and the caller's ringback repeat every this many ms",
             .range(TonesSection.ringPeriodMsRange)).reloaded(.live),
        .soundTable("wav", \.tones.wav, "Sound → 48 kHz mono (or multi-channel) WAV file played instead of the generated tone, e.g. { busy = \"/etc/intercomd/busy.wav\" }",
                    allowed: "a table, sound = \"path\"", render: TOMLWrite.string) { item throws(ValueProblem) in
            let path = try TOMLRead.string(item)
            guard !path.isEmpty else { throw ValueProblem("is empty: leave the sound out to keep the generated tone") }
            return path
        }.reloaded(.live),
        .soundTable("gain_db", \.tones.gainDB, "Sound → gain in dB (-40...20) added to its level, e.g. { missed_call = 6 }",
                    allowed: "a table, sound = dB", render: formatNumber) { item throws(ValueProblem) in
            let dB = try TOMLRead.double(item)
            guard TonesSection.gainRange.contains(dB) else { throw ValueProblem("\(formatNumber(dB)) is not in range -40...20") }
            return dB
        }.reloaded(.live),
    ])
}

extension SchemaKey {
    /// A table keyed by sound names (`TonesSection.soundNames`); `convert` reads and checks each value.
    static func soundTable<V: Sendable & Equatable>(
        _ name: String, _ path: Path<[String: V]>, _ comment: String, allowed: String,
        render: @escaping @Sendable (V) -> String,
        _ convert: @escaping @Sendable (TOMLValueConvertible) throws(ValueProblem) -> V
    ) -> SchemaKey {
        SchemaKey(
            name: name, comment: comment + ". Sounds: " + TonesSection.soundNames.joined(separator: ", "), allowed: allowed,
            read: { value, config throws(ValueProblem) in
                guard let table = value.table else {
                    throw ValueProblem("expected a table ([tones.\(name)] or { busy = ... }), got \(TOMLRead.describe(value))")
                }
                var out: [String: V] = [:]
                for (key, item) in table {
                    guard TonesSection.soundNames.contains(key) else {
                        let hint = Spelling.closest(to: key, among: TonesSection.soundNames).map { " (did you mean \($0)?)" } ?? ""
                        throw ValueProblem("is not a sound: one of \(TonesSection.soundNames.joined(separator: ", "))" + hint, at: key)
                    }
                    do throws(ValueProblem) { out[key] = try convert(item) } catch { throw ValueProblem(error.text, at: key) }
                }
                config[keyPath: path] = out
            },
            check: { _ in nil },
            render: { c in
                let entries = c[keyPath: path].sorted { $0.key < $1.key }
                return entries.isEmpty ? "{}" : "{ " + entries.map { "\(TOMLWrite.key($0.key)) = \(render($0.value))" }.joined(separator: ", ") + " }"
            },
            adopt: { $0[keyPath: path] = $1[keyPath: path] })
    }
}

extension TonesSection {
    /// A sound as a terminal plays it: the WAV file `wav[name]` names, else `notes` generated at
    /// `levelDB`; then `gainDB[name]`; padded with silence to `length`. The terminal's sounds and
    /// the site page's preview both come from here.
    public func sound(_ name: String, notes: [Note], sampleRate: Int, length: Int? = nil) throws -> [Int16] {
        var samples = if let path = wav[name] {
            try Chime.load(path: path, sampleRate: sampleRate)
        } else {
            Tones.render(notes.map { ($0.hz, $0.ms) }, sampleRate: sampleRate, peakDBFS: levelDB)
        }
        if let gain = gainDB[name], gain != 0 {
            let g = pow(10, gain / 20)
            samples = samples.map { Int16(clamping: Int((Double($0) * g).rounded())) }
        }
        if let length, samples.count < length { samples += [Int16](repeating: 0, count: length - samples.count) }
        return samples
    }
}
