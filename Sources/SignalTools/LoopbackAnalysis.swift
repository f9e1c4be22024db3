import Foundation

/// The device round trip from one loopback recording: where the test signal played through the
/// speaker appears in the microphone, turned into milliseconds with the instants the audio thread
/// noted. A pure function of its inputs, so it is tested on crafted recordings.
public struct LoopbackAnalysis: Sendable {
    /// What the audio thread noted about one measurement, as stream positions (samples since
    /// both streams started: one clock).
    public struct Timing: Sendable {
        /// Playback position of the signal's first sample.
        public var signalPosition: Int
        /// Capture position when the frame holding it was written: the stream clock's "now".
        public var capturePositionAtWrite: Int
        /// Capture position of the recording's first sample.
        public var recordingStartPosition: Int
        public var frameSize: Int
        public var sampleRate: Int

        public init(signalPosition: Int, capturePositionAtWrite: Int, recordingStartPosition: Int, frameSize: Int, sampleRate: Int) {
            self.signalPosition = signalPosition
            self.capturePositionAtWrite = capturePositionAtWrite
            self.recordingStartPosition = recordingStartPosition
            self.frameSize = frameSize
            self.sampleRate = sampleRate
        }
    }

    /// The result: a measurement, or the reasons there is none.
    public struct Result: Sendable, Equatable {
        /// Speaker write to microphone read: playback buffer + path + one capture period, ms.
        public var roundTripMs: Double?
        /// How long the signal's first sample waited in the playback buffer, ms.
        public var playbackBufferMs: Double?
        /// From leaving the playback buffer to arriving in the capture buffer (converters, air,
        /// a sound server's own buffering), ms.
        public var pathMs: Double?
        /// The capture side's wait: one period (the engine reads whole periods), ms.
        public var capturePeriodMs: Double
        /// Normalised correlation of the signal with the recording at the match, 0...1.
        public var correlation: Double
        /// RMS of the echo (the recording over the signal's span at the match), dBFS.
        public var echoLevelDb: Double
        /// Echo against the recording's noise before the echo arrives, dB.
        public var snrDb: Double?
        /// Recorded samples at full scale.
        public var clippedSamples: Int
        /// Correlation around the match, for the plot: (lag in ms of path delay, coefficient).
        public var curve: [CurvePoint]
        /// Why the figures cannot be trusted, in words for a technician; empty when they can.
        public var problems: [String]
        /// Warnings that do not invalidate the figures (e.g. a weak echo).
        public var warnings: [String]

        public init(roundTripMs: Double?, playbackBufferMs: Double?, pathMs: Double?, capturePeriodMs: Double,
                    correlation: Double, echoLevelDb: Double, snrDb: Double?, clippedSamples: Int,
                    curve: [CurvePoint], problems: [String], warnings: [String]) {
            self.roundTripMs = roundTripMs
            self.playbackBufferMs = playbackBufferMs
            self.pathMs = pathMs
            self.capturePeriodMs = capturePeriodMs
            self.correlation = correlation
            self.echoLevelDb = echoLevelDb
            self.snrDb = snrDb
            self.clippedSamples = clippedSamples
            self.curve = curve
            self.problems = problems
            self.warnings = warnings
        }
    }

    public struct CurvePoint: Sendable, Equatable {
        public var ms: Double
        public var value: Double
        public init(ms: Double, value: Double) {
            self.ms = ms
            self.value = value
        }
    }

    /// Below this correlation the match is no measurement (noise correlates around 0.05).
    public static let minCorrelation = 0.3
    /// A recording quieter than this (dBFS) is a silent microphone.
    public static let silentDb = -75.0
    /// An echo below this SNR (dB) gives an uncertain position.
    public static let minSNRDb = 10.0

