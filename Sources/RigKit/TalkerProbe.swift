import AudioPipeline
import IntercomConfig
import EchoCancel
import Foundation
import Frames
import IntercomDaemon
import Posix
import RealTime
import SignalTools

/// A person talking in one rig room and an ear in another, run in this process by one audio
/// engine: it plays a clip into `mouth`'s air (ALSA `<mouth>_air`) and records what `ear`'s
/// speaker plays (ALSA `<ear>` capture = the ear room's sink monitor).
///
/// The delay is wall-clock, as in intercom-bench's latency probe: the time from handing the
/// clip's first frame to the playback device until the captured frame holding it is read back,
/// minus the probe's own buffering (the playback queue ahead of that frame and the rest of the
/// capture period). What remains is mouth-to-ear: air → A's microphone → A's capture period →
/// echo canceller → Opus → UDP → B's jitter buffer → mix → B's playback buffer → B's speaker, plus
/// the rig's two passes (about 1 ms each, see BENCHMARKS.md). Counting stream positions instead
/// would be off by the rig's stream start-up, which varies in steps of 10 ms.
public struct TalkerProbe {
    /// One stretch of the clip found in the recording.
    public struct Window {
        /// Where the stretch starts in the clip, seconds.
        public let clipStart: Double
        /// Its correlation peak in the recording (1 = identical waveform).
        public let peak: Double
        /// Mouth-to-ear delay of this stretch, ms.
        public let delayMs: Double
    }

    public struct Result {
        public let recording: [Int16]
        /// The recording as a WAV file (for scripts/quality.py).
        public let recordingPath: String
        /// The clip as played (48 kHz mono WAV).
        public let clipPath: String
        /// Where the whole clip best matches the recording (cross-correlation) and how well. When
        /// the receiver's jitter buffer drops or inserts a frame mid-clip, the halves no longer
        /// line up and this peak falls although every stretch is there: see `windows`.
        public let found: DelayEstimate?
        /// The clip in stretches of `windowSeconds` with speech in them, each found on its own.
        public let windows: [Window]
        /// The probe's own xruns (its talker or its ear glitched: the measurement is spoiled).
        public let xruns: Int
        /// The processor time this process spent while the probe ran, as a share of one core
        /// (the probe's own cost on the rig: it shares two cores with the daemons).
        public let cpuShare: Double
        /// The first stretch that was clearly found (peak >= `minPeak`): the delay at the start of talk.
        public var onset: Window? { windows.first { $0.peak >= TalkerProbe.minPeak } }
        /// Mouth-to-ear delay at the start of talk, ms.
        public var mouthToEarMs: Double? { onset?.delayMs }
        /// Smallest and largest delay over the clearly found stretches.
        public var delayRangeMs: ClosedRange<Double>? {
            let d = windows.filter { $0.peak >= TalkerProbe.minPeak }.map(\.delayMs)
            guard let lo = d.min(), let hi = d.max() else { return nil }
            return lo...hi
        }
        public var summary: String {
            windows.map { String(format: "%.0fs: %.0f ms (%.2f)", $0.clipStart, $0.delayMs, $0.peak) }.joined(separator: ", ")
        }
    }

    public static let minPeak = 0.5
    public static let windowSeconds = 1.0

    public let mouth: String
    public let ear: String
    public var frame = 480
    public var rate = 48000

    public init(mouth: String, ear: String, frame: Int = 480) {
        self.mouth = mouth
        self.ear = ear
        self.frame = frame
    }

