import AudioPipeline
import EchoCancel
import Foundation
import Glibc
import Logging
import RealTime

/// Exit codes, from sysexits.h where one fits.
public enum ExitCode: Int32 {
    case ok = 0
    case usage = 64
    case unavailable = 69  // a device could not be opened and retry is off
    case software = 70
    case config = 78
}

/// intercomd: builds the audio engine from the configuration, supervises it, and stops on a signal.
public final class Daemon: @unchecked Sendable {
    // @unchecked: built and driven from the main thread; other threads see only the thread-safe parts.
    public let config: DaemonConfig
    public let engine: AudioEngine
    public let supervisor: AudioSupervisor
    private let local: LocalMode
    private let delayEstimator: EchoDelayEstimator
    private let log: Logger
    private var reporter: StatsReporter?

    public init(config: DaemonConfig, logger: Logger) throws {
        self.config = config
        log = logger
        let a = config.audio
        let frame = a.framesPerPeriod
        let echo = EchoCancelSettings(
            sampleRate: a.sampleRate, frameSize: frame, tailMilliseconds: config.echo.tailMs,
            noiseSuppressDB: config.echo.noiseSuppressDb, echoSuppressDB: config.echo.echoSuppressDb,
            echoSuppressActiveDB: config.echo.echoSuppressActiveDb, agc: config.echo.agc)
        let canceller = try EchoCanceller(echo)
        canceller.bypass.set(!config.echo.enabled)
        delayEstimator = EchoDelayEstimator(canceller: canceller)

        // Local mode's far end is one mixer input; the network streams join here in a later version.
        let farEndRing = config.local.farEndWav.map { _ in SampleRing(minimumCapacity: frame * 8) }
        let inputs = farEndRing.map { [MixerInput(source: $0)] } ?? []
        let mixer = Mixer(inputs: inputs, frameSize: frame)
        mixer.micMuted.set(config.mixer.micMuted)
        mixer.speakerMuted.set(config.mixer.speakerMuted)
        mixer.micGain.store(decibelsToGain(config.mixer.micGainDb))
        mixer.speakerGain.store(decibelsToGain(config.mixer.speakerGainDb))

        engine = AudioEngine(frameSize: frame, mixer: mixer, canceller: canceller,
                             recordRaw: config.local.recordRawWav != nil)
        let devices = DeviceSettings(captureDevice: a.captureDevice, playbackDevice: a.playbackDevice,
                                     sampleRate: a.sampleRate, periodFrames: frame,
                                     bufferPeriods: a.bufferPeriods, link: a.linkDevices)
        supervisor = AudioSupervisor(
            engine: engine, settings: devices, priority: Int32(config.realtime.priority),
            retry: .init(enabled: config.retry.enabled, initialMilliseconds: config.retry.initialMs,
                         maxMilliseconds: config.retry.maxMs),
            logger: logger)
        // Until the network sender consumes the microphone, local mode always drains it
        // (recording it when asked), so a full ring is never mistaken for a lost frame.
        let l = config.local
        local = try LocalMode(farEndPath: l.farEndWav, farEndRing: farEndRing, recordPath: l.recordWav,
                              rawPath: l.recordRawWav, engine: engine, sampleRate: a.sampleRate)
    }

    /// Runs until SIGTERM/SIGINT (or the configured duration) and returns the exit code.
    /// The caller must have blocked those signals in every thread (`Daemon.blockSignals()`).
    public func run() -> ExitCode {
        let a = config.audio
        log.info("intercomd starting: \(a.sampleRate) Hz, \(a.periodMs) ms frames (\(a.framesPerPeriod) samples), echo cancellation \(config.echo.enabled ? "on, tail \(config.echo.tailMs) ms" : "bypassed")")
        if config.realtime.lockMemory {
            if let reason = lockProcessMemory() {
                log.warning("cannot lock memory (\(reason)); page faults may cause xruns")
            } else {
                log.info("memory locked")
            }
        }
        local.start()
        delayEstimator.start()
        supervisor.start()
        if config.log.statsIntervalS > 0 {
            reporter = StatsReporter(engine: engine, echoDelay: delayEstimator.estimate, frameSize: a.framesPerPeriod, sampleRate: a.sampleRate,
                                     interval: config.log.statsIntervalS, logger: log)
            reporter?.start()
        }
        let deadline = config.local.durationS > 0 ? Date().addingTimeInterval(config.local.durationS) : nil
        var code = ExitCode.ok
        while true {
            if let signal = Daemon.waitForSignal(milliseconds: 100) {
                if signal == SIGHUP {
                    log.notice("SIGHUP: configuration reload is not supported yet; restart the service to apply changes")
                    continue
                }
                log.info("signal \(signal): stopping")
                break
            }
            if supervisor.gaveUp.isSet { code = .unavailable; break }
            if let deadline, Date() >= deadline { log.info("duration reached: stopping"); break }
        }
        supervisor.stop()
        delayEstimator.stop()
        reporter?.stop()
        do {
            try local.stop()
        } catch {
            log.error("finishing recordings failed: \(error)")
            code = .software
        }
        log.info("final stats: \(StatsReporter.summary(engine, echoDelayEstimate: delayEstimator.estimate, frameSize: a.framesPerPeriod, sampleRate: a.sampleRate))")
        return code
    }

    /// Blocks the stop and reload signals so only `waitForSignal` receives them; call before any thread starts.
    public static func blockSignals() {
        var set = sigset_t()
        sigemptyset(&set)
        for s in [SIGTERM, SIGINT, SIGHUP] { sigaddset(&set, s) }
        pthread_sigmask(SIG_BLOCK, &set, nil)
    }

    static func waitForSignal(milliseconds: Int) -> Int32? {
        var set = sigset_t()
        sigemptyset(&set)
        for s in [SIGTERM, SIGINT, SIGHUP] { sigaddset(&set, s) }
        var timeout = timespec(tv_sec: milliseconds / 1000, tv_nsec: (milliseconds % 1000) * 1_000_000)
        let s = sigtimedwait(&set, nil, &timeout)
        return s > 0 ? s : nil
    }
}

func decibelsToGain(_ db: Double) -> Double { pow(10, db / 20) }
