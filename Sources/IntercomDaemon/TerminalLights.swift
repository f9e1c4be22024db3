import AudioPipeline
import Control
import Lights
import Logging
import Posix
import Synchronization

/// The status lights of a terminal: the states come from the calls side (ringing, in a call,
/// muted, do-not-disturb, missed calls, nobody reachable) and from the audio thread's progress
/// (a device that does not run is a fault), and from the self-test (a failed check is one). The calls thread says when something changed; the
/// lights thread also looks every `LightsSettings.pollInterval` for what nobody announces.
final class TerminalLights: Service {
    var serviceName: String { "status lights" }
    /// Audio that has not moved a frame for this long is a fault: ten times the longest period
    /// and far beyond a scheduling hiccup, yet soon enough for a person looking at the box.
    static let audioStallSeconds = 1.0

    /// The lights running now; nil while `[lights] map` names none. Swapped by `apply` (main
    /// thread); the calls thread reaches it only through the hooks set once in `init`.
    private let current = Slot()
    private final class Slot: Sendable {
        let lights = Mutex<StatusLights?>(nil)
        var now: StatusLights? { lights.withLock { $0 } }
        /// Takes out what runs (nil after).
        func take() -> StatusLights? { lights.withLock { c -> StatusLights? in defer { c = nil }; return c } }
    }
    private let inputs: @Sendable () -> Set<LightState>
    private let log: Logger
    /// What `start` runs (the configuration's `[lights]` at start; a reload calls `apply`).
    private let initial: LightsSettings?

    /// - Parameter audio: whether the terminal has sound devices (`[audio] enabled`); without,
    ///   their absence is no fault.
    init(settings: LightsSettings?, engine: AudioEngine, audio: Bool, calls: CallService?,
         selfTestFailed: @escaping @Sendable () -> Bool, logger: Logger) {
        initial = settings
        let progress = AudioProgress(frames: { engine.stats.frames.load })
        inputs = {
            var states = calls?.lightStates() ?? []
            if audio, !engine.stats.running.isSet || (progress.stalledFor(now: MonotonicClock.seconds()) ?? 0) > Self.audioStallSeconds {
                states.insert(.fault)
            }
            if selfTestFailed() { states.insert(.fault) }
            return states
        }
        log = logger
        let current = current
        calls?.onChange = { current.now?.changed() }
        calls?.lightsReport = { current.now.map(Self.report) ?? [] }
    }

    func start() throws(SystemError) { try apply(initial) }

    /// Runs the lights as `settings` says (nil: none), replacing those running (at start, and on
    /// a reload that changed them; main thread).
    func apply(_ settings: LightsSettings?) throws(SystemError) {
        current.take()?.stop()
        guard let settings else { return }
        let log = log
        let lights = try StatusLights(settings: settings, inputs: inputs, onProblem: { log.error("\($0)") })
        try lights.start()
        current.lights.withLock { $0 = lights }
    }

    func stop() {
        current.take()?.stop()
    }

    static func report(_ lights: StatusLights) -> [StatusLight] {
        lights.report.map { StatusLight(led: $0.led, pattern: $0.shown.pattern.rawValue, state: $0.shown.state?.rawValue, problem: $0.problem) }
    }
}
