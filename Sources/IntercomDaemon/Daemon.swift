import AudioPipeline
import Calls
import Codec
import Control
import EchoCancel
import Foundation
import Frames
import Glibc
import Logging
import MetricsText
import Posix
import RealTime
import SignalTools

/// Exit codes, from sysexits.h where one fits.
public enum ExitCode: Int32 {
    case ok = 0
    /// `--loopback`: the measurement found a problem or could not run.
    case measurementFailed = 2
    case usage = 64
    case unavailable = 69  // a device could not be opened and retry is off
    case software = 70
    case config = 78
}

/// intercomd: builds the audio engine from the configuration, supervises it, and stops on a signal.
public final class Daemon: @unchecked Sendable {
    // @unchecked: built and driven from the main thread; other threads see only the thread-safe parts.
    /// The configuration in force (a reload on SIGHUP changes its live parts; main thread only).
    public internal(set) var config: DaemonConfig
    /// The file the configuration came from: read again on SIGHUP (nil: no reload).
    public var configPath: String?
    public let engine: AudioEngine
    public let supervisor: AudioSupervisor
    private let local: LocalMode
    private let network: NetworkMedia?
    let calls: CallsSide?
    /// The status lights, as `[lights] map` says (none while it names none).
    let lights: TerminalLights
    /// The reloads since start, for `stats`.
    let reloads = ReloadHistory()
    /// The site document this terminal runs by (`[site] id`); nil without a site.
    let site: SiteKeeper?
    /// Audio settings a reload read that wait for no call to run, to open the devices again with
    /// them (main thread only; `reopenAudioWhenQuiet`).
    var pendingAudio: PendingAudio?
    struct PendingAudio {
        var audio: AudioSection
        var realtime: RealtimeSection
        var keys: [String]
    }
    /// The supervisor's generation of the devices asked for, and the keys that waited for them
    /// (main thread only).
    var reopening: (generation: Int, keys: [String])?
    /// The site version the configuration in force was joined with (main thread only).
    var appliedSiteVersion: UInt64 = 0
    private let delayEstimator: EchoDelayEstimator
    /// The device round-trip test: offered on the control socket (with calls) and by `--loopback`.
    let deviceLoopback: DeviceLoopback
    /// The terminal's own periodic check (`[selftest]`); nil when off.
    private let selfTest: SelfTest?
    let log: Logger
    /// `GET /metrics` for a monitoring system (`[metrics] listen`); nil when off.
    private let metrics: MetricsServer?
    /// The control socket: `stats` and the device loopback everywhere, calls when configured.
    private let control: ControlServer

