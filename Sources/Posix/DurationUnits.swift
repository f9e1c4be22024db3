/// Swift's `Duration` read in the units our clocks and files use. Configuration keeps times as
/// `Duration` (typed once when read); the code that waits converts here, in one place.
extension Duration {
    /// Whole microseconds, rounded toward zero.
    public var microseconds: Int64 {
        let c = components
        return c.seconds * 1_000_000 + c.attoseconds / 1_000_000_000_000
    }

    /// Whole milliseconds, rounded toward zero: what a configuration file writes.
    public var milliseconds: Int64 { microseconds / 1000 }

    /// Seconds as a Double: the call engine's clock.
    public var seconds: Double {
        let c = components
        return Double(c.seconds) + Double(c.attoseconds) / 1e18
    }
}
