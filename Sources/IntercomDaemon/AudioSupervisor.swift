import AudioPipeline
import Dispatch
import Foundation
import Logging
import Posix
import RealTime
import Synchronization

/// Keeps the audio engine running: opens the devices, runs a session on a real-time thread,
/// and when a device cannot be opened or fails, logs it by name and tries again with back-off.
/// `reopen` ends the session and opens the devices again with new settings (a reload, once no
/// call runs).
public final class AudioSupervisor: Service, @unchecked Sendable {
    // @unchecked: mutable state is touched only by the supervisor thread; `stop` uses a StopSignal,
    // the settings a lock.
    public var serviceName: String { "audio" }
    public struct Retry: Sendable {
        public var enabled: Bool
        public var initialMilliseconds: Int
        public var maxMilliseconds: Int
        public init(enabled: Bool, initialMilliseconds: Int, maxMilliseconds: Int) {
            self.enabled = enabled
            self.initialMilliseconds = initialMilliseconds
            self.maxMilliseconds = maxMilliseconds
        }
    }

    public let engine: AudioEngine
    /// The devices and the audio thread's priority the next session opens with (and the running
    /// one was opened with, unless a reopen is on its way).
    public struct Opening: Sendable, Equatable {
        public var devices: DeviceSettings
        public var priority: Int32
        public init(devices: DeviceSettings, priority: Int32) {
            self.devices = devices
            self.priority = priority
        }
    }
    /// The settings with their generation: each `reopen` makes a new one.
    private let opening: Mutex<(settings: Opening, generation: Int)>
    /// The last generation whose devices were tried (opened, or failed to open).
    private let tried = Atomic<Int>(0)
    public let retry: Retry
    /// Set when the supervisor gave up (retry disabled); the daemon exits non-zero.
    public let gaveUp = Flag(false)
    /// Set once an attempt to open the devices failed: until the first attempt ends, a device
    /// not running yet is starting, not unavailable.
    public let failedToOpen = Flag(false)

    private let log: Logger
    private let stopping: StopSignal
    private var thread: WorkerThread?

    public init(engine: AudioEngine, settings: DeviceSettings, priority: Int32, retry: Retry, logger: Logger) throws(SystemError) {
        stopping = try StopSignal()
        self.engine = engine
        opening = Mutex((Opening(devices: settings, priority: priority), 0))
        self.retry = retry
        log = logger
    }

    public func start() throws(SystemError) {
        thread = try WorkerThread.start(name: "audio-supervisor") { [self] in supervise() }
    }

    public var settings: Opening { opening.withLock { $0.settings } }

    /// Ends the running session (at its next period), or the wait between attempts while a
    /// device is being retried, and opens the devices with `new` (any thread). Returns the
    /// generation `hasTried` answers for.
    @discardableResult
    public func reopen(with new: Opening) -> Int {
        let generation = opening.withLock { o in
            o = (new, o.generation + 1)
            return o.generation
        }
        engine.stopRequest.set()
        stopping.bell.ring()
        return generation
    }

    /// Whether the devices were tried with the settings of `generation` (or later ones): the
    /// session that ran before them has ended, and `audio.running` says how the opening went.
    public func hasTried(_ generation: Int) -> Bool { tried.load(ordering: .acquiring) >= generation }

    /// The generation of the newest settings asked for (a session's own may be older).
    private var latestGeneration: Int { opening.withLock { $0.generation } }

    /// Ends the running session and the retry loop; returns when both are done.
    public func stop() {
        stopping.set()
        engine.stopRequest.set()
        thread?.join()
        thread = nil
    }

    private func supervise() {
        var backoff = retry.initialMilliseconds
        while !stopping.isSet {
            let devices: AudioDevices
            let (now, generation) = opening.withLock { $0 }
            do {
                devices = try AudioDevices(now.devices)
            } catch {
                failedToOpen.set(true)
                tried.store(generation, ordering: .releasing)
                guard retry.enabled else {
                    log.critical("cannot open audio devices: \(error); retry is disabled, giving up")
                    gaveUp.set(true)
                    return
                }
                log.error("cannot open audio devices: \(error); retrying in \(backoff) ms")
                if wait(milliseconds: backoff, unlessNewerThan: generation) { return }
                backoff = min(backoff * 2, retry.maxMilliseconds)
                continue
            }
            tried.store(generation, ordering: .releasing)
            logOpened(devices)
            let started = Date()
            let end = runSession(devices, priority: now.priority, generation: generation)
            switch end {
            case .stopped where latestGeneration != generation && !stopping.isSet:
                backoff = retry.initialMilliseconds
                log.notice("audio devices closed to be opened again with new settings")
            case .stopped:
                log.info("audio stopped")
                return
            case .deviceFailed:
                // A session that ran a while resets the back-off: this is a new fault, not the old one.
                if Date().timeIntervalSince(started) > 10 { backoff = retry.initialMilliseconds }
                log.error("audio failed: \(end); reopening in \(backoff) ms")
                if wait(milliseconds: backoff, unlessNewerThan: generation) { return }
                backoff = min(backoff * 2, retry.maxMilliseconds)
            }
        }
    }

    private func runSession(_ devices: AudioDevices, priority: Int32, generation: Int) -> SessionEnd {
        final class Box: @unchecked Sendable { var end = SessionEnd.stopped }  // written before join, read after
        let box = Box()
        let engine = engine
        // A reopen asked for since the settings were read ends this session at once.
        engine.stopRequest.clear()
        if stopping.isSet || latestGeneration != generation { engine.stopRequest.set() }
        let rt = WorkerThread(name: "intercom-audio") { box.end = engine.run(devices: devices) }
        do {
            try rt.start(priority: priority)
        } catch {
            return .deviceFailed(device: devices.capture.name, operation: "start audio thread", code: -EAGAIN)
        }
        switch rt.scheduling {
        case let .fifo(p): log.info("audio thread: SCHED_FIFO priority \(p)")
        case let .normal(reason) where priority > 0:
            log.warning("audio thread: real-time priority \(priority) refused (\(reason)); running with normal scheduling, expect xruns under load")
        case .normal: log.info("audio thread: normal scheduling (real-time priority disabled)")
        }
        rt.join()
        return box.end
    }

    private func logOpened(_ d: AudioDevices) {
        let c = d.captureGeometry, p = d.playbackGeometry
        log.info("""
            audio devices open: capture '\(d.capture.name)' period \(c.periodFrames) buffer \(c.bufferFrames), \
            playback '\(d.playback.name)' period \(p.periodFrames) buffer \(p.bufferFrames), \
            \(d.linkFailure.map { "not linked (\($0))" } ?? "linked")
            """)
    }

    /// Sleeps until the back-off ends, a stop, or settings newer than `generation` (a ring left
    /// from a reopen already taken sleeps on); returns true when stopping.
    private func wait(milliseconds: Int, unlessNewerThan generation: Int) -> Bool {
        let until = MonotonicClock.seconds() + Double(milliseconds) / 1000
        while !stopping.isSet, latestGeneration == generation {
            let left = until - MonotonicClock.seconds()
            if left <= 0 { break }
            stopping.bell.wait(seconds: left)
        }
        return stopping.isSet
    }
}
