/// What the engine asks of the sound card.
public struct DeviceSettings: Sendable, Equatable {
    public var captureDevice: String
    public var playbackDevice: String
    public var sampleRate: Int
    /// Samples per period = samples per processing frame.
    public var periodFrames: Int
    /// Periods in each device's buffer.
    public var bufferPeriods: Int
    /// Periods the engine keeps queued for playback; the rest of the buffer is a reserve for a late
    /// wake-up. nil: the whole buffer (the engine then keeps it full).
    public var fillPeriods: Int?
    public var link: Bool
    /// Silence queued before the streams start: the fill target, and always a period of room.
    public var primePeriods: Int { max(1, min(fillPeriods ?? bufferPeriods, bufferPeriods - 1)) }

    public init(captureDevice: String, playbackDevice: String, sampleRate: Int = 48000,
                periodFrames: Int = 480, bufferPeriods: Int = 3, fillPeriods: Int? = nil, link: Bool = true) {
        self.captureDevice = captureDevice
        self.playbackDevice = playbackDevice
        self.sampleRate = sampleRate
        self.periodFrames = periodFrames
        self.bufferPeriods = bufferPeriods
        self.fillPeriods = fillPeriods
        self.link = link
    }
}

/// An opened, configured capture + playback pair, ready for one engine session.
public final class AudioDevices: Sendable {
    public let capture: ALSAPCM
    public let playback: ALSAPCM
    public let captureGeometry: PCMGeometry
    public let playbackGeometry: PCMGeometry
    /// nil when linked, else alsa-lib's reason why linking was not possible.
    public let linkFailure: String?
    /// Frames the engine keeps queued in the playback buffer (judged by its free room).
    public let playbackFillFrames: Int
    /// Periods of silence queued on playback at start.
    public let primePeriods: Int

    public init(_ s: DeviceSettings) throws {
        capture = try ALSAPCM(name: s.captureDevice, direction: .capture)
        playback = try ALSAPCM(name: s.playbackDevice, direction: .playback)
        captureGeometry = try capture.configure(rate: s.sampleRate, channels: 1, periodFrames: s.periodFrames, periods: s.bufferPeriods)
        playbackGeometry = try playback.configure(rate: s.sampleRate, channels: 1, periodFrames: s.periodFrames,
                                                  periods: s.bufferPeriods, startPeriods: s.primePeriods)
        // The engine never waits in a playback write.
        try playback.setNonBlocking(true)
        let periods = max(1, playbackGeometry.bufferFrames / playbackGeometry.periodFrames)
        let fill = min(periods, s.fillPeriods ?? periods)
        playbackFillFrames = fill * playbackGeometry.periodFrames
        primePeriods = max(1, min(fill, periods - 1))
        if !s.link {
            linkFailure = "disabled in configuration"
        } else {
            do {
                try capture.link(with: playback)
                linkFailure = nil
            } catch let e as ALSAError {
                linkFailure = e.message
            }
        }
    }

    public var isLinked: Bool { linkFailure == nil }
    /// Whether the engine keeps the whole playback buffer full (and can wait for playback's room).
    public var keepsPlaybackFull: Bool { playbackFillFrames >= playbackGeometry.bufferFrames }
}
