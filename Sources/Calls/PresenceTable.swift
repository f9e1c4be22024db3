// Which rooms are online, as far as their hellos (and other messages) tell.

struct RoomPresence: Sendable {
    var presence = Presence(online: false)
    var lastHeard = -Double.infinity
    /// Id of the newest hello, to ignore an older one arriving late.
    var lastHelloID: UInt32?
    /// The call the room's newest hello named.
    var call: CallID?
    /// What its newest directory-wide hello announced (a keepalive carries none and keeps it).
    var announcement: SiteAnnouncement?
    /// What its newest health message said.
    var health: TerminalHealth?
}

struct PresenceTable: Sendable {
    private(set) var rooms: [RoomID: RoomPresence] = [:]
    /// Hellos that named another site document than the room's hello before: who follows the
    /// site looks again when this moves.
    private(set) var siteChanges: UInt64 = 0

    subscript(room: RoomID) -> RoomPresence { rooms[room] ?? RoomPresence() }

    mutating func forget(roomsNotIn keep: Set<RoomID>) { rooms = rooms.filter { keep.contains($0.key) } }

    /// Notes a message from `room`; returns the presence if it changed (came online).
    mutating func heard(_ room: RoomID, now: Double) -> Presence? {
        var r = self[room]
        r.lastHeard = now
        defer { rooms[room] = r }
        guard !r.presence.online else { return nil }
        r.presence.online = true
        return r.presence
    }

    /// A hello this many ids behind the newest, or more, is not a late copy but the first of a
    /// restarted room (its ids start anywhere): a late hello is a few messages behind at most.
    static let restartDistance: UInt32 = 1 << 16

    /// Applies a hello; returns the new presence if it changed, or nil. Older hellos are ignored
    /// (`stale` set).
    mutating func hello(_ room: RoomID, id: UInt32, doNotDisturb: Bool, call: CallID?, announcement: SiteAnnouncement? = nil,
                        now: Double)
        -> (changed: Presence?, stale: Bool)
    {
        var r = self[room]
        if let last = r.lastHelloID, !isAfter(id, last), last &- id < Self.restartDistance { return (nil, true) }
        let before = r.presence
        r.lastHelloID = id
        r.lastHeard = now
        r.call = call
        if let announcement {
            if r.announcement?.site != announcement.site { siteChanges &+= 1 }
            r.announcement = announcement
        }
        r.presence = Presence(online: true, doNotDisturb: doNotDisturb, inCall: call != nil)
        rooms[room] = r
        return (r.presence == before ? nil : r.presence, false)
    }

    /// Notes a health message (the room was heard: `heard` ran for the datagram).
    mutating func health(_ room: RoomID, _ health: TerminalHealth) { rooms[room, default: RoomPresence()].health = health }

    /// Marks `room` offline at once, as if it had gone silent; true if it was online.
    mutating func drop(_ room: RoomID) -> Bool {
        guard self[room].presence.online else { return false }
        markOffline(room)
        return true
    }

    private mutating func markOffline(_ room: RoomID) {
        rooms[room]?.presence = Presence(online: false)
        // A room that comes back may have restarted with a new message id start.
        rooms[room]?.lastHelloID = nil
    }

    /// Rooms silent for longer than `offlineAfter`, now marked offline.
    mutating func expire(now: Double, offlineAfter: Double) -> [RoomID] {
        var gone: [RoomID] = []
        for (room, r) in rooms where r.presence.online && now - r.lastHeard > offlineAfter {
            markOffline(room)
            gone.append(room)
        }
        return gone.sorted()
    }
}
