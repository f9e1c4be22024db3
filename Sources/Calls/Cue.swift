// What a terminal without a screen says with sound: one short cue per event, and the two ring
// sounds. The engine names them; the integrator plays them through the mixer.

/// A short tone for one event. The raw value is the configuration's and the control socket's name.
public enum Cue: String, Sendable, CaseIterable, Codable {
    /// Our call: the first callee is connected. A callee: the audio opened.
    case connected
    /// Our call reached nobody: every callee was offline or did not answer.
    case notReached = "not_reached"
    /// Our call was refused (do-not-disturb, refused by hand, not permitted).
    case declined
    /// Our call found the callee in another call.
    case busy
    /// A callee left our group call, or declined, or vanished, while others stay.
    case participantLeft = "participant_left"
    /// The call is over (either side hung up, or the other side vanished).
    case callEnded = "call_ended"
    case microphoneMuted = "mic_muted"
    case microphoneUnmuted = "mic_unmuted"
    case doNotDisturbOn = "dnd_on"
    case doNotDisturbOff = "dnd_off"
    /// A key or command that could do nothing (no call to hang up, no such button, ...).
    case error
    /// The reminder: a missed call waits to be acknowledged.
    case missedCall = "missed_call"
    /// Every missed call is acknowledged (the confirmation of the key press).
    case acknowledged
    /// Our notification reached every recipient.
    case notificationSent = "notification_sent"
    /// Our notification reached some recipients; the others get it when they are back.
    case notificationPartly = "notification_partly"
    case readAloudOn = "read_aloud_on"
    case readAloudOff = "read_aloud_off"
    /// An emergency call opened here (instead of `connected`).
    case emergencyCall = "emergency_call"
}

/// What the ring channel plays: nothing, the incoming-call chime (once while an auto-answered
/// call rings, repeating while a call waits to be answered by hand), or the caller's ringback.
public enum Ring: String, Sendable, Equatable, CaseIterable {
    case off
    case chimeOnce = "chime_once"
    case chimeRepeating = "chime_repeating"
    case ringback
}

/// One note of a generated tone: a frequency (0 = a pause) for a time.
public struct Note: Sendable, Equatable {
    public var hz: Double
    public var ms: Double
    public init(_ hz: Double, _ ms: Double) {
        self.hz = hz
        self.ms = ms
    }
}

extension Cue {
    /// The generated tone. Every cue's sequence of frequencies is its own (no cue's notes are a
    /// run of another's), so a recording tells them apart; different notes, ringback's 425 Hz and
    /// the generated chime's 659 and 989 Hz included, are at least 60 Hz apart. Short: at most 0.45 s.
    public var notes: [Note] {
        switch self {
        case .connected: [Note(720, 90), Note(1050, 140)]
        case .notReached: [Note(1110, 130), Note(1470, 130), Note(1850, 190)]
        case .declined: [Note(560, 140), Note(0, 90), Note(560, 140)]
        case .busy: [Note(490, 100), Note(0, 70), Note(490, 100), Note(0, 70), Note(490, 100)]
        case .participantLeft: [Note(1230, 100), Note(840, 160)]
        case .callEnded: [Note(900, 140), Note(780, 220)]
        case .microphoneMuted: [Note(1540, 80), Note(1170, 120)]
        case .microphoneUnmuted: [Note(1170, 80), Note(1540, 120)]
        case .doNotDisturbOn: [Note(1700, 80), Note(2000, 80), Note(2300, 120)]
        case .doNotDisturbOff: [Note(2300, 80), Note(2000, 80), Note(1700, 120)]
        case .error: [Note(330, 280)]
        case .missedCall: [Note(1400, 90), Note(0, 80), Note(1400, 90), Note(0, 80), Note(1400, 90)]
        case .acknowledged: [Note(2600, 120)]
        case .notificationSent: [Note(2060, 90), Note(2420, 150)]
        case .notificationPartly: [Note(2120, 90), Note(0, 60), Note(1300, 180)]
        case .readAloudOn: [Note(2480, 80), Note(3100, 120)]
        case .readAloudOff: [Note(3100, 80), Note(2480, 120)]
        case .emergencyCall: [Note(3300, 110), Note(3600, 110), Note(3300, 110), Note(3600, 110)]
        }
    }

    /// Ringback: one long note per ring period (the rest of the period is silent).
    public static let ringbackNotes = [Note(425, 1000)]
}
