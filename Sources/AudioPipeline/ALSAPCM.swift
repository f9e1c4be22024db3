import CALSA
import Glibc

// The only file that calls alsa-lib. Set-up calls throw `ALSAError`; the calls the audio thread
// makes in steady state return the raw negative errno instead, so they never allocate an error.

public struct ALSAError: Error, CustomStringConvertible, Equatable {
    public let device: String
    public let operation: String
    public let code: Int32
    /// alsa-lib's own text for `code` (snd_strerror).
    public let message: String

    public init(device: String, operation: String, code: Int32) {
        self.device = device
        self.operation = operation
        self.code = code
        message = String(cString: snd_strerror(code))
    }

    public var description: String { "ALSA device '\(device)': \(operation) failed: \(message) (\(code))" }
}

public enum PCMDirection: Sendable {
    case capture, playback
    var alsa: snd_pcm_stream_t { self == .capture ? SND_PCM_STREAM_CAPTURE : SND_PCM_STREAM_PLAYBACK }
}

/// What the device actually granted.
public struct PCMGeometry: Sendable, Equatable {
    public let rate: Int
    public let periodFrames: Int
    public let bufferFrames: Int
}

/// One open ALSA PCM: 16-bit interleaved mono at a fixed rate.
public final class ALSAPCM: @unchecked Sendable {
    // @unchecked: configured on one thread, then handed to the audio thread, which alone uses it.
    public let name: String
    public let direction: PCMDirection
    public private(set) var geometry = PCMGeometry(rate: 0, periodFrames: 0, bufferFrames: 0)
    fileprivate let handle: OpaquePointer

    public init(name: String, direction: PCMDirection) throws {
        var h: OpaquePointer?
        let rc = snd_pcm_open(&h, name, direction.alsa, 0)
        guard rc >= 0, let h else { throw ALSAError(device: name, operation: "open for \(direction)", code: rc) }
        self.name = name
        self.direction = direction
        handle = h
    }

    deinit { snd_pcm_close(handle) }

    /// In non-blocking mode reads and writes return -EAGAIN instead of waiting.
    public func setNonBlocking(_ on: Bool) throws {
        try check(snd_pcm_nonblock(handle, on ? 1 : 0), "set non-blocking mode")
    }

    /// Asks for `periodFrames` per period and `periods` periods in the buffer; the device may round.
    /// A playback stream starts by itself once `startPeriods` periods are queued; capture is started explicitly.
    public func configure(rate: Int, channels: Int, periodFrames: Int, periods: Int, startPeriods: Int = 1) throws -> PCMGeometry {
        var hw: OpaquePointer?
        try check(snd_pcm_hw_params_malloc(&hw), "allocate hw params")
        defer { snd_pcm_hw_params_free(hw) }
        try check(snd_pcm_hw_params_any(handle, hw), "read hw params")
        try check(snd_pcm_hw_params_set_access(handle, hw, SND_PCM_ACCESS_RW_INTERLEAVED), "set interleaved access")
        try check(snd_pcm_hw_params_set_format(handle, hw, SND_PCM_FORMAT_S16_LE), "set format S16_LE")
        try check(snd_pcm_hw_params_set_channels(handle, hw, UInt32(channels)), "set \(channels) channel(s)")
        // Resampling in the plugin layer would add delay the echo canceller cannot see: ask for the exact rate.
        try check(snd_pcm_hw_params_set_rate_resample(handle, hw, 0), "disable resampling")
        try check(snd_pcm_hw_params_set_rate(handle, hw, UInt32(rate), 0), "set rate \(rate) Hz")
        var period = snd_pcm_uframes_t(periodFrames)
        var dir: Int32 = 0
        try check(snd_pcm_hw_params_set_period_size_near(handle, hw, &period, &dir), "set period \(periodFrames) frames")
        var buffer = snd_pcm_uframes_t(periodFrames * periods)
        try check(snd_pcm_hw_params_set_buffer_size_near(handle, hw, &buffer), "set buffer \(periodFrames * periods) frames")
        try check(snd_pcm_hw_params(handle, hw), "apply hw params")
        try check(snd_pcm_hw_params_get_period_size(hw, &period, &dir), "read period size")
        try check(snd_pcm_hw_params_get_buffer_size(hw, &buffer), "read buffer size")

        var sw: OpaquePointer?
        try check(snd_pcm_sw_params_malloc(&sw), "allocate sw params")
        defer { snd_pcm_sw_params_free(sw) }
        try check(snd_pcm_sw_params_current(handle, sw), "read sw params")
        try check(snd_pcm_sw_params_set_avail_min(handle, sw, period), "set avail_min")
        // Playback starts as soon as its priming is complete. Sound-server plugins also take this as
        // the level to refill before resuming after an underrun (PulseAudio's prebuf), so it must not
        // exceed what the engine keeps queued.
        var threshold: snd_pcm_uframes_t = 0
        if direction == .playback {
            threshold = period * snd_pcm_uframes_t(max(1, startPeriods))
        } else {
            try check(snd_pcm_sw_params_get_boundary(sw, &threshold), "read boundary")
        }
        try check(snd_pcm_sw_params_set_start_threshold(handle, sw, threshold), "set start threshold")
        try check(snd_pcm_sw_params(handle, sw), "apply sw params")
        geometry = PCMGeometry(rate: rate, periodFrames: Int(period), bufferFrames: Int(buffer))
        return geometry
    }