    /// - Parameter site: the terminal's site, as `TerminalConfiguration.load` read it.
    public init(config: DaemonConfig, logger: Logger, site: SiteKeeper? = nil) throws {
        self.config = config
        self.site = site
        appliedSiteVersion = site?.version ?? 0
        site?.applied(appliedSiteVersion)
        log = logger
        let a = config.audio
        let frame = a.framesPerPeriod
        let microphoneChain = try MicrophoneToWire.microphoneChain(config)
        delayEstimator = EchoDelayEstimator(canceller: microphoneChain.canceller)

        // Mixer inputs: local mode's far end (a fixed input) and one slot per possible remote stream.
        let farEndRing = config.local.farEndWav.map { _ in SampleRing(minimumCapacity: frame * 8) }
        let playoutLead = PlayoutLead()
        if config.testing.timeScale != 1 {
            logger.warning("testing.time_scale = \(config.testing.timeScale): every timer of the daemon runs that much faster (the accelerated soak); never in a practice")
        }
        if config.network.isEnabled && !config.networkMediaEnabled {
            logger.warning("network: no media: without calls ([room] id) media would go in the clear, which only lab mode allows (security.mode)")
        }
        let network = config.networkMediaEnabled ? try NetworkMedia(config: config, logger: logger, playoutLead: playoutLead) : nil
        self.network = network
        // With calls on, the ring and cue channels are two more fixed inputs (mixed, so also in the
        // echo reference).
        let sounds = config.callsEnabled ? try TerminalSounds(config: config) : nil
        let inputs = (farEndRing.map { [MixerInput(source: $0)] } ?? []) + (sounds?.mixerInputs ?? [])
            + (network?.mixerInputs ?? [])
        let mixer = WireToSpeaker.mixer(config, inputs: inputs, playoutLead: playoutLead)

        let loopback = DeviceLoopback(sampleRate: a.sampleRate, frameSize: frame, logger: logger)
        deviceLoopback = loopback
        engine = try AudioEngine(frameSize: frame, mixer: mixer, microphoneChain: microphoneChain,
                             recordRaw: config.local.recordRawWav != nil, microphoneReady: network?.doorbell,
                             maxCaptureBacklogMs: network == nil ? nil : AudioEngine.liveCaptureBacklogMs,
                             loopback: loopback.probe)
        supervisor = try AudioSupervisor(
            engine: engine, settings: Self.deviceSettings(config), priority: Int32(config.realtime.priority),
            retry: .init(enabled: config.retry.enabled, initialMilliseconds: config.retry.initialMs,
                         maxMilliseconds: config.retry.maxMs),
            logger: logger)
        // The microphone ring has one reader: the network thread when there is a network (it
        // copies frames to a second ring when they are to be recorded), else local mode, which
        // always drains it so that a full ring is never mistaken for a lost frame.
        let l = config.local
        var recorded: SampleRing? = engine.microphone
        if let network {
            let tee = l.recordWav.map { _ in SampleRing(minimumCapacity: frame * 32) }
            try network.open(engine: engine, tee: tee)
            recorded = tee
        }
        if let sounds, let loop = network?.loop {
            calls = try CallsSide(config: config, routes: loop, microphone: microphoneChain.gain, mixer: mixer, sounds: sounds,
                                  callInputs: network?.mixerInputs ?? [], site: site, logger: logger)
            calls?.service.mediaStreams = { [network] in network?.mediaStreams() ?? [] }
            let processingMs = config.echo.enabled && microphoneChain.canceller.delaysAFrame ? a.periodMs : 0
            let jitter = config.jitter
            let lookaheadMs = Double(network?.encoderLookahead ?? 0) * 1000 / Double(a.sampleRate)
            calls?.service.terminalTiming = { [engine, supervisor] in
                let devices = supervisor.settings.devices
                return TerminalTiming(periodMs: a.periodMs, bufferPeriods: devices.bufferPeriods, fillPeriods: devices.fillPeriods ?? devices.bufferPeriods,
                               processingDelayMs: processingMs,
                               codecLookaheadMs: lookaheadMs, jitterMinMs: jitter.minDelayMs, jitterMaxMs: jitter.maxDelayMs,
                               xruns: engine.stats.xruns, processMaxMs: Double(engine.stats.processNanosMax.load) / 1e6)
            }
        } else {
            calls = nil
        }
        var technicianGroup: UInt32?
        if !config.control.technicianGroup.isEmpty {
            do {
                technicianGroup = try UnixSocket.resolveGroup(config.control.technicianGroup)
            } catch {
                throw ConfigError(source: "configuration", issues: [ConfigIssue(
                    key: "control.technician_group", problem: "\(config.control.technicianGroup): \(error.reason)")])
            }
        }
        let callService = calls?.service
        let selfTest = config.selfTest.isEnabled && a.enabled
            ? SelfTest(settings: config.selfTest, loopback: loopback, isQuiet: { callService?.isQuiet ?? true },
                       audioRunning: { [engine] in engine.stats.running.isSet }, timeScale: config.testing.timeScale, logger: logger)
            : nil
        self.selfTest = selfTest
        let started = MonotonicClock.seconds()
        callService?.health = { [engine, supervisor] in
            // Nothing told while the devices are first being opened: "unavailable" would be false.
            if a.enabled, !engine.stats.running.isSet, engine.stats.sessions.load == 0, !supervisor.failedToOpen.isSet { return nil }
            return TerminalHealth(audio: !a.enabled ? .off : engine.stats.running.isSet ? .running : .unavailable,
                           xruns: UInt32(clamping: engine.stats.xruns),
                           selfTest: selfTest?.statistics.last.map { $0.passed ? .passed : .failed } ?? TerminalHealth.Check.none,
                           uptimeSeconds: UInt32(clamping: Int(MonotonicClock.seconds() - started)))
        }
        let statistics = StatisticsSource(engine: engine, supervisor: supervisor, echoDelay: delayEstimator.estimate, sampleRate: a.sampleRate,
                                          network: network, calls: callService, reloads: reloads, site: site, selfTest: selfTest)
        control = try ControlServer(settings: config.controlSettings(), handler: DaemonControl(
            statistics: { statistics.read() }, loopback: loopback, audioRunning: { [engine] in engine.stats.running.isSet },
            calls: calls?.service, technicianGroup: technicianGroup, logger: logger))
        calls?.service.control = control
        metrics = try Self.metricsServer(config, logger: logger) { statistics.read() }
        lights = TerminalLights(settings: config.lightsSettings(), engine: engine, audio: a.enabled, calls: callService, selfTestFailed: { selfTest?.failed ?? false }, logger: logger)
        local = try LocalMode(farEndPath: l.farEndWav, farEndRing: farEndRing, recordPath: l.recordWav,
                              rawPath: l.recordRawWav, microphone: recorded, engine: engine, sampleRate: a.sampleRate)
    }

