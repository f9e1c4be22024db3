import Calls

/// What the handler answers to a request: the response's `result`.
public enum ControlReply: Sendable, Equatable, Codable {
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
    /// ping: and the protocol version this daemon speaks (absent before 2: 1).
    case pong(protocolVersion: Int)
    /// subscribe: event lines follow.
    case subscribed

    /// The control protocol's version. 2 (0.10): every command's arguments and result as in 1, plus
    /// the names a key's action takes as commands (`toggle_dnd`, `acknowledge_all`, ...) and
    /// `protocol` in the ping reply. A client sends 1's commands to a daemon that answers 1.
    public static let protocolVersion = 2

    /// The request a result answers, which its shape depends on: set in the decoder's `userInfo`.
    public static let requestKey = CodingUserInfoKey(rawValue: "intercom.request")!

    /// Reads a result (a response's `result` alone, as `intercomd --loopback --json` prints it).
    /// Throws `ControlClientError.protocolViolation` naming what does not fit.
    public static func read(_ bytes: some Collection<UInt8>, to request: ControlRequest) throws(ControlClientError) -> ControlReply {
        do {
            return try Wire.decode(ControlReply.self, from: bytes, userInfo: [requestKey: request])
        } catch {
            throw .protocolViolation(Wire.describe(error))
        }
    }

    private enum Keys: String, CodingKey {
        case callId, to, dnd, readAloud, notificationId, entries, notifications, pong, `protocol`, subscribed
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: Keys.self)
        switch self {
        case .done: break
        case .callPlaced(let id, let to):
            try c.encode(id, forKey: .callId)
            try c.encode(to, forKey: .to)
        case .mute(let mute): try mute.encode(to: encoder)
        case .doNotDisturb(let on): try c.encode(on, forKey: .dnd)
        case .readAloud(let on): try c.encode(on, forKey: .readAloud)
        case .notificationSent(let id, let to):
            try c.encode(id, forKey: .notificationId)
            try c.encode(to, forKey: .to)
        case .status(let s): try s.encode(to: encoder)
        case .rooms(let d): try d.encode(to: encoder)
        case .history(let entries, let notifications):
            try c.encode(entries, forKey: .entries)
            try c.encode(notifications, forKey: .notifications)
        case .loopback(let s): try s.encode(to: encoder)
        case .networkLoopback(let s): try s.encode(to: encoder)
        case .statistics(let s): try s.encode(to: encoder)
        case .site(let s): try s.encode(to: encoder)
        case .pong(let version):
            try c.encode(true, forKey: .pong)
            try c.encode(version, forKey: .protocol)
        case .subscribed: try c.encode(true, forKey: .subscribed)
        }
    }

    public init(from decoder: Decoder) throws {
        guard let request = decoder.userInfo[Self.requestKey] as? ControlRequest else {
            throw Wire.invalid(decoder, "a result is read knowing its request")
        }
        let c = try decoder.container(keyedBy: Keys.self)
        let command: ControlCommand
        switch request {
        case .ping: self = .pong(protocolVersion: try c.decodeIfPresent(Int.self, forKey: .protocol) ?? 1); return
        case .subscribe: self = .subscribed; return
        case .command(let cmd): command = cmd
        }
        switch command {
        case .perform(.call), .perform(.callRooms), .perform(.callBack), .perform(.callMissed):
            self = .callPlaced(try c.decode(CallID.self, forKey: .callId), to: try c.decode([RoomID].self, forKey: .to))
        case .perform(.setMicrophoneMuted), .perform(.setSpeakerMuted), .perform(.toggleMicrophoneMute), .perform(.toggleSpeakerMute):
            self = .mute(try MuteState(from: decoder))
        case .perform(.setDoNotDisturb), .perform(.toggleDoNotDisturb):
            self = .doNotDisturb(try c.decode(Bool.self, forKey: .dnd))
        case .perform(.setReadAloud), .perform(.toggleReadAloud):
            self = .readAloud(try c.decode(Bool.self, forKey: .readAloud))
        case .perform(.notify):
            self = .notificationSent(try c.decode(NotificationID.self, forKey: .notificationId), to: try c.decode([RoomID].self, forKey: .to))
        case .perform(.hangUp), .perform(.answer), .perform(.decline), .perform(.acknowledge), .eraseHistory:
            self = .done
        case .status: self = .status(try ControlStatus(from: decoder))
        case .rooms: self = .rooms(try RoomDirectory(from: decoder))
        case .history:
            // Absent from daemons older than notifications: none.
            self = .history(try c.decode([HistoryEntry].self, forKey: .entries),
                            notifications: try c.decodeIfPresent([NotificationRecord].self, forKey: .notifications) ?? [])
        case .loopback, .loopbackResult: self = .loopback(try LoopbackStatus(from: decoder))
        case .networkLoopback, .networkLoopbackResult: self = .networkLoopback(try NetworkLoopbackStatus(from: decoder))
        case .statistics: self = .statistics(try DaemonStatistics(from: decoder))
        case .site: self = .site(try SiteOverview(from: decoder))
        }
    }
}

