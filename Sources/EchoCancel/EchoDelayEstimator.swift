import Foundation
import Synchronization
import Posix
import RealTime
import SignalTools

/// Finds how long the far-end signal takes to come back into the microphone (the bulk echo delay),
/// so that the canceller's reference can be delayed to match and its adaptive filter only has to
/// model the room. Sound servers and USB devices add tens to hundreds of milliseconds here, and the
/// amount can change on every stream restart; a filter long enough to cover that converges slowly.
///
/// Runs on its own ordinary thread. The audio thread only copies frames into two lock-free taps.
public final class EchoDelayEstimator: Service, @unchecked Sendable {
    // @unchecked: the history buffers belong to the estimator thread; the rest are atomics and rings.
    public var serviceName: String { "echo delay estimator" }
    /// Estimates are made at 8 kHz: enough for speech, and 36 times cheaper to correlate.
    static let decimation = 6
    public let maxDelaySamples: Int
    /// The last measured delay in samples at the full rate (`none`: not measured yet).
    public let estimate = Counter()
    public static let none = Int.min

    private let canceller: EchoCanceller
    private let window: Int      // decimated samples correlated per estimate
    private let maxLag: Int      // decimated
    /// How early an echo can be found (20 ms, decimated): see `EchoCanceller.requestEchoDelay`.
    private let earlyLag: Int
    // Histories at 8 kHz, each ending at absolute (decimated) sample index `*End`. Both taps get one
    // frame per engine cycle, so equal indices mean "captured while that reference was written".
    private var mic: [Float] = []
    private var micEnd = 0
    private var reference: [Float] = []
    private var referenceEnd = 0
    private var candidate: Int?
    /// The canceller's re-pairings and restarts, and the tap frame where the newest pairing began,
    /// when the histories were last cut: a window across two pairings finds neither delay.
    private var pairings = 0
    private var pairingStart = 0
    /// Frames read from the taps so far (their index in the canceller's `pairingStartTapFrame`).
    private var drainedFrames = 0
    /// Steps since the last estimate: a settled delay is measured every other step.
    private var idleSteps = 0
    /// No delay measured since the last re-pairing or restart: the canceller may be holding its
    /// filter for one, so shorter windows are correlated (two of them must still agree: a single
    /// estimate from a window across the catch-up after a stall can be 10 ms off, and a filter
    /// that ran at the wrong place unlearns the path).
    private var awaitingFirst = false
    private let worker = Mutex<PeriodicWorker?>(nil)
    /// The shortest range of lags searched in a new pairing (100 ms at 8 kHz), and how far from
    /// its end a peak must lie (10 ms).
    static let firstSearchLags = 800
    static let edgeLags = 80

    public init(canceller: EchoCanceller, maxDelayMilliseconds: Int = 300) {
        self.canceller = canceller
        let rate = canceller.settings.sampleRate
        maxDelaySamples = rate * maxDelayMilliseconds / 1000
        maxLag = maxDelaySamples / Self.decimation
        earlyLag = rate / 50 / Self.decimation
        window = rate / Self.decimation  // 1 s of speech per estimate
        estimate.store(Self.none)
    }

    /// How often `step` runs: a new pairing is measured this often, a settled one every other step.
    public static let stepSeconds = 0.125

    /// Runs `step` every `stepSeconds` on the "echo-delay" thread until `stop`.
    public func start() throws(SystemError) {
        let w = try PeriodicWorker(name: "echo-delay", interval: Self.stepSeconds) { [self] in step() }
        worker.withLock { $0 = w }
    }

    public func stop() {
        worker.withLock { w in defer { w = nil }; return w }?.stop()
    }