    /// Runs until SIGTERM/SIGINT (or the configured duration) and returns the exit code.
    /// The caller must have blocked those signals in every thread (`Daemon.blockSignals()`).
    public func run() -> ExitCode {
        let a = config.audio
        log.info("intercomd starting: \(a.sampleRate) Hz, \(a.periodMs) ms frames (\(a.framesPerPeriod) samples), echo cancellation \(config.echo.enabled ? "on, tail \(config.echo.tailMs) ms" : "bypassed")\(config.security.mode == .lab ? "; LAB MODE: with no key, signalling and media in the clear" : "")")
        if config.realtime.lockMemory {
            if let reason = lockProcessMemory() {
                log.warning("cannot lock memory (\(reason)); page faults may cause xruns")
            } else {
                log.info("memory locked")
            }
        }
        var code = ExitCode.ok
        var parts = ServiceList()
        announceSite()  // before the calls thread starts: its first hello says which document it holds
        do throws(ServiceList.StartFailure) {
            try parts.start(partsInStartOrder())
            log.info("control socket \(control.settings.socketPath)")
            if metrics != nil {
                log.info("metrics on http://\(config.metrics.listen)/metrics\(config.metrics.tokenFile == nil ? "" : " (bearer token)")")
            }
            if !a.enabled { log.notice("audio: off ([audio] enabled = false): signalling and notifications only, no calls") }
        } catch {
            log.critical("cannot start \(error)")
            code = .software
        }
        let deadline = config.local.durationS > 0 ? Date().addingTimeInterval(config.local.durationS) : nil
        let notifier = code == .ok ? ServiceNotifier() : nil
        if let notifier {
            do throws(ServiceList.StartFailure) { try parts.start([announceReady(notifier)]) } catch {
                log.error("service health: \(error.error); the watchdog is not fed")
            }
        }
        while code == .ok {
            if let signal = Daemon.waitForSignal(milliseconds: 100) {
                if signal == SIGHUP {
                    reloadOnSignal(notifier)
                    continue
                }
                log.info("signal \(signal): stopping")
                break
            }
            followSite()
            reopenAudioWhenQuiet()
            if let service = calls?.service, !service.hasPendingSettings { reloads.callSettingsTaken() }
            if supervisor.gaveUp.isSet { code = .unavailable; break }
            if let deadline, Date() >= deadline { log.info("duration reached: stopping"); break }
        }
        notifier?.stopping(status: "stopping")
        parts.stopAll { name, seconds in
            if seconds > 0.05 { log.notice("stopping \(name) took \(Int(seconds * 1000)) ms") }
        }
        do {
            try local.finish()
        } catch {
            log.error("finishing recordings failed: \(error)")
            code = .software
        }
        log.info("final stats: \(StatsReporter.summary(engine, echoDelayEstimate: delayEstimator.estimate, frameSize: a.framesPerPeriod, sampleRate: a.sampleRate))")
        if let network { log.info("final \(network.summary())") }
        return code
    }

