import Posix

/// Turns raw events into actions: presses of mapped keys only, each key debounced.
///
/// A key with only a short action fires when it goes down, debounced on the kernel's time stamps
/// (they mark when the contact moved, not when we got to read it); unstamped records (a simulator
/// writing zeros) are debounced on their arrival time instead.
///
/// A key with a long action (`KeyMap.long`) cannot fire on the way down: held for
/// `longPressMicroseconds` it fires its long action at once (the person hears the tone while still
/// holding), let go sooner it fires its short action. Such keys are timed on arrival (the reader's
/// monotonic clock), since the hold is decided by a timer on that clock; a release followed by a
/// press within the debounce window is contact bounce and the hold goes on, so the short action
/// waits that long after the release.
struct KeyFilter {
    enum Outcome: Equatable {
        case action(KeyAction)
        /// A key with a long action went down; `due(now:)` decides which it was.
        case held
        case notAKey
        case release
        case autorepeat
        case bounce
        case unknown(UInt16)
    }

    /// A decision `due(now:)` reached for a key with a long action.
    struct Decision: Equatable {
        var code: UInt16
        /// Nil: a short press of a key that has only a long action.
        var action: KeyAction?
        var long: Bool
    }

    private enum Hold: Equatable {
        case down(since: Int64)
        case released(since: Int64, at: Int64)
        /// The long action fired; waiting for the key to come up.
        case longFired
    }

    let map: KeyMap
    let debounceMicroseconds: Int64
    let longPressMicroseconds: Int64
    private var lastAccepted: [UInt16: Int64] = [:]
    private var holds: [UInt16: Hold] = [:]
    /// When a key with a long action last came up for good: a press right after is bounce.
    private var lastRelease: [UInt16: Int64] = [:]

    init(map: KeyMap, debounce: Duration, longPress: Duration = KeyTiming.longPress) {
        self.map = map
        self.debounceMicroseconds = debounce.microseconds
        self.longPressMicroseconds = longPress.microseconds
    }

    /// `arrivalMicroseconds`: when the record was read (monotonic).
    mutating func handle(_ e: InputEvent, arrivalMicroseconds: Int64) -> Outcome {
        guard e.type == InputEvent.keyType else { return .notAKey }
        if map.long[e.code] != nil { return handleLongCapable(e, now: arrivalMicroseconds) }
        switch e.value {
        case InputEvent.press: break
        case InputEvent.autorepeat: return .autorepeat
        default: return .release
        }
        guard let action = map[e.code] else { return .unknown(e.code) }
        let t = e.timeMicroseconds != 0 ? e.timeMicroseconds : arrivalMicroseconds
        // A clock stepped backwards (evdev stamps CLOCK_REALTIME) gives a negative gap: not a bounce.
        if let last = lastAccepted[e.code] {
            let (gap, overflow) = t.subtractingReportingOverflow(last)
            if !overflow, gap >= 0, gap < debounceMicroseconds { return .bounce }
        }
        lastAccepted[e.code] = t
        return .action(action)
    }

    private mutating func handleLongCapable(_ e: InputEvent, now: Int64) -> Outcome {
        switch e.value {
        case InputEvent.autorepeat:
            return .autorepeat
        case InputEvent.press:
            switch holds[e.code] {
            case .released(let since, let at) where now - at < debounceMicroseconds:
                holds[e.code] = .down(since: since)
                return .bounce
            case .down, .longFired:
                return .bounce  // a second press without a release
            default:
                if let up = lastRelease[e.code], now - up < debounceMicroseconds { return .bounce }
                holds[e.code] = .down(since: now)
                return .held
            }
        default:
            switch holds[e.code] {
            case .down(let since): holds[e.code] = .released(since: since, at: now)
            case .longFired:
                holds[e.code] = nil
                lastRelease[e.code] = now
            default: break
            }
            return .release
        }
    }

    /// Keys whose hold is decided by `now`, in key-code order.
    mutating func due(now: Int64) -> [Decision] {
        var out: [Decision] = []
        for code in holds.keys.sorted() {
            switch holds[code]! {
            case .down(let since) where now - since >= longPressMicroseconds:
                holds[code] = .longFired
                out.append(Decision(code: code, action: map.long[code], long: true))
            case .released(_, let at) where now - at >= debounceMicroseconds:
                holds[code] = nil
                lastRelease[code] = at
                out.append(Decision(code: code, action: map[code], long: false))
            default: break
            }
        }
        return out
    }

    /// When `due` next has something to decide.
    var nextDeadline: Int64? {
        holds.values.compactMap { hold -> Int64? in
            switch hold {
            case .down(let since): since + longPressMicroseconds
            case .released(_, let at): at + debounceMicroseconds
            case .longFired: nil
            }
        }.min()
    }

    /// The device went away: keys held then are forgotten (no action).
    mutating func reset() {
        holds.removeAll()
    }
}