    public static func analyse(signal: [Int16], recording: [Int16], timing t: Timing) -> Result {
        let rate = Double(t.sampleRate)
        let period = Double(t.frameSize) / rate * 1000
        let clipped = Levels.clippedSampleCount(recording)
        let rec = Signals.toFloat(recording), sig = Signals.toFloat(signal)
        var r = Result(roundTripMs: nil, playbackBufferMs: nil, pathMs: nil, capturePeriodMs: period, correlation: 0,
                       echoLevelDb: Levels.rmsDB(rec), snrDb: nil, clippedSamples: clipped, curve: [], problems: [], warnings: [])
        if clipped > 0 {
            r.problems.append("\(clipped) microphone samples clipped: lower the speaker volume (or the microphone gain) and measure again")
        }
        if Levels.rmsDB(rec) < silentDb {
            r.problems.append(String(format: "the microphone is silent (%.0f dBFS): check that it is connected and not muted", Levels.rmsDB(rec)))
            return r
        }
        guard t.signalPosition >= 0 else {
            r.problems.append("the speaker did not play the test signal")
            return r
        }
        guard let found = Correlation.findDelay(reference: sig, in: rec, maxLag: max(0, rec.count - sig.count)) else {
            r.problems.append("the test signal is not in the microphone recording")
            return r
        }
        r.correlation = found.peak
        let at = found.lagSamples
        let echo = Array(rec[at..<min(rec.count, at + sig.count)])
        r.echoLevelDb = Levels.rmsDB(echo)
        if at > t.frameSize {
            // Digital silence before the echo (a sound server's monitor) counts as the 16-bit floor.
            let noise = max(-101, Levels.rmsDB(Array(rec[0..<(at - t.frameSize / 2)])))
            r.snrDb = r.echoLevelDb - noise
        }
        r.curve = curve(sig, rec, around: at, halfWidth: Int(rate * 0.003), step: max(1, t.sampleRate / 24000), rate: rate)
        guard found.peak >= minCorrelation else {
            r.problems.append(String(format: "the speaker is not heard in the microphone (correlation %.2f < %.1f): check the speaker, its volume and mute, and the room", found.peak, minCorrelation))
            return r
        }
        if let snr = r.snrDb, snr < minSNRDb {
            r.warnings.append(String(format: "the echo is only %.0f dB above the room's noise: raise the speaker volume or measure in a quieter moment", snr))
        }
        // The round trip is read on the capture stream's clock alone: from where it stood when the
        // signal's first frame was written to where the echo of its first sample is. Its split uses
        // the playback position too: sample p leaves the playback buffer when the clock reads p (both
        // streams count from one start), unless a sound server let the streams slip apart.
        let echoPosition = Double(t.recordingStartPosition) + found.fractionalLag
        let trip = (echoPosition - Double(t.capturePositionAtWrite)) / rate * 1000
        let path = (echoPosition - Double(t.signalPosition)) / rate * 1000
        let buffer = Double(t.signalPosition - t.capturePositionAtWrite) / rate * 1000
        r.roundTripMs = trip + period
        r.pathMs = path
        r.playbackBufferMs = buffer
        r.curve = r.curve.map { CurvePoint(ms: $0.ms + path, value: $0.value) }
        if trip < 0 {
            r.problems.append(String(format: "the echo is in the recording %.1f ms before the signal was written: the measurement is broken (restart the daemon)", -trip))
        } else if path < 0 || buffer < 0 {
            r.warnings.append("the playback and capture streams were out of step (a sound server starved one of them): the round trip holds, its split into buffer and path does not")
        }
        return r
    }

    /// Normalised correlation at lags around `center`, relative to it in ms.
    private static func curve(_ sig: [Float], _ rec: [Float], around center: Int, halfWidth: Int, step: Int, rate: Double) -> [CurvePoint] {
        var out: [CurvePoint] = []
        var lag = max(0, center - halfWidth)
        while lag <= min(rec.count - 1, center + halfWidth) {
            let n = min(sig.count, rec.count - lag)
            var dot = 0.0, a = 0.0, b = 0.0
            for i in 0..<n {
                let x = Double(sig[i]), y = Double(rec[lag + i])
                dot += x * y
                a += x * x
                b += y * y
            }
            out.append(CurvePoint(ms: Double(lag - center) / rate * 1000, value: a > 0 && b > 0 ? dot / (a * b).squareRoot() : 0))
            lag += step
        }
        return out
    }
}
