import IntercomConfig

/// The daemon's defaults (`DaemonConfig.default`) with a few keys changed, at a frame of `frame`
/// samples. Tests build library settings from it the way the daemon does (`JitterSettings(config)`
/// and the like), so they run at the values the daemon runs at.
public func daemonConfig(frame: Int = 480, _ change: (inout DaemonConfig) -> Void = { _ in }) -> DaemonConfig {
    DaemonConfig.default.with {
        $0.audio.periodMs = Double(frame) * 1000 / Double($0.audio.sampleRate)
        change(&$0)
    }
}
