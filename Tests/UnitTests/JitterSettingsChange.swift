import Jitter

extension JitterSettings {
    /// A copy with `change` applied, for the library's tuning that no configuration key reaches.
    func with(_ change: (inout JitterSettings) -> Void) -> JitterSettings {
        var copy = self
        change(&copy)
        return copy
    }
}
