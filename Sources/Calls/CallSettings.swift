import Posix
// Everything the call engine is configured with. Every time and bound has its default here and
// nowhere else; the integrator fills these from the daemon's configuration.

/// A room of the practice as the directory lists it.
public struct DirectoryEntry: Sendable, Equatable {
    public var name: String
    /// Where this room's daemon receives signalling.
    public var signalling: IPv4Endpoint
    public init(name: String, signalling: IPv4Endpoint) {
        self.name = name
        self.signalling = signalling
    }
}

/// Who may call whom.
public enum CallPermissions: Sendable, Equatable {
    case everyone
    /// Caller → the rooms it may call; a room missing from the map may call nobody.
    case only([RoomID: Set<RoomID>])

    public func allows(caller: RoomID, callee: RoomID) -> Bool {
        switch self {
        case .everyone: true
        case .only(let map): map[caller]?.contains(callee) ?? false
        }
    }
}

/// Times in seconds.
public struct CallTiming: Sendable, Equatable {
    /// First retransmission of an unacknowledged message; the interval then doubles.
    public var retransmitInitial = 0.05
    /// Doubling stops here, so that several copies still go out before giving up.
    public var retransmitMaxInterval = 0.25
    /// No ack after this long: the peer is unreachable.
    public var giveUpAfter = 1.0
    public var helloInterval = 1.0
    /// No hello (or other message) for this long: the room is offline.
    public var offlineAfter = 3.5
    /// The chime plays this long before an auto-answered call opens its audio.
    public var ringTime = 1.5
    /// A call nobody answers: the callee counts it missed, the caller marks it unavailable.
    public var answerTimeout = 30.0
    /// During a call, a hello goes to each room on the other side this often (besides the
    /// directory-wide one every `helloInterval`): a participant that vanished is noticed quickly.
    public var callKeepalive = 0.2
    /// Nothing heard from the other side of a running call for this long: it is gone (a killed
    /// daemon, a cable pulled). Seven keepalives in a row must be lost first: under 20 % random
    /// loss that happens about once in 80,000 windows.
    public var peerSilenceTimeout = 1.5
    /// A missed call not yet acknowledged is reminded (a tone) once it is this old, and again
    /// every this long while any waits; 0 = no reminder.
    public var missedReminder = 60.0
    /// A notification heard and not acknowledged is reminded (its reminder tone, and read again)
    /// this long after it was heard, and again every this long; 0 = no reminder.
    public var notificationReminder = 60.0
    /// How often a terminal tells every room how it is doing (`TerminalHealth`).
    public var healthInterval = 10.0

    public init() {}

    /// Every time divided by `factor`: the accelerated soak's daemon (`[testing] time_scale`).
    public func scaled(by factor: Double) -> CallTiming {
        var t = self
        for path in [\CallTiming.retransmitInitial, \.retransmitMaxInterval, \.giveUpAfter, \.helloInterval, \.offlineAfter,
                     \.ringTime, \.answerTimeout, \.callKeepalive, \.peerSilenceTimeout, \.missedReminder, \.notificationReminder,
                     \.healthInterval] {
            t[keyPath: path] /= factor
        }
        return t
    }
}

/// Memory bounds.
public struct CallLimits: Sendable, Equatable {
    /// Message ids remembered per sender for dropping duplicates.
    public var dedupeWindow = 128
    /// Missed-call notices, notifications and their acknowledgements kept for rooms that were
    /// offline (all rooms together; oldest dropped).
    public var pendingNotices = 256
    /// Ended call ids remembered so that late messages about them are ignored.
    public var endedCalls = 256

    public init() {}
}

public struct CallSettings: Sendable, Equatable {
    /// This room.
    public var room: RoomID
    /// Every room, this one included.
    public var directory: [RoomID: DirectoryEntry]
    /// Button name → the rooms it calls and the kind of call.
    public var buttons: [String: CallButton] = [:]
    public var permissions: CallPermissions = .everyone
    public var autoAnswer = true
    /// Do-not-disturb at first start (a persisted value, passed to the engine, wins).
    public var doNotDisturb = false
    /// This room's media socket: where the other side of a call sends its microphone.
    public var media: IPv4Endpoint
    /// How this room's voice reaches the callees when it calls.
    public var callerVoice: VoiceDelivery = .unicast
    /// Notification types by id.
    public var notifications: [String: NotificationType] = [:]
    /// Read notifications aloud at first start (a persisted value, passed to the engine, wins).
    public var readAloud = true
    /// false: this terminal has no sound devices; it places and takes no calls (an invite is
    /// declined as not permitted), and notifications work as everywhere.
    public var audio = true
    public var timing = CallTiming()
    public var limits = CallLimits()

    public init(room: RoomID, directory: [RoomID: DirectoryEntry], media: IPv4Endpoint) {
        self.room = room
        self.directory = directory
        self.media = media
    }