    /// Plays `clipPath` after `leadIn` seconds of silence and records for `tail` seconds after it.
    public func run(clipPath: String, folder: String, name: String, leadIn: Double = 0.3, tail: Double = 1.2) throws -> Result {
        let clip = try WAVAudio.read(path: clipPath)
        precondition(clip.sampleRate == rate && clip.channels == 1, "the clip must be 48 kHz mono")
        let lead = Int(leadIn * Double(rate)) / frame * frame  // the clip starts a frame
        let source = BufferSource([Int16](repeating: 0, count: lead) + clip.samples, mark: lead)
        let canceller = try EchoCanceller(EchoCancelSettings(daemonConfig(frame: frame)))
        canceller.bypass.set(true)
        // The engine rings this after each captured frame: the probe sleeps until then instead of
        // polling (issue 51: a talker probe polling ALSA every 0.5 ms starved the rig on two cores).
        let captured = try Doorbell()
        let engine = try AudioEngine(frameSize: frame, mixer: Mixer(inputs: [MixerInput(source: source)], frameSize: frame),
                                 microphoneChain: MicrophoneChain(canceller: canceller, gain: MicrophoneGain(frameSize: frame), howlGuard: nil),
                                 ringFrames: 64, recordRaw: true, microphoneReady: captured)
        // A roomy buffer: the probe is the instrument, and its own glitches would be charged to
        // intercomd (its queue is subtracted from the delay below, whatever its length).
        let devices = try AudioDevices(DeviceSettings(captureDevice: ear, playbackDevice: "\(mouth)_air",
                                                      periodFrames: frame, bufferPeriods: 6))
        let bufferFrames = devices.playbackGeometry.bufferFrames
        let thread = WorkerThread(name: "probe-audio") { _ = engine.run(devices: devices) }
        let cpuBefore = Self.processCPUSeconds(), wallBefore = MonotonicClock.nanoseconds()
        try thread.start(priority: 50)
        // Take each raw microphone frame as it comes, stamped with the time it was read.
        var raw: [Int16] = [], readAt: [UInt64] = []
        raw.reserveCapacity(Int((leadIn + clip.duration + tail + 1) * Double(rate)))
        var buffer = [Int16](repeating: 0, count: frame)
        let end = MonotonicClock.nanoseconds() + UInt64((leadIn + clip.duration + tail) * 1e9)
        while MonotonicClock.nanoseconds() < end {
            captured.wait(seconds: 0.05)
            while engine.rawMicrophone!.read(into: &buffer, count: frame) {
                raw += buffer
                readAt.append(MonotonicClock.nanoseconds())
            }
            while engine.microphone.read(into: &buffer, count: frame) {}  // only the raw microphone is recorded
        }
        engine.stopRequest.set()
        thread.join()
        let cpuShare = (Self.processCPUSeconds() - cpuBefore) / (Double(MonotonicClock.nanoseconds() - wallBefore) / 1e9)

        let recordingPath = "\(folder)/\(name).wav"
        try WAVAudio(sampleRate: rate, channels: 1, samples: raw).write(path: recordingPath)
        let recorded = Signals.toFloat(raw), reference = Signals.toFloat(clip.samples)
        let found = Correlation.findDelay(reference: reference, in: recorded, maxLag: max(0, raw.count - 1))
        // Each stretch of speech on its own: the time it was read back minus the time its first
        // frame was handed out (the clip's first frame's time plus its position: playback is paced
        // by the device), minus the probe's own buffering.
        var windows: [Window] = []
        let w = Int(Self.windowSeconds * Double(rate))
        let markTime = source.markTime.load
        var start = 0
        while markTime > 0, start + w / 2 <= clip.samples.count {
            let piece = Array(reference[start..<min(start + w, reference.count)])
            if Levels.rmsDB(piece) > -40,
               let at = Correlation.findDelay(reference: piece, in: recorded, maxLag: max(0, raw.count - piece.count)) {
                let k = at.lagSamples / frame, offset = at.lagSamples % frame
                if k < readAt.count {
                    let total = Double(Int(readAt[k]) - markTime) / 1e6 - Double(start) * 1000 / Double(rate)
                    windows.append(Window(clipStart: Double(start) / Double(rate), peak: at.peak,
                                          delayMs: total - Double(bufferFrames - offset) * 1000 / Double(rate)))
                }
            }
            start += w
        }
        return Result(recording: raw, recordingPath: recordingPath, clipPath: clipPath, found: found, windows: windows,
                      xruns: engine.stats.captureXruns.load + engine.stats.playbackXruns.load, cpuShare: cpuShare)
    }

    /// User and system time of this whole process so far, seconds.
    static func processCPUSeconds() -> Double {
        var t = timespec()
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t)
        return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
    }
}
