import Glibc
import RealTime

/// Acoustic echo cancellation for the audio thread.
///
/// Call `played(_:)` right after each frame is written to the playback PCM and `process(...)`
/// right after each frame is read from the capture PCM. The frames written but not yet matched
/// with a capture wait in a small queue, so the reference lags by the playback buffer's depth:
/// the same pairing as speexdsp's echo_playback/echo_capture, done here because those helpers
/// print warnings to stderr from the audio thread at start-up and after every xrun.
public final class EchoCanceller: @unchecked Sendable {
    // @unchecked: used by the audio thread only, apart from the atomic `bypass` and statistics.
    public let settings: EchoCancelSettings
    /// Run-time switch: when set, the microphone passes unprocessed (used to prove echo would howl).
    public let bypass = Flag(false)
    /// Smoothed echo return loss enhancement in dB, updated while the far end is active.
    public let erleDB = Gauge(0)
    /// Frames for which no reference was queued (played silence was assumed).
    public let referenceUnderflows = Counter()
    /// Reference frames dropped because the queue was full (playback ran ahead of capture).
    public let referenceOverflows = Counter()
    public let resets = Counter()

    private let speex: SpeexEcho
    private let frame: Int
    private let queue: UnsafeMutablePointer<Int16>
    private let queueFrames: Int
    private var queued = 0
    private let silence: UnsafeMutablePointer<Int16>
    private var wasBypassed = false
    private var erle = ERLETracker()

    /// - Parameter maxQueuedFrames: bound on played-but-unmatched frames; above it the oldest is dropped.
    public init(_ settings: EchoCancelSettings, maxQueuedFrames: Int = 8) throws {
        self.settings = settings
        speex = try SpeexEcho(settings)
        frame = settings.frameSize
        queueFrames = maxQueuedFrames
        queue = .allocate(capacity: frame * maxQueuedFrames)
        queue.initialize(repeating: 0, count: frame * maxQueuedFrames)
        silence = .allocate(capacity: frame)
        silence.initialize(repeating: 0, count: frame)
    }

    deinit {
        queue.deallocate()
        silence.deallocate()
    }

    /// Feeds one frame exactly as it was written to the speaker.
    public func played(_ samples: UnsafePointer<Int16>) {
        if queued == queueFrames {
            dropOldest()
            referenceOverflows.increment()
        }
        (queue + queued * frame).update(from: samples, count: frame)
        queued += 1
    }

    /// Cleans one captured frame into `output` using the oldest queued reference.
    public func process(capture: UnsafePointer<Int16>, output: UnsafeMutablePointer<Int16>) {
        let reference: UnsafePointer<Int16>
        if queued > 0 {
            reference = UnsafePointer(queue)
        } else {
            reference = UnsafePointer(silence)
            referenceUnderflows.increment()
        }
        if bypass.isSet {
            output.update(from: capture, count: frame)
            wasBypassed = true
        } else {
            if wasBypassed { speex.reset(); wasBypassed = false }
            speex.cancel(capture: capture, reference: reference, output: output)
            if let db = erle.update(capture: capture, output: output, reference: reference, count: frame) {
                erleDB.store(db)
            }
        }
        if queued > 0 { dropOldest() }
    }

    /// Forgets the echo path and the queued reference; call after an xrun.
    public func reset() {
        speex.reset()
        queued = 0
        erle = ERLETracker()
        resets.increment()
    }

    private func dropOldest() {
        queued -= 1
        if queued > 0 { queue.update(from: queue + frame, count: queued * frame) }
    }
}

/// Ratio of microphone to output energy, smoothed over about a second of far-end activity.
struct ERLETracker {
    private var micEnergy = 0.0
    private var outEnergy = 0.0
    private var activeFrames = 0
    /// Far-end frames quieter than about -50 dBFS say nothing about the echo path.
    private static let referenceFloor = 32768.0 * 32768.0 * 1e-5
    private static let smoothing = 0.05

    mutating func update(capture: UnsafePointer<Int16>, output: UnsafePointer<Int16>,
                         reference: UnsafePointer<Int16>, count: Int) -> Double? {
        var r = 0.0, m = 0.0, o = 0.0
        for i in 0..<count {
            let rv = Double(reference[i]), mv = Double(capture[i]), ov = Double(output[i])
            r += rv * rv; m += mv * mv; o += ov * ov
        }
        let n = Double(count)
        guard r / n > Self.referenceFloor else { return nil }
        micEnergy += Self.smoothing * (m / n - micEnergy)
        outEnergy += Self.smoothing * (o / n - outEnergy)
        activeFrames += 1
        guard activeFrames > 10, micEnergy > 0 else { return nil }
        return 10 * log10((micEnergy + 1) / (outEnergy + 1))
    }
}
