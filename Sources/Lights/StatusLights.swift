import Posix
import Synchronization

/// Where the lights are and what they show.
public struct LightsSettings: Sendable, Equatable {
    public var plan: LightPlan
    /// The LED class folder (`/sys/class/leds`; tests use one of their own).
    public var ledDirectory: String
    /// LED name → GPIO line offset on `gpioChip`, for LEDs wired to GPIO without an LED driver.
    public var gpioLines: [String: Int]
    public var gpioChip: String
    /// How often the inputs are read even when nobody said they changed (audio progress,
    /// presence), seconds.
    public var pollInterval: Double

    public init(plan: LightPlan, ledDirectory: String = "/sys/class/leds", gpioLines: [String: Int] = [:],
                gpioChip: String = "gpiochip0", pollInterval: Double = 0.1) {
        self.plan = plan
        self.ledDirectory = ledDirectory
        self.gpioLines = gpioLines
        self.gpioChip = gpioChip
        self.pollInterval = pollInterval
    }
}

/// One LED as `status` reports it.
public struct LightReport: Sendable, Equatable {
    public var led: String
    public var shown: LightShown
    /// Why the LED cannot be set (missing, refused a write); nil when it works.
    public var problem: String?
}

/// The status lights' thread: reads which states hold (`inputs`), resolves them through the plan
/// and writes each LED when what it shows changes; blinks the LEDs the kernel cannot blink.
/// An ordinary thread: the audio thread never touches a light. `changed()` wakes it at once; it
/// also looks every `pollInterval`.
public final class StatusLights: Sendable {
    public let settings: LightsSettings
    private let signal: StopSignal
    private let reports = Reports()
    private let thread: WorkerThread
    private let running = Mutex(false)

    /// - Parameters:
    ///   - inputs: the states that hold now; called on the lights thread.
    ///   - onProblem: an LED that cannot be set up or written, once per distinct problem.
    public init(settings: LightsSettings, inputs: @escaping @Sendable () -> Set<LightState>,
                onProblem: @escaping @Sendable (LightError) -> Void) throws(SystemError) {
        self.settings = settings
        let signal = try StopSignal()
        self.signal = signal
        let reports = reports
        thread = WorkerThread(name: "intercom-lights") {
            var loop = LightsLoop(settings: settings, inputs: inputs, onProblem: onProblem, reports: reports)
            loop.run(until: signal)
        }
    }

    public func start() throws(SystemError) {
        try thread.start()
        running.withLock { $0 = true }
    }

    /// Something the lights show may have changed: look now.
    public func changed() { signal.bell.ring() }

    /// What every LED shows now.
    public var report: [LightReport] { reports.list.withLock { $0 } }

    /// Ends the thread; the LEDs are left dark.
    public func stop() {
        guard running.withLock({ r in defer { r = false }; return r }) else { return }
        signal.set()
        thread.join()
    }

    deinit { stop() }
}

final class Reports: Sendable {
    let list = Mutex<[LightReport]>([])
}

/// The lights thread's state; lives only on that thread (the outputs are not Sendable).
private struct LightsLoop {
    let settings: LightsSettings
    let inputs: @Sendable () -> Set<LightState>
    let onProblem: @Sendable (LightError) -> Void
    let reports: Reports

    private var outputs: [String: any LightOutput] = [:]
    private var problems: [String: String] = [:]
    private var shown: [String: LightShown] = [:]
    /// LEDs this thread blinks, with their pattern and the phase last written.
    private var blinking: [String: (pattern: LightPattern, lit: Bool?)] = [:]
    private var chip: GPIOChip?

    init(settings: LightsSettings, inputs: @escaping @Sendable () -> Set<LightState>,
         onProblem: @escaping @Sendable (LightError) -> Void, reports: Reports) {
        self.settings = settings
        self.inputs = inputs
        self.onProblem = onProblem
        self.reports = reports
    }

    mutating func run(until stop: StopSignal) {
        setUp()
        while !stop.isSet {
            apply(settings.plan.resolve(inputs()))
            let wait = blink(nowMs: Int64(MonotonicClock.seconds() * 1000))
            stop.bell.wait(seconds: min(settings.pollInterval, wait))
        }
        for (led, output) in outputs {
            do throws(LightError) { _ = try output.show(.off) } catch { problem(led, error) }
        }
    }

    private mutating func setUp() {
        for led in settings.plan.leds {
            do throws(LightError) {
                if let offset = settings.gpioLines[led] {
                    if chip == nil { chip = try GPIOChip(settings.gpioChip) }
                    outputs[led] = try chip!.output(offset: offset, name: led)
                } else {
                    outputs[led] = try LEDClassLight(directory: settings.ledDirectory, name: led)
                }
            } catch {
                problem(led, LightError(led: led, problem: error.problem))
            }
        }
    }

    private mutating func apply(_ want: [String: LightShown]) {
        var changed = false
        for (led, s) in want.sorted(by: { $0.key < $1.key }) where shown[led] != s {
            shown[led] = s
            changed = true
            guard let output = outputs[led] else { continue }
            do throws(LightError) {
                if try output.show(s.pattern) {
                    blinking[led] = nil
                } else {
                    blinking[led] = (s.pattern, nil)
                }
                problems[led] = nil
            } catch {
                problem(led, error)
            }
        }
        if changed { publish() }
    }

    /// Writes each software blink's phase; returns the seconds until the next phase change.
    private mutating func blink(nowMs: Int64) -> Double {
        var next = Double.infinity
        for (led, b) in blinking {
            guard let timing = b.pattern.blink, let output = outputs[led] else { continue }
            // One clock for every LED: two LEDs with one pattern blink together.
            let period = Int64(timing.onMs + timing.offMs)
            let phase = nowMs % period
            let lit = phase < Int64(timing.onMs)
            next = min(next, Double((lit ? Int64(timing.onMs) : period) - phase) / 1000)
            guard b.lit != lit else { continue }
            do throws(LightError) {
                try output.set(on: lit)
                blinking[led]?.lit = lit
            } catch {
                problem(led, error)
            }
        }
        return next
    }

    private mutating func problem(_ led: String, _ error: LightError) {
        guard problems[led] != error.problem else { return }
        problems[led] = error.problem
        onProblem(error)
        publish()
    }

    private func publish() {
        let list = settings.plan.leds.map { LightReport(led: $0, shown: shown[$0] ?? .dark, problem: problems[$0]) }
        reports.list.withLock { $0 = list }
    }
}