/// This terminal's state (status).
public struct ControlStatus: Sendable, Equatable, Codable {
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

    private enum CodingKeys: String, CodingKey {
        case room, name, doNotDisturb = "dnd", mute, call, media, missedCalls = "missed", lights, notifications, readAloud, security
    }

    // `call` and `security` are null when there is none; the fields older daemons lack read as none.
    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(room, forKey: .room)
        try c.encode(name, forKey: .name)
        try c.encode(doNotDisturb, forKey: .doNotDisturb)
        try c.encode(mute, forKey: .mute)
        try c.encode(call, forKey: .call)
        try c.encode(media, forKey: .media)
        try c.encode(missedCalls, forKey: .missedCalls)
        try c.encode(lights, forKey: .lights)
        try c.encode(notifications, forKey: .notifications)
        try c.encode(readAloud, forKey: .readAloud)
        try c.encode(security, forKey: .security)
    }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(room: try c.decode(RoomID.self, forKey: .room), name: try c.decode(String.self, forKey: .name),
                  doNotDisturb: try c.decode(Bool.self, forKey: .doNotDisturb), mute: try c.decode(MuteState.self, forKey: .mute),
                  call: try c.decodeIfPresent(ActiveCall.self, forKey: .call),
                  media: try c.decodeIfPresent([MediaStream].self, forKey: .media) ?? [],
                  missedCalls: try c.decodeIfPresent(Int.self, forKey: .missedCalls) ?? 0,
                  lights: try c.decodeIfPresent([StatusLight].self, forKey: .lights) ?? [])
        notifications = try c.decodeIfPresent(Int.self, forKey: .notifications) ?? 0
        readAloud = try c.decodeIfPresent(Bool.self, forKey: .readAloud) ?? true
        security = try c.decodeIfPresent(SignalProtectionMode.self, forKey: .security)
    }
}

/// One status light: its pattern, the state it shows, and why it cannot be set if it cannot.
public struct StatusLight: Sendable, Equatable, Codable {
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

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(led, forKey: .led)
        try c.encode(pattern, forKey: .pattern)
        try c.encode(state, forKey: .state)
        try c.encode(problem, forKey: .problem)
    }
}

/// One incoming audio stream as the receiver sees it: the proof that audio flows, not only that
/// the signalling says so.
public struct MediaStream: Sendable, Equatable, Codable {
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

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(source, forKey: .source)
        try c.encode(received, forKey: .received)
        try c.encode(played, forKey: .played)
        try c.encode((delayMs * 10).rounded() / 10, forKey: .delayMs)
    }
}

/// The call in progress as this room sees it.
public struct ActiveCall: Sendable, Equatable, Codable {
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

    private enum CodingKeys: String, CodingKey { case callID = "callId", direction, caller, participants, connected, kind }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(callID: try c.decode(CallID.self, forKey: .callID), direction: try c.decode(HistoryEntry.Direction.self, forKey: .direction),
                  caller: try c.decode(RoomID.self, forKey: .caller), participants: try c.decode([Participant].self, forKey: .participants),
                  connected: try c.decode(Bool.self, forKey: .connected),
                  kind: try c.decodeIfPresent(CallKind.self, forKey: .kind) ?? .normal)
    }
}

/// The configured directory with presence, and this room's call buttons (rooms).
public struct RoomDirectory: Sendable, Equatable, Codable {
    /// On the wire its presence's members beside `id` and `name`.
    public struct Room: Sendable, Equatable, Codable {
        public var id: RoomID
        public var name: String
        public var presence: Presence
        public init(id: RoomID, name: String, presence: Presence) {
            self.id = id
            self.name = name
            self.presence = presence
        }

        private enum CodingKeys: String, CodingKey { case id, name }

        public init(from decoder: Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            self.init(id: try c.decode(RoomID.self, forKey: .id), name: try c.decode(String.self, forKey: .name),
                      presence: try Presence(from: decoder))
        }

        public func encode(to encoder: Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(id, forKey: .id)
            try c.encode(name, forKey: .name)
            try presence.encode(to: encoder)
        }
    }

    public struct Button: Sendable, Equatable, Codable {
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
