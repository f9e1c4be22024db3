/// Turns raw events into actions: presses of mapped keys only, each key debounced on the
/// kernel's time stamps (they mark when the contact moved, not when we got to read it).
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

    mutating func handle(_ e: InputEvent) -> Outcome {
        guard e.type == InputEvent.keyType else { return .notAKey }
        switch e.value {
        case InputEvent.press: break
        case InputEvent.autorepeat: return .autorepeat
        default: return .release
        }
        guard let action = map[e.code] else { return .unknown(e.code) }
        let t = e.timeMicroseconds
        // A clock stepped backwards (evdev stamps CLOCK_REALTIME) gives a negative gap: not a bounce.
        if let last = lastAccepted[e.code], t >= last, t - last < debounceMicroseconds {
            return .bounce
        }
        lastAccepted[e.code] = t
        return .action(action)
    }
}