    /// Links start/stop of two PCMs so capture and playback run in lock step. Fails on devices
    /// that cannot be linked (e.g. plugins): the engine then starts them one after the other.
    public func link(with other: ALSAPCM) throws {
        try check(snd_pcm_link(handle, other.handle), "link with '\(other.name)'")
    }

    public func pollDescriptors() throws -> [pollfd] {
        let count = snd_pcm_poll_descriptors_count(handle)
        guard count > 0 else { throw ALSAError(device: name, operation: "count poll descriptors", code: count < 0 ? count : -EINVAL) }
        var fds = [pollfd](repeating: pollfd(), count: Int(count))
        let got = snd_pcm_poll_descriptors(handle, &fds, UInt32(count))
        guard got > 0 else { throw ALSAError(device: name, operation: "get poll descriptors", code: got < 0 ? got : -EINVAL) }
        return Array(fds.prefix(Int(got)))
    }

    private func check(_ rc: Int32, _ operation: String) throws {
        if rc < 0 { throw ALSAError(device: name, operation: operation, code: rc) }
    }

    // MARK: audio-thread calls: no allocation, errors as negative errno

    /// Frames read, or a negative errno (-EPIPE overrun, -ESTRPIPE suspended, others fatal).
    @inline(__always) public func read(_ buffer: UnsafeMutablePointer<Int16>, frames: Int) -> Int {
        Int(snd_pcm_readi(handle, buffer, snd_pcm_uframes_t(frames)))
    }

    /// Frames written, or a negative errno (-EPIPE underrun).
    @inline(__always) public func write(_ buffer: UnsafePointer<Int16>, frames: Int) -> Int {
        Int(snd_pcm_writei(handle, buffer, snd_pcm_uframes_t(frames)))
    }

    /// Frames that can be read/written now, or a negative errno.
    @inline(__always) public func available() -> Int { Int(snd_pcm_avail_update(handle)) }

    /// Frames between the application and the converter (latency accounting), or nil.
    @inline(__always) public func delay() -> Int? {
        var d: snd_pcm_sframes_t = 0
        return snd_pcm_delay(handle, &d) < 0 ? nil : Int(d)
    }

    /// Returns 0 when the stream is usable again after `error`, else the error it could not handle.
    @inline(__always) public func recover(from error: Int32) -> Int32 { snd_pcm_recover(handle, error, 1) }
    @inline(__always) public func prepare() -> Int32 { snd_pcm_prepare(handle) }
    @inline(__always) public func start() -> Int32 { snd_pcm_start(handle) }
    @inline(__always) public func drop() -> Int32 { snd_pcm_drop(handle) }
    @inline(__always) public var isRunning: Bool { snd_pcm_state(handle) == SND_PCM_STATE_RUNNING }

    /// Decodes poll results into POLLIN/POLLOUT/POLLERR for this PCM.
    @inline(__always) public func revents(_ fds: UnsafeMutablePointer<pollfd>, count: Int) -> (events: Int16, error: Int32) {
        var ev: UInt16 = 0
        let rc = snd_pcm_poll_descriptors_revents(handle, fds, UInt32(count), &ev)
        return (Int16(bitPattern: ev), rc)
    }
}

/// Text of an errno-style code from an audio-thread call, for logs written elsewhere.
public func alsaErrorText(_ code: Int32) -> String { String(cString: snd_strerror(code)) }
