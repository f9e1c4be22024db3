import AudioPipeline
import Control
import Lights
import Logging
import Posix

/// The status lights of a terminal: the states come from the calls side (ringing, in a call,
/// muted, do-not-disturb, missed calls, nobody reachable) and from the audio thread's progress
/// (a device that does not run is a fault). The calls thread says when something changed; the
/// lights thread also looks every `LightsSettings.pollInterval` for what nobody announces.
final class TerminalLights: Sendable {
    /// Audio that has not moved a frame for this long is a fault: ten times the longest period
    /// and far beyond a scheduling hiccup, yet soon enough for a person looking at the box.
    static let audioStallSeconds = 1.0

    let lights: StatusLights

    init(settings: LightsSettings, engine: AudioEngine, calls: CallService?, logger: Logger) throws(SystemError) {
        let progress = AudioProgress(frames: { engine.stats.frames.load })
        lights = try StatusLights(settings: settings, inputs: {
            var states = calls?.lightStates() ?? []
            if !engine.stats.running.isSet || (progress.stalledFor(now: MonotonicClock.seconds()) ?? 0) > Self.audioStallSeconds {
                states.insert(.fault)
            }
            return states
        }, onProblem: { logger.error("\($0)") })
        let lights = lights
        calls?.onChange = { lights.changed() }
        calls?.lightsReport = { Self.report(lights) }
    }

    func start() throws(SystemError) { try lights.start() }
    func stop() { lights.stop() }

    static func report(_ lights: StatusLights) -> [StatusLight] {
        lights.report.map { StatusLight(led: $0.led, pattern: $0.shown.pattern.rawValue, state: $0.shown.state?.rawValue, problem: $0.problem) }
    }
}
