/// What the engine asks of the sound card.
public struct DeviceSettings: Sendable, Equatable {
    public var captureDevice: String
    public var playbackDevice: String
    public var sampleRate: Int
    /// Samples per period = samples per processing frame.
    public var periodFrames: Int
    /// Periods in the playback buffer, which the engine keeps full (capture gets at least 8); priming
    /// queues `bufferPeriods - 1` before the streams start.
    public var bufferPeriods: Int
    public var link: Bool
    public var primePeriods: Int { max(1, bufferPeriods - 1) }

    public init(captureDevice: String, playbackDevice: String, sampleRate: Int = 48000,
                periodFrames: Int = 480, bufferPeriods: Int = 3, link: Bool = true) {
        self.captureDevice = captureDevice
        self.playbackDevice = playbackDevice
        self.sampleRate = sampleRate
        self.periodFrames = periodFrames
        self.bufferPeriods = bufferPeriods
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

    public init(_ s: DeviceSettings) throws {
        capture = try ALSAPCM(name: s.captureDevice, direction: .capture)
        playback = try ALSAPCM(name: s.playbackDevice, direction: .playback)
        captureGeometry = try capture.configure(rate: s.sampleRate, channels: 1, periodFrames: s.periodFrames, periods: s.bufferPeriods)
        playbackGeometry = try playback.configure(rate: s.sampleRate, channels: 1, periodFrames: s.periodFrames,
                                                  periods: s.bufferPeriods, startPeriods: s.primePeriods)
        // The engine never waits in a playback write; it polls playback while frames are pending.
        try playback.setNonBlocking(true)
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
    /// Periods of silence queued on playback at start: one period of room absorbs scheduling jitter.
    public var primePeriods: Int { max(1, playbackGeometry.bufferFrames / playbackGeometry.periodFrames - 1) }
}
