/// Turns raw events into actions: presses of mapped keys only, each key debounced on the
/// kernel's time stamps (they mark when the contact moved, not when we got to read it).
/// Unstamped records (a simulator writing zeros) are debounced on their arrival time instead.
struct KeyFilter {
    enum Outcome: Equatable {
        case action(KeyAction)
        case notAKey
        case release
        case autorepeat
        case bounce
        case unknown(UInt16)
    }

    let map: KeyMap
    let debounceMicroseconds: Int64
    private var lastAccepted: [UInt16: Int64] = [:]

    init(map: KeyMap, debounceMilliseconds: Int) {
        self.map = map
        self.debounceMicroseconds = Int64(debounceMilliseconds) * 1000
    }

    /// `arrivalMicroseconds`: when the record was read (monotonic), used when it has no stamp.
    mutating func handle(_ e: InputEvent, arrivalMicroseconds: Int64) -> Outcome {
        guard e.type == InputEvent.keyType else { return .notAKey }
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
}
