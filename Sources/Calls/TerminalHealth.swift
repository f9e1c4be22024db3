/// How a terminal is doing, as it tells every other room every `CallTiming.healthInterval` (the
/// `health` signalling message, docs/calls.md): what the site's page shows of each terminal and
/// what its fault light means, without anyone asking it. A snapshot, never acknowledged: a lost
/// one is replaced by the next.
public struct TerminalHealth: Sendable, Equatable, Hashable, Codable {
    /// The sound devices.
    public enum Audio: String, Sendable, Codable, CaseIterable {
        /// `[audio] enabled = false`: a terminal without sound (the site service's member).
        case off
        case running
        /// Not running: the devices could not be opened or failed, and are being retried.
        case unavailable
    }

    /// The terminal's own speaker-to-microphone check (`[selftest]`).
    public enum Check: String, Sendable, Codable, CaseIterable {
        /// Off, or not run yet.
        case none
        case passed
        case failed
    }

    public var audio: Audio
    /// Over- and underruns of the sound devices since the daemon started (saturating).
    public var xruns: UInt32
    /// The newest self-test's outcome.
    public var selfTest: Check
    /// Seconds since the daemon started (saturating).
    public var uptimeSeconds: UInt32

    public init(audio: Audio, xruns: UInt32, selfTest: Check, uptimeSeconds: UInt32) {
        self.audio = audio
        self.xruns = xruns
        self.selfTest = selfTest
        self.uptimeSeconds = uptimeSeconds
    }

    /// What the fault light shows for: sound devices that do not run, or a failed self-test.
    public var isFaulty: Bool { audio == .unavailable || selfTest == .failed }
}