    /// One round: takes what the taps collected and estimates. The thread runs it every
    /// `stepSeconds`; tests call it directly (the taps hold half a second).
    public func step() {
        let now = canceller.realignments.load + canceller.resets.load
        let start = canceller.pairingStartTapFrame.load
        if now != pairings || start != pairingStart {
            // Only what was captured in the new pairing counts; what came since it began stays,
            // so the first estimate needs no more far-end sound than it must.
            pairings = now
            pairingStart = start
            let keep = max(0, drainedFrames - start) * (canceller.settings.frameSize / Self.decimation)
            mic.removeFirst(max(0, mic.count - keep))
            reference.removeFirst(max(0, reference.count - keep))
            candidate = nil
            awaitingFirst = true
        }
        drainTaps()
        idleSteps += 1
        guard awaitingFirst || idleSteps >= 2 else { return }
        idleSteps = 0
        estimateOnce()
    }

    private func drainTaps() {
        let frame = canceller.settings.frameSize
        var buffer = [Int16](repeating: 0, count: frame)
        var micBuffer = [Int16](repeating: 0, count: frame)
        // Both taps get each frame, the capture first; frames from before the pairing are dropped.
        let frames = min(canceller.captureTap.availableToRead, canceller.referenceTap.availableToRead) / frame
        for _ in 0..<frames {
            _ = canceller.captureTap.read(into: &micBuffer, count: frame)
            _ = canceller.referenceTap.read(into: &buffer, count: frame)
            drainedFrames += 1
            guard drainedFrames > pairingStart else { continue }
            micEnd += append(micBuffer, to: &mic)
            referenceEnd += append(buffer, to: &reference)
        }
        let keep = window + maxLag + canceller.settings.sampleRate / Self.decimation
        if mic.count > keep { mic.removeFirst(mic.count - keep) }
        if reference.count > keep { reference.removeFirst(reference.count - keep) }
    }

    /// Box-filter then keep every 6th sample: a crude low-pass that is fine for finding a delay.
    private func append(_ frame: [Int16], to history: inout [Float]) -> Int {
        let d = Self.decimation
        var i = 0
        while i + d <= frame.count {
            var sum: Float = 0
            for j in 0..<d { sum += Float(frame[i + j]) }
            history.append(sum / Float(d * 32768))
            i += d
        }
        return frame.count / d
    }

    private func estimateOnce() {
        // Microphone: the newest window plus maxLag before it, and `earlyLag` more. Reference: one
        // window starting `earlyLag` after the microphone, so a lag L means the reference came back
        // L - earlyLag samples later (negative: the pairing of the streams put the echo first).
        // Right after a re-pairing the canceller holds its filter until a delay comes, so the
        // search starts as soon as there is a short window and a tenth of a second to search
        // past it, and the range of lags grows with what the new pairing has captured (a peak at
        // the range's edge is not taken: the echo may lie beyond it).
        let length = awaitingFirst ? window * 3 / 8 : window
        let micFirst = micEnd - mic.count, refFirst = referenceEnd - reference.count
        let start = awaitingFirst ? max(micFirst + earlyLag, refFirst, micEnd - length - maxLag) : micEnd - length - maxLag
        let lags = micEnd - start - length
        guard start - earlyLag >= micFirst, start >= refFirst, start + length <= referenceEnd, lags >= Self.firstSearchLags else { return }
        let micSlice = Array(mic[(start - earlyLag - micFirst)...])
        let refSlice = Array(reference[(start - refFirst)..<(start - refFirst + length)])
        guard Levels.rmsDB(refSlice) > -50,
              let found = Correlation.findDelay(reference: refSlice, in: micSlice, maxLag: lags + earlyLag),
              found.peak > 0.3, lags == maxLag || found.lagSamples < lags + earlyLag - Self.edgeLags else { return }
        accept(Int(((found.fractionalLag - Double(earlyLag)) * Double(Self.decimation)).rounded()))
    }

    /// Two estimates within 1 ms of each other make a measured delay; the canceller gets each
    /// one and decides whether its reference must move (`EchoCanceller.requestEchoDelay`).
    private func accept(_ delay: Int) {
        defer { candidate = delay }
        guard let c = candidate, abs(c - delay) <= canceller.settings.sampleRate / 1000 else { return }
        awaitingFirst = false
        estimate.store(delay)
        canceller.requestEchoDelay(samples: delay)
    }
}
