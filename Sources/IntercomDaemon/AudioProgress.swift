import Synchronization

/// Whether the audio thread makes progress, judged from its frame counter each time someone
/// looks. The watchdog (`ServiceHealth`) and the fault light (`TerminalLights`) each keep one.
final class AudioProgress: Sendable {
    private let frames: @Sendable () -> Int
    private let seen = Mutex<(frames: Int, at: Double)>((-1, 0))

    init(frames: @escaping @Sendable () -> Int) { self.frames = frames }

    /// Seconds since the counter last moved; nil when it moved since the last look.
    func stalledFor(now: Double) -> Double? {
        let f = frames()
        return seen.withLock { s in
            if f != s.frames {
                s = (f, now)
                return nil
            }
            return now - s.at
        }
    }
}