    /// The metrics endpoint `[metrics]` asks for; a port that cannot be taken or a token file
    /// that will not do is a configuration error naming its key.
    private static func metricsServer(_ config: DaemonConfig, logger: Logger,
                                      snapshot: @escaping @Sendable () -> DaemonStatistics) throws -> MetricsServer? {
        let m = config.metrics
        guard !m.listen.isEmpty else { return nil }
        let token = try m.tokenFile.map { path throws(ConfigError) in try MetricsServer.readToken(path) }
        do {
            return try MetricsServer(listen: try IPv4Endpoint.parse(m.listen), token: token,
                                     identity: TerminalMetrics.Identity(room: config.room.id, software: Software.version, frameMs: config.audio.periodMs),
                                     logger: logger, snapshot: snapshot)
        } catch {
            throw ConfigError(source: "configuration", issues: [ConfigIssue(key: "metrics.listen", problem: "\(m.listen): \(error)")])
        }
    }

    /// The daemon's parts, in the order they start. They stop in the reverse order
    /// (`ServiceList`): the watchdog and the logs first, then what reads or drives the calls (the
    /// audio, the control socket, the metrics, the lights, the site's transfers), then the calls,
    /// whose goodbye the network still carries, then the network and local mode.
    private func partsInStartOrder() -> [any Service] {
        var parts: [(any Service)?] = [local, network, calls]
        parts += siteTransfers()
        parts += [lights, control, metrics]
        if config.audio.enabled { parts += [delayEstimator, supervisor, selfTest] }
        if config.log.statsIntervalS > 0 {
            let network = network
            parts.append(StatsReporter(engine: engine, echoDelay: delayEstimator.estimate, frameSize: config.audio.framesPerPeriod,
                                       sampleRate: config.audio.sampleRate, interval: config.log.statsIntervalS, logger: log,
                                       extra: { network?.summary() }))
        }
        return parts.compactMap { $0 }
    }

    /// With a site and calls, the document's transfers run on the terminal's signalling port
    /// number (TCP). Without them the terminal still runs, by the document it has; the log says why.
    private func siteTransfers() -> [any Service] {
        guard let site, let service = calls?.service, let own = config.rooms[config.room.id] else { return [] }
        do throws(SystemError) {
            // The administrator's orders: the loopback test from the site's page (where there is
            // sound), the room's history for the site's.
            let engine = engine
            let orders = OrderTaker(loopback: config.audio.enabled ? deviceLoopback : nil, audioRunning: { engine.stats.running.isSet },
                                    isQuiet: { service.isQuiet }, calls: service)
            let server = try SiteDocumentServer(port: UInt16(own.signallingPort), keeper: site, orders: orders, logger: log,
                                                onAdopted: { service.siteHeard.ring() })
            let follower = try SiteFollower(room: config.room.id, keeper: site, calls: service, logger: log)
            log.info("site: documents handed out and taken on tcp port \(own.signallingPort)")
            return [server, follower]
        } catch {
            log.error("site: cannot take site document transfers (\(error)); this terminal neither passes on nor fetches new versions")
            return []
        }
    }

