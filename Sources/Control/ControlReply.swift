import Calls

/// What the handler answers to a command; the server turns it into the response's `result`.
public enum ControlReply: Sendable, Equatable {
    /// hangup/leave, answer, decline, acknowledge, erase done.
    case done
    /// A call was placed (call).
    case callPlaced(CallID, to: [RoomID])
    /// The mute state after mute/unmute.
    case mute(MuteState)
    /// Do-not-disturb after dnd.
    case doNotDisturb(Bool)
    /// The read-aloud switch after read_aloud.
    case readAloud(Bool)
    /// A notification was sent (notify): its id and recipients.
    case notificationSent(NotificationID, to: [RoomID])
    case status(ControlStatus)
    case rooms(RoomDirectory)
    /// Calls and notifications, each oldest first.
    case history([HistoryEntry], notifications: [NotificationRecord])
    /// loopback (started) and loopback_result.
    case loopback(LoopbackStatus)
    /// net_loopback (started) and net_loopback_result.
    case networkLoopback(NetworkLoopbackStatus)
    case statistics(DaemonStatistics)
    case site(SiteOverview)
}

/// This terminal's state (status).
public struct ControlStatus: Sendable, Equatable {
    public var room: RoomID
    public var name: String
    public var doNotDisturb: Bool
    public var mute: MuteState
    /// The call this room is in, if any.
    public var call: ActiveCall?
    /// The audio streams this room plays now (what the speaker gets, whatever the call state says).
    public var media: [MediaStream]
    /// Missed calls waiting to be acknowledged.
    public var missedCalls: Int
    /// What each status light shows (none configured: empty).
    public var lights: [StatusLight]
    /// Notifications heard here and waiting to be acknowledged.
    public var notifications = 0
    /// Notifications are read aloud here.
    public var readAloud = true
    /// How signalling is sealed now (absent from older daemons).
    public var security: SignalProtectionMode?

    public init(room: RoomID, name: String, doNotDisturb: Bool, mute: MuteState, call: ActiveCall? = nil,
                media: [MediaStream] = [], missedCalls: Int = 0, lights: [StatusLight] = []) {
        self.missedCalls = missedCalls
        self.lights = lights
        self.room = room
        self.name = name
        self.doNotDisturb = doNotDisturb
        self.mute = mute
        self.call = call
        self.media = media
    }
}

/// One status light: its pattern, the state it shows, and why it cannot be set if it cannot.
public struct StatusLight: Sendable, Equatable {
    public var led: String
    /// off, steady, slow_blink, fast_blink.
    public var pattern: String
    /// The state shown (ringing, in_call, ...); nil when dark.
    public var state: String?
    public var problem: String?

    public init(led: String, pattern: String, state: String? = nil, problem: String? = nil) {
        self.led = led
        self.pattern = pattern
        self.state = state
        self.problem = problem
    }
}

/// One incoming audio stream as the receiver sees it: the proof that audio flows, not only that
/// the signalling says so.
public struct MediaStream: Sendable, Equatable {
    /// "a.b.c.d:port" of the sender.
    public var source: String
    /// Packets accepted into its jitter buffer, and frames played from it.
    public var received: Int
    public var played: Int
    /// The jitter buffer's current delay, milliseconds.
    public var delayMs: Double

    public init(source: String, received: Int, played: Int, delayMs: Double) {
        self.source = source
        self.received = received
        self.played = played
        self.delayMs = delayMs
    }
}

/// The call in progress as this room sees it.
public struct ActiveCall: Sendable, Equatable {
    public var callID: CallID
    public var direction: HistoryEntry.Direction
    public var caller: RoomID
    /// Every callee with its status (a callee sees the others as far as it knows them).
    public var participants: [Participant]
    /// Audio flows here.
    public var connected: Bool
    public var kind: CallKind

    public init(callID: CallID, direction: HistoryEntry.Direction, caller: RoomID, participants: [Participant], connected: Bool,
                kind: CallKind = .normal) {
        self.kind = kind
        self.callID = callID
        self.direction = direction
        self.caller = caller
        self.participants = participants
        self.connected = connected
    }
}

/// The configured directory with presence, and this room's call buttons (rooms).
public struct RoomDirectory: Sendable, Equatable {
    public struct Room: Sendable, Equatable {
        public var id: RoomID
        public var name: String
        public var presence: Presence
        public init(id: RoomID, name: String, presence: Presence) {
            self.id = id
            self.name = name
            self.presence = presence
        }
    }

    public struct Button: Sendable, Equatable {
        public var name: String
        public var rooms: [RoomID]
        public var kind: CallKind
        public init(name: String, rooms: [RoomID], kind: CallKind = .normal) {
            self.name = name
            self.rooms = rooms
            self.kind = kind
        }
    }

    public var rooms: [Room]
    public var buttons: [Button]
    public init(rooms: [Room], buttons: [Button]) {
        self.rooms = rooms
        self.buttons = buttons
    }
}
