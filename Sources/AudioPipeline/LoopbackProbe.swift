import Glibc
import RealTime

/// The device round trip, measured inside the running engine: when armed, the speaker plays a test
/// signal instead of the mix (the signal is also the echo reference, so nothing of it is sent),
/// and the raw microphone is recorded from just before it. The audio thread notes stream
/// positions, which count samples from the instant both streams started and so share one clock
/// (the device's): where in the playback stream the signal starts, where the capture stream was
/// when that frame was written, and where the recording starts. `LoopbackAnalysis` (another
/// thread) finds the signal in the recording and turns these into milliseconds. Positions, not
/// wall-clock times and reported device delays: a sound server reports those coarsely.
///
/// Both buffers are allocated at `init`; the audio thread copies samples and stores atomics only.
public final class LoopbackProbe: @unchecked Sendable {
    // @unchecked: `phase`, `playAt`, `recordAt`, `insertLeft` belong to the audio thread; the
    // control thread writes `request`/`insertSamples` before arming and reads the results after
    // `state` says done. They meet only in atomics.
    public enum State: Int, Sendable { case idle = 0, running = 1, done = 2, aborted = 3 }

    public let sampleRate: Int
    public let frameSize: Int
    /// The test signal, as played.
    public let signal: UnsafeMutableBufferPointer<Int16>
    /// The raw microphone from the first recorded frame on.
    public let recording: UnsafeMutableBufferPointer<Int16>

    private let request = Counter()
    private let insert = Counter()
    /// The signal's gain for this measurement, Q15 (32768 = as given).
    private let gainQ15: Counter = { let c = Counter(); c.store(32768); return c }()
    private let stateCell = Counter()
    /// Results, valid once `state` is done: the playback position of the signal's first sample,
    /// the capture position when that frame was written, and the capture position of the
    /// recording's first sample.
    public let signalPosition = Counter()
    public let capturePositionAtWrite = Counter()
    public let recordingStartPosition = Counter()
    public let recorded = Counter()

    private var seen = 0
    private var phase = 0           // 0 idle, 1 recording (signal not yet started), 2 playing, 3 recording the tail
    private var playAt = 0          // next signal sample to play
    private var insertLeft = 0      // silence still to play before the signal (test hook)
    private var scale: Int32 = 32768
    private var recordAt = 0
    private var firstFramePending = false

    /// - Parameters:
    ///   - signal: what the speaker plays (e.g. a chirp).
    ///   - maxRoundTripSamples: how long after the signal's end the microphone is still recorded.
    public init(signal: [Int16], sampleRate: Int, frameSize: Int, maxRoundTripSamples: Int) {
        self.sampleRate = sampleRate
        self.frameSize = frameSize
        self.signal = .allocate(capacity: max(1, signal.count))
        _ = self.signal.initialize(from: signal.isEmpty ? [0] : signal)
        let length = signal.count + maxRoundTripSamples + 2 * frameSize
        recording = .allocate(capacity: length)
        recording.initialize(repeating: 0)
    }

    deinit {
        signal.deallocate()
        recording.deallocate()
    }

    public var state: State { State(rawValue: stateCell.load) ?? .idle }

    /// Control thread: starts a measurement; `insertSamples` of silence are played before the
    /// signal without the analysis knowing (a known delay, for testing the measurement). False
    /// while one runs.
    /// `gain` (0...1) scales the signal as played, e.g. for a quiet self-test.
    public func arm(insertSamples: Int = 0, gain: Double = 1) -> Bool {
        guard state != .running else { return false }
        insert.store(max(0, insertSamples))
        gainQ15.store(Int((min(1, max(0, gain)) * 32768).rounded()))
        recorded.store(0)
        signalPosition.store(-1)
        stateCell.store(State.running.rawValue)
        request.increment()
        return true
    }

    // MARK: audio thread

    /// Capture side, for each raw microphone frame; `position`: the capture stream position of
    /// its first sample.
    @inline(__always)
    public func captured(_ frame: UnsafePointer<Int16>, position: Int) {
        let r = request.load
        if r != seen {
            seen = r
            phase = 1
            playAt = 0
            recordAt = 0
            insertLeft = insert.load
            scale = Int32(gainQ15.load)
        }
        guard phase != 0 else { return }
        if recordAt == 0 { recordingStartPosition.store(position) }
        let n = min(frameSize, recording.count - recordAt)
        (recording.baseAddress! + recordAt).update(from: frame, count: n)
        recordAt += n
        recorded.store(recordAt)
        if recordAt >= recording.count {
            phase = 0
            stateCell.store(State.done.rawValue)
        }
    }

    /// Playback side: replaces the mixed frame while the signal plays. True if it did.
    @inline(__always)
    public func replacePlayback(_ frame: UnsafeMutablePointer<Int16>) -> Bool {
        guard phase == 1 || phase == 2 else { return false }
        if phase == 1 { firstFramePending = true }
        phase = 2
        var i = 0
        while i < frameSize && insertLeft > 0 { frame[i] = 0; i += 1; insertLeft -= 1 }
        let n = min(frameSize - i, signal.count - playAt)
        if n > 0, scale >= 32768 {
            (frame + i).update(from: signal.baseAddress! + playAt, count: n)
        } else if n > 0 {
            for k in 0..<n { frame[i + k] = Int16(truncatingIfNeeded: (Int32(signal[playAt + k]) * scale) >> 15) }
        }
        if i + n < frameSize { (frame + i + n).update(repeating: 0, count: frameSize - i - n) }
        playAt += n
        if playAt >= signal.count { phase = 3 }
        return true
    }

    /// True between filling the signal's first frame and `wrote`.
    public var awaitingWriteTime: Bool { firstFramePending }

    /// Playback side, right after writing a frame: the first frame `replacePlayback` filled
    /// fixes the signal's start (its first sample, inserted silence included) at playback position
    /// `position`, written when the capture stream stood at `captureNow`.
    @inline(__always)
    public func wrote(position: Int, captureNow: Int) {
        guard firstFramePending else { return }
        firstFramePending = false
        signalPosition.store(position)
        capturePositionAtWrite.store(captureNow)
    }

    /// The streams restarted (an xrun): the positions the measurement relies on are gone.
    public func streamsRestarted() {
        guard phase != 0 else { return }
        phase = 0
        stateCell.store(State.aborted.rawValue)
    }
}
