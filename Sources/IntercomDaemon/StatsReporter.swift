import AudioPipeline
import Control
import EchoCancel
import Foundation
import Logging
import Posix
import RealTime

/// Logs the engine's counters at a fixed interval from an ordinary thread.
final class StatsReporter: Service, @unchecked Sendable {
    // @unchecked: the thread only reads atomics; `stopping` is guarded by the semaphore handshake.
    var serviceName: String { "statistics log" }
    private let engine: AudioEngine
    private let echoDelay: Counter
    private let frameSize: Int
    private let sampleRate: Int
    private let interval: Double
    private let log: Logger
    private var worker: PeriodicWorker?
    private let extra: @Sendable () -> String?

    /// - Parameter extra: a further line to log each time (the network's), if any.
    init(engine: AudioEngine, echoDelay: Counter, frameSize: Int, sampleRate: Int, interval: Double, logger: Logger,
         extra: @escaping @Sendable () -> String? = { nil }) {
        self.extra = extra
        self.engine = engine
        self.echoDelay = echoDelay
        self.frameSize = frameSize
        self.sampleRate = sampleRate
        self.interval = interval
        log = logger
    }

    func start() throws(SystemError) {
        worker = try PeriodicWorker(name: "stats", interval: interval) { [self] in
            log.info("stats: \(Self.summary(engine, echoDelayEstimate: echoDelay, frameSize: frameSize, sampleRate: sampleRate))")
            if let line = extra() { log.info("stats: \(line)") }
        }
    }

    func stop() {
        worker?.stop()
        worker = nil
    }

    static func summary(_ e: AudioEngine, echoDelayEstimate: Counter, frameSize: Int, sampleRate: Int) -> String {
        let s = e.stats
        let ms = { (frames: Int) in String(format: "%.1f", Double(frames) * 1000 / Double(sampleRate)) }
        let frameNanos = Double(frameSize) * 1e9 / Double(sampleRate)
        let cpu = String(format: "%.2f", Double(s.processNanos.load) / frameNanos * 100)
        let cpuMax = String(format: "%.2f", Double(s.processNanosMax.load) / frameNanos * 100)
        let erle = String(format: "%.1f", e.canceller.erleDB.load)
        let measured = echoDelayEstimate.load
        let echoDelay = measured == EchoDelayEstimator.none ? "unmeasured" : "\(ms(measured))ms"
        let underruns = e.mixer.inputs.map { "\($0.underruns.load)" }.joined(separator: ",")
        return "frames=\(s.frames.load) xruns=\(s.xruns) (capture \(s.captureXruns.load), playback \(s.playbackXruns.load)) "
            + "erle=\(erle)dB echo_delay=\(echoDelay) delay=\(ms(s.captureDelayFrames.load))+\(ms(s.playbackDelayFrames.load))ms "
            + "cpu=\(cpu)% (max \(cpuMax)%) mic_drops=\(s.micDrops.load) input_underruns=[\(underruns)] "
            + "reference_misses=\(e.canceller.referenceMisses.load) short_writes=\(s.playbackShortWrites.load) aec_resets=\(e.canceller.resets.load) aec_realigned=\(e.canceller.realignments.load) aec_moved=\(e.canceller.referenceMoves.load) echo_gated=\(e.canceller.gatedFrames.load) sessions=\(s.sessions.load) capture_gap_frames=\(s.captureGapFrames.load) stale=\(s.staleCaptureFrames.load) poll_timeouts=\(s.pollTimeouts.load)"
            + (e.microphoneChain.howlGuard.map { String(format: " howls=%d guard=-%.1fdB", $0.howls.load, $0.attenuationDB.load) } ?? "")
            + (e.microphoneChain.loopCanceller.map { String(format: " loop_removed=%.1fdB loop_late=%d", $0.removedDB.load, $0.lateReferenceFrames.load) } ?? "")
    }
}

/// Reads the daemon's counters for `stats` (from the same atomics as the statistics log).
struct StatisticsSource: Sendable {
    let engine: AudioEngine
    let supervisor: AudioSupervisor
    let echoDelay: Counter
    let sampleRate: Int
    let network: NetworkMedia?
    let calls: CallService?
    let reloads: ReloadHistory
    let site: SiteKeeper?
    let selfTest: SelfTest?

    func read() -> DaemonStatistics {
        let s = engine.stats
        let delay = echoDelay.load
        let devices = supervisor.settings.devices
        let audio = DaemonStatistics.Audio(
            running: s.running.isSet, captureDevice: devices.captureDevice, playbackDevice: devices.playbackDevice, frames: s.frames.load, xruns: s.xruns, captureXruns: s.captureXruns.load,
            playbackXruns: s.playbackXruns.load, sessions: s.sessions.load, captureGapFrames: s.captureGapFrames.load,
            staleCaptureFrames: s.staleCaptureFrames.load,
            captureDelayMs: Double(s.captureDelayFrames.load) * 1000 / Double(sampleRate), micDrops: s.micDrops.load, microphoneClippedSamples: engine.microphoneChain.gain.clippedSamples.load,
            speakerClippedSamples: engine.mixer.clippedSamples.load, echoReturnLossEnhancementDB: engine.canceller.erleDB.load,
            echoDelayMs: delay == EchoDelayEstimator.none ? nil : Double(delay) * 1000 / Double(sampleRate),
            echoCancellerResets: engine.canceller.resets.load, echoCancellerRealignments: engine.canceller.realignments.load,
            echoReferenceMoves: engine.canceller.referenceMoves.load,
            processMaxMs: Double(s.processNanosMax.load) / 1e6, howls: engine.microphoneChain.howlGuard?.howls.load,
            howlGuardAttenuationDB: engine.microphoneChain.howlGuard?.attenuationDB.load,
            loopRemovedDB: engine.microphoneChain.loopCanceller?.removedDB.load,
            loopLateFrames: engine.microphoneChain.loopCanceller?.lateReferenceFrames.load,
            loopEngaged: engine.microphoneChain.loopCanceller?.engaged.isSet,
            loopEngagements: engine.microphoneChain.loopCanceller?.engagements.load,
            echoGatedFrames: engine.canceller.gatedFrames.load,
            playbackDelayMs: Double(s.playbackDelayFrames.load) * 1000 / Double(sampleRate),
            echoChainDelayMs: engine.canceller.delaysAFrame ? Double(engine.canceller.settings.frameSize) * 1000 / Double(sampleRate) : 0)
        return DaemonStatistics(audio: audio, network: network?.statistics(), calls: calls?.statistics(), reload: reloads.snapshot,
                                site: site?.snapshot, selfTest: selfTest?.statistics)
    }
}