    /// The larger of a call's invite to `targets` and its missed-call notice, from `room`; nil
    /// when the list breaks the codec's other rules (reported on their own). Where the caller's
    /// media listens does not change the size.
    public static func largestCallMessage(from room: RoomID, to targets: [RoomID], voice: VoiceDelivery) -> Int? {
        guard !targets.isEmpty, targets.count <= SignalCodec.maxParticipants else { return nil }
        let call = CallID(.max)
        // With a media key: the largest an invite gets (signalling sealed per pair of terminals).
        let media = InviteMedia(callerMedia: IPv4Endpoint(address: .max, port: .max), voice: voice,
                                key: MediaKey(bytes: [UInt8](repeating: 0, count: MediaKey.length)))
        let invite = SignalMessage.invite(call, participants: targets, media: media, kind: .emergency)
        let missed = SignalMessage.missedCall(MissedCallNotice(callID: call, caller: room, participants: targets, started: 1e12))
        return max(SignalCodec.size(of: invite, from: room), SignalCodec.size(of: missed, from: room))
    }

    /// The size of a notification of `type` from `room` to `recipients`.
    public static func notificationMessage(from room: RoomID, type: NotificationType, to recipients: [RoomID]) -> Int {
        SignalCodec.size(of: .notify(type.notification(id: NotificationID(.max), from: room, to: recipients, sent: 1e12)), from: room)
    }

    /// Problems, each naming its key, for the configuration loader to report; empty when valid.
    public func problems() -> [String] {
        var out: [String] = []
        if directory[room] == nil { out.append("room: \(room) is not in the directory") }
        for (name, targets) in buttons.mapValues(\.rooms).sorted(by: { $0.key < $1.key }) {
            if targets.isEmpty { out.append("buttons.\(name): calls no room") }
            if targets.count > SignalCodec.maxParticipants {
                out.append("buttons.\(name): more than \(SignalCodec.maxParticipants) rooms")
            }
            for target in targets where directory[target] == nil || target == room {
                out.append("buttons.\(name): \(target) is \(target == room ? "this room" : "not in the directory")")
            }
            if let size = Self.largestCallMessage(from: room, to: targets, voice: callerVoice), size > SignalCodec.maxDatagramBytes {
                out.append("buttons.\(name): a call to its \(targets.count) rooms needs \(size)-byte messages, one datagram holds \(SignalCodec.maxDatagramBytes): fewer rooms or shorter room ids")
            }
        }
        for (id, type) in notifications.sorted(by: { $0.key < $1.key }) {
            if type.recipients.isEmpty { out.append("notifications.\(id).recipients: names no room") }
            if type.recipients.count > SignalCodec.maxParticipants {
                out.append("notifications.\(id).recipients: more than \(SignalCodec.maxParticipants) rooms")
            }
            for r in type.recipients where directory[r] == nil || r == room {
                out.append("notifications.\(id).recipients: \(r) is \(r == room ? "this room" : "not in the directory")")
            }
            if !type.recipients.isEmpty, type.recipients.count <= SignalCodec.maxParticipants {
                let size = Self.notificationMessage(from: room, type: type, to: type.recipients)
                if size > SignalCodec.maxDatagramBytes {
                    out.append("notifications.\(id): to its \(type.recipients.count) rooms with its label and text it needs a \(size)-byte message, one datagram holds \(SignalCodec.maxDatagramBytes): fewer rooms, shorter room ids or a shorter text")
                }
            }
        }
        if case .only(let map) = permissions {
            for (caller, callees) in map.sorted(by: { $0.key < $1.key }) {
                for r in [caller] + callees.sorted() where directory[r] == nil {
                    out.append("permissions.\(caller): \(r) is not in the directory")
                }
            }
        }
        if media.port == 0 { out.append("media: port 0") }
        if case .multicast(let group) = callerVoice, !group.isMulticast || group.port == 0 {
            out.append("caller_voice: \(group) is not a multicast group with a port")
        }
        let t = timing
        let positive: [(String, Double)] = [
            ("retransmit_initial", t.retransmitInitial), ("retransmit_max_interval", t.retransmitMaxInterval),
            ("give_up_after", t.giveUpAfter), ("hello_interval", t.helloInterval), ("offline_after", t.offlineAfter),
            ("answer_timeout", t.answerTimeout), ("peer_silence_timeout", t.peerSilenceTimeout),
            ("health_interval", t.healthInterval),
        ]
        for (key, value) in positive where !(value > 0 && value.isFinite) { out.append("timing.\(key): must be > 0") }
        if !(t.ringTime >= 0 && t.ringTime.isFinite) { out.append("timing.ring_time: must be >= 0") }
        if !(t.missedReminder >= 0 && t.missedReminder.isFinite) { out.append("timing.missed_reminder: must be >= 0") }
        if !(t.notificationReminder >= 0 && t.notificationReminder.isFinite) { out.append("timing.notification_reminder: must be >= 0") }
        if t.offlineAfter <= t.helloInterval { out.append("timing.offline_after: must exceed hello_interval") }
        if t.peerSilenceTimeout <= t.helloInterval { out.append("timing.peer_silence_timeout: must exceed hello_interval") }
        if limits.dedupeWindow < 1 || limits.pendingNotices < 0 || limits.endedCalls < 1 {
            out.append("limits: dedupe_window and ended_calls must be >= 1, pending_notices >= 0")
        }
        return out
    }
}
