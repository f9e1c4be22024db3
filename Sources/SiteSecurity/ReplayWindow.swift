/// Which message counters of one sender were seen: the highest, and a 64-bit map of the ones
/// just below it (datagrams may arrive out of order). A counter at or below one already seen, or
/// older than the window, is a replay (RFC 4303's anti-replay window, in spirit).
public struct ReplayWindow: Sendable, Equatable {
    public private(set) var highest: UInt64 = 0
    private var seen: UInt64 = 0  // bit i: highest - i was seen
    public init() {}

    /// True (and noted) if `counter` was not seen before and is not too old.
    public mutating func accept(_ counter: UInt64) -> Bool {
        if counter > highest {
            let shift = counter - highest
            seen = shift >= 64 ? 1 : (seen << shift) | 1
            highest = counter
            return true
        }
        let age = highest - counter
        guard age < 64, seen & (1 << age) == 0 else { return false }
        seen |= 1 << age
        return true
    }
}
