import RealTime

/// Counters the audio thread writes and anyone may read (status, logs, tests).
public final class EngineStats: Sendable {
    /// Frames captured, processed and played.
    public let frames = Counter()
    public let captureXruns = Counter()
    public let playbackXruns = Counter()
    /// Processed microphone frames lost because the consumer fell behind.
    public let micDrops = Counter()
    /// Polls that timed out: the device stopped delivering.
    public let pollTimeouts = Counter()
    /// Capture + playback delay reported by snd_pcm_delay, in frames.
    public let captureDelayFrames = Counter()
    public let playbackDelayFrames = Counter()
    /// CPU time of the last frame's processing (AEC, mix), and the maximum since start, in ns.
    public let processNanos = Counter()
    public let processNanosMax = Counter()
    /// Set while a session runs the loop (the systemd watchdog follows it later).
    public let running = Flag(false)
    public let sessions = Counter()
    public init() {}

    public var xruns: Int { captureXruns.load + playbackXruns.load }
}

/// Why an engine session ended.
public enum SessionEnd: Sendable, Equatable {
    case stopped
    /// A device failed in a way xrun recovery cannot fix (unplugged, server gone, ...).
    case deviceFailed(device: String, operation: StaticString, code: Int32)

    public static func == (a: SessionEnd, b: SessionEnd) -> Bool {
        switch (a, b) {
        case (.stopped, .stopped): true
        case let (.deviceFailed(d1, o1, c1), .deviceFailed(d2, o2, c2)):
            d1 == d2 && o1.description == o2.description && c1 == c2
        default: false
        }
    }
}

extension SessionEnd: CustomStringConvertible {
    public var description: String {
        switch self {
        case .stopped: "stopped"
        case let .deviceFailed(device, operation, code): "device '\(device)': \(operation) failed: \(alsaErrorText(code)) (\(code))"
        }
    }
}
