/// What a terminal's lights can say, in priority order: when two active states are mapped to one
/// LED, the one listed first shows.
public enum LightState: String, Sendable, CaseIterable, Hashable, Comparable {
    /// No other room can be reached, the audio device is not running, or the self-test failed.
    case fault
    /// A call waits to be answered here.
    case ringing
    /// This room calls; nobody has answered yet.
    case calling
    case micMuted = "mic_muted"
    case inCall = "in_call"
    /// A missed call waits to be acknowledged.
    case missedCall = "missed_call"
    case doNotDisturb = "dnd"

    public static func < (a: LightState, b: LightState) -> Bool {
        allCases.firstIndex(of: a)! < allCases.firstIndex(of: b)!
    }
}

/// How an LED shows its state.
public enum LightPattern: String, Sendable, CaseIterable, Hashable {
    case off
    case steady
    case slowBlink = "slow_blink"
    case fastBlink = "fast_blink"

    /// On and off times of a blink, milliseconds (nil: not a blink). Slow is 1 Hz, a calm "look
    /// at me"; fast is 4 Hz, "now", still well below the 5-30 Hz where flashing troubles people.
    public var blink: (onMs: Int, offMs: Int)? {
        switch self {
        case .off, .steady: nil
        case .slowBlink: (500, 500)
        case .fastBlink: (125, 125)
        }
    }
}

/// One entry of `[lights.map]`: the LED that shows a state, and how.
public struct LightRule: Sendable, Equatable {
    public var led: String
    public var pattern: LightPattern

    public init(led: String, pattern: LightPattern) {
        self.led = led
        self.pattern = pattern
    }
}

/// What one LED shows and why.
public struct LightShown: Sendable, Equatable {
    public var pattern: LightPattern
    /// The state it shows; nil when no state mapped to it is active (then it is off).
    public var state: LightState?

    public init(pattern: LightPattern, state: LightState?) {
        self.pattern = pattern
        self.state = state
    }

    public static let dark = LightShown(pattern: .off, state: nil)
}

/// The mapping from states to LEDs; deterministic, no I/O.
public struct LightPlan: Sendable, Equatable {
    public var rules: [LightState: LightRule]

    public init(rules: [LightState: LightRule]) {
        self.rules = rules
    }

    /// Every LED the rules name, sorted.
    public var leds: [String] { Set(rules.values.map(\.led)).sorted() }

    /// What every LED shows while `active` holds: the first active state (in priority order)
    /// mapped to it, else off.
    public func resolve(_ active: Set<LightState>) -> [String: LightShown] {
        var out: [String: LightShown] = [:]
        for led in leds { out[led] = .dark }
        for state in LightState.allCases.reversed() where active.contains(state) {
            if let rule = rules[state] { out[rule.led] = LightShown(pattern: rule.pattern, state: state) }
        }
        return out
    }
}
