import Posix
// What the engine asks the integrator to do. The engine does no I/O: the integrator executes
// these in order (send datagrams, reconfigure media, play rings and cues, publish, persist).

/// A remote room's media, as the mixer and the sender need it.
public struct MediaPeer: Hashable, Sendable {
    public var room: RoomID
    /// The room's media socket: its RTP comes from here and ours goes there.
    public var endpoint: IPv4Endpoint
    /// The key of its stream in this call, when keys are agreed in signalling.
    public var key: MediaKey?
    public init(room: RoomID, endpoint: IPv4Endpoint, key: MediaKey? = nil) {
        self.room = room
        self.endpoint = endpoint
        self.key = key
    }
}

/// A remote room's signalling socket, with the room: what is sealed for one terminal needs to
/// know which.
public struct SignallingPeer: Hashable, Sendable {
    public var room: RoomID
    public var address: IPv4Endpoint
    public init(room: RoomID, address: IPv4Endpoint) {
        self.room = room
        self.address = address
    }
}

/// Where this room's microphone goes and whose voice it plays. Idle (all empty) outside a call.
/// The caller hears every connected callee; a callee hears the caller only, so callees never
/// hear each other.
public struct MediaPlan: Equatable, Sendable {
    /// Send the microphone to each (unicast peers or one multicast group).
    public var sendTo: [IPv4Endpoint]
    /// Mix the streams from these rooms; drop any other.
    public var receiveFrom: [MediaPeer]
    /// Multicast groups to join (a callee of a multicast call).
    public var joinGroups: [IPv4Endpoint]
    /// The call this media belongs to (under the site key, its SRTP keys are derived from it); nil when idle.
    public var call: CallID?
    /// The key of our stream in this call, when keys are agreed in signalling (each peer's is in
    /// `receiveFrom`).
    public var sendKey: MediaKey?

    public init(sendTo: [IPv4Endpoint] = [], receiveFrom: [MediaPeer] = [], joinGroups: [IPv4Endpoint] = [],
                call: CallID? = nil, sendKey: MediaKey? = nil) {
        self.sendTo = sendTo
        self.receiveFrom = receiveFrom
        self.joinGroups = joinGroups
        self.call = call
        self.sendKey = sendKey
    }

    public static let idle = MediaPlan()
    public var isIdle: Bool { self == .idle }
}

/// Why a command was not carried out (for the control socket's error codes).
public enum CommandRejection: Sendable, Equatable {
    case unknownButton(String)
    case unknownRoom(RoomID)
    case cannotCallSelf
    case noTargets
    case tooManyTargets
    case alreadyInCall
    case noCall
    /// `answer` without a ringing incoming call.
    case nothingToAnswer
    /// `decline` without a ringing incoming call.
    case nothingToDecline
    /// `call_back` with no call in the history.
    case nobodyToCallBack
    /// `call_missed` or `acknowledge` with no unacknowledged missed call (nor notification).
    case noMissedCall
    /// `notify` with a type the configuration does not have.
    case unknownNotification(String)
    /// A call placed or answered at a terminal without sound devices (`CallSettings.audio`).
    case noAudio
}

public enum CallEffect: Sendable, Equatable {
    /// Send `datagram` (already encoded) to the room's signalling address.
    case send(to: RoomID, address: IPv4Endpoint, datagram: [UInt8])
    /// Send this (an ack) once every store change asked for up to the end of this batch of effects
    /// is on disk: the sender holds what it sent until then (`SignalMessage.keptOnReceipt`).
    case sendOnceWritten(to: RoomID, address: IPv4Endpoint, datagram: [UInt8])
    /// Send this hello (already encoded, one message id) to each room: it says the same to all
    /// (under the site key one seal serves all; under terminal keys each is sealed for its room).
    case hello(to: [SignallingPeer], datagram: [UInt8])
    /// Replace the media configuration with this one.
    case setMediaPlan(MediaPlan)
    /// What the ring channel plays from now on (replacing what it played).
    case ring(Ring)
    /// Play this event's tone; `quiet` during a call (softer, so it does not cover the voices).
    case cue(Cue, quiet: Bool)
    /// Apply this room's own mute (microphone: send silence; speaker: play nothing).
    case applyMute(MuteState)
    /// Publish to subscribers and the log.
    case event(CallEvent)
    /// Append to the persisted history (also published as `.event(.historyAdded)`).
    case persistHistory(HistoryEntry)
    /// Mark these missed calls acknowledged in the persisted history.
    case acknowledgeMissed([CallID])
    /// Persist the do-not-disturb switch so that a restart keeps it.
    case persistDoNotDisturb(Bool)
    /// Play a notification's tone and read its text (after what is playing on that channel).
    case announce(Announcement)
    /// Stop these notifications' announcements (acknowledged while being read).
    case silenceAnnouncements([NotificationID])
    /// Add this notification to the persisted history, or replace the entry with its id and direction.
    case persistNotification(NotificationRecord)
    /// Persist the read-aloud switch so that a restart keeps it.
    case persistReadAloud(Bool)
    /// A message to this room went unacknowledged for `giveUpAfter` (for the log).
    case peerUnreachable(RoomID)
    case rejected(CallCommand, CommandRejection)
    /// A room reflected our round-trip probe.
    case probeReflected(from: RoomID, sequence: UInt32, sentMicros: UInt64)
    /// A room was heard, under a seal of its own key, at another address than its directory
    /// entry's, and is answered there (nil: back at its directory address). For the log.
    case roomMoved(RoomID, to: IPv4Endpoint?)
}

/// The engine's state as a status request shows it.
public enum CallState: Sendable, Equatable {
    case idle
    /// Incoming: the chime plays.
    case ringingIncoming
    /// Outgoing: no callee connected yet.
    case ringingOutgoing
    case connected
}
