import RealTime

/// Counters the audio thread writes and anyone may read (status, logs, tests).
public final class EngineStats: Sendable {
    /// Frames captured, processed and played.
    public let frames = Counter()
    public let captureXruns = Counter()
    public let playbackXruns = Counter()
    /// Processed microphone frames lost because the consumer fell behind.
    public let micDrops = Counter()
    /// Playback writes that took less than the frame the device had room for (should stay 0).
    public let playbackShortWrites = Counter()
    /// Polls that timed out: the device stopped delivering.
    public let pollTimeouts = Counter()
    /// Frames of capture time lost (a restart after an xrun, audio a sound server dropped without
    /// an xrun: see `CaptureClock`) or not sent (stale). The network sender advances its RTP
    /// timestamp by them, so a receiver hears a gap where time was lost, not a growing delay.
    public let captureGapFrames = Counter()
    /// Of those: captured frames found already old (a backlog beyond `AudioEngine.maxCaptureBacklogMs`
    /// after a stall or a slow start), echo-cancelled but not sent: late audio is worse than none.
    public let staleCaptureFrames = Counter()
    /// Capture + playback delay reported by snd_pcm_delay, in frames.
    public let captureDelayFrames = Counter()
    public let playbackDelayFrames = Counter()
    /// CPU time of one frame's processing (echo cancellation + mix), last and maximum, in ns.
    public let processNanos = Counter()
    public let processNanosMax = Counter()
    /// Set while a session runs the loop (the systemd watchdog follows it later).
    public let running = Flag(false)
    public let sessions = Counter()
    public init() {}

    public var xruns: Int { captureXruns.load + playbackXruns.load }
}

/// Why an engine session ended.
public enum SessionEnd: Sendable {
    case stopped
    /// A device failed in a way xrun recovery cannot fix (unplugged, server gone, ...).
    case deviceFailed(device: String, operation: StaticString, code: Int32)
}

extension SessionEnd: CustomStringConvertible {
    public var description: String {
        switch self {
        case .stopped: "stopped"
        case let .deviceFailed(device, operation, code): "device '\(device)': \(operation) failed: \(alsaErrorText(code)) (\(code))"
        }
    }
}
