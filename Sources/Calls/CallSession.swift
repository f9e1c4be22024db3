import Posix
// The one call a room takes part in, from this room's side.

public struct CallSession: Sendable, Equatable {
    public enum Role: Sendable, Equatable { case caller, callee }

    public let id: CallID
    public let role: Role
    public let kind: CallKind
    public let caller: RoomID
    /// The callees. The caller keeps each one's status; a callee knows its own status only and
    /// lists the others as `.ringing` (invited, outcome not known here).
    public internal(set) var participants: [Participant]
    public let started: Double
    /// When this room's audio opened (callee) or the first callee connected (caller).
    public internal(set) var connectedAt: Double?
    /// The mute state the other side reported, by room.
    public internal(set) var remoteMute: [RoomID: MuteState] = [:]

    // Callee side.
    var invite: InviteMedia?
    var inviteMessageID: UInt32 = 0
    var ringDeadline: Double?
    // Caller side: where each connected callee receives media, and the id of its accept (a
    // later hello from it that names no call or another call means it dropped ours).
    var calleeMedia: [RoomID: IPv4Endpoint] = [:]
    var acceptIDs: [RoomID: UInt32] = [:]
    /// Callees we sent `end` to (timed out): a late accept from them is ignored.
    var endSent: Set<RoomID> = []
    /// Last message from each room on the other side, for `peerSilenceTimeout`.
    var lastHeard: [RoomID: Double] = [:]
    var lastMuteID: [RoomID: UInt32] = [:]
    /// The key of this room's stream in the call (`MediaKey`), drawn when it placed or accepted it.
    var ownKey: MediaKey?
    /// Caller side: each connected callee's stream key, from its accept.
    var calleeKeys: [RoomID: MediaKey] = [:]
    /// Caller side of `callMissed`: the missed call this call answers, acknowledged once it connects.
    var answersMissed: CallID?

    init(id: CallID, role: Role, kind: CallKind = .normal, caller: RoomID, participants: [Participant], started: Double) {
        self.id = id
        self.role = role
        self.kind = kind
        self.caller = caller
        self.participants = participants
        self.started = started
    }

    public var isConnected: Bool { connectedAt != nil }

    public func status(of room: RoomID) -> ParticipantStatus? {
        participants.first { $0.room == room }?.status
    }

    mutating func setStatus(_ status: ParticipantStatus, of room: RoomID) {
        if let i = participants.firstIndex(where: { $0.room == room }) { participants[i].status = status }
    }

    /// Callees still in the call or on their way in.
    var remaining: [RoomID] {
        participants.filter { $0.status == .ringing || $0.status == .connected }.map(\.room)
    }

    public var connectedRooms: [RoomID] { participants.filter { $0.status == .connected }.map(\.room) }

    /// The rooms this room talks to: every callee for the caller, the caller for a callee.
    var peers: [RoomID] { role == .caller ? remaining : [caller] }
}