    /// Main loop, every tenth of a second: a document adopted since (fetched by the follower, or
    /// handed over by the administrator's tool) is applied.
    private func followSite() {
        guard let site, site.version != appliedSiteVersion, let path = configPath else { return }
        let outcome = reload(from: path)
        reloads.record(outcome)
        if outcome.error != nil {
            log.error("site version \(site.version): \(outcome.summary)")
        } else {
            log.notice("site version \(site.version) applied: \(outcome.summary)")
        }
    }

    /// Under systemd: waits (up to 5 s) for the audio thread and sends READY=1 with a status line;
    /// returns the part that feeds the watchdog and updates the status (the caller starts it).
    private func announceReady(_ notifier: ServiceNotifier) -> ServiceHealth {
        let until = Date().addingTimeInterval(5)
        while config.audio.enabled, !engine.stats.running.isSet, Date() < until { usleep(20_000) }
        let progress = config.audio.enabled ? AudioProgress(frames: { [engine] in engine.stats.frames.load }) : nil
        let health = ServiceHealth(notifier: notifier, progress: progress,
                                   status: { [self] in statusLine() }, logger: log)
        notifier.ready(status: statusLine())
        log.info("service manager notified: ready\(notifier.watchdogInterval.map { String(format: ", watchdog every %.1f s", $0) } ?? "")")
        return health
    }

    static func deviceSettings(_ config: DaemonConfig) -> DeviceSettings {
        let a = config.audio
        return DeviceSettings(captureDevice: a.captureDevice, playbackDevice: a.playbackDevice, sampleRate: a.sampleRate,
                              periodFrames: a.framesPerPeriod, bufferPeriods: a.bufferPeriods, fillPeriods: a.playbackQueuePeriods,
                              link: a.linkDevices)
    }

    /// Main loop: audio settings a reload left waiting are put in force once no call runs and
    /// nothing is being read aloud, by opening the devices again (a pause of a few periods).
    /// Stats say so once the supervisor has tried the new devices (the old session has ended).
    private func reopenAudioWhenQuiet() {
        if let (generation, keys) = reopening, supervisor.hasTried(generation) {
            reopening = nil
            reloads.audioReopened(waiting: pendingAudio?.keys ?? [])
            log.notice("audio devices opened again for \(keys.joined(separator: ", "))")
        }
        guard let pending = pendingAudio, calls?.service.isQuiet ?? true, deviceLoopback.currentStatus.state != .running else { return }
        pendingAudio = nil
        config.audio = pending.audio
        config.realtime = pending.realtime
        let generation = supervisor.reopen(with: .init(devices: Self.deviceSettings(config), priority: Int32(config.realtime.priority)))
        reopening = (generation, pending.keys)
    }

    /// What `systemctl status` shows: the audio, then the calls.
    func statusLine() -> String {
        var audio = !config.audio.enabled ? "no audio (audio.enabled = false)"
            : engine.stats.running.isSet ? "audio running, \(engine.stats.xruns) xruns" : "audio device unavailable, retrying"
        if let pending = pendingAudio { audio += "; audio devices open again after the call for " + pending.keys.joined(separator: ", ") }
        let room = config.callsEnabled ? "room \(config.room.id): " : ""
        return room + (calls?.service.summaryLine() ?? "no calls configured") + "; " + audio
    }

    private func reloadOnSignal(_ notifier: ServiceNotifier?) {
        guard let path = configPath else {
            log.notice("SIGHUP: no configuration file to read again")
            return
        }
        notifier?.reloading()
        let outcome = reload(from: path)
        reloads.record(outcome)
        if outcome.error != nil {
            log.error("SIGHUP: \(outcome.summary)")
        } else {
            log.notice("SIGHUP: \(outcome.summary)")
        }
        notifier?.ready(status: outcome.error == nil ? statusLine() : "reload failed (see the log); " + statusLine())
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
