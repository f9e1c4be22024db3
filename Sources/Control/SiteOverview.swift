import Calls
import Posix

/// What a terminal knows of every terminal's software and site document (site): its own, and what
/// each online room's hellos announce. `behind`: holds an older document than the newest any of
/// them holds (or none while others hold one).
public struct SiteOverview: Sendable, Equatable, Codable {
    public struct Terminal: Sendable, Equatable, Codable {
        public var room: String
        public var online: Bool
        // Optional fields are left out of the reply where nothing is known.
        /// Nil: offline, or it announces nothing (an older build).
        public var software: String?
        /// The site document it holds; nil: none, or unknown.
        public var siteVersion: UInt64?
        /// The first 16 hex digits of that document's SHA-256 (as stats.site.digest).
        public var digest: String?
        /// When it applied that document, Unix time.
        public var appliedAt: Double?
        public var behind: Bool
        /// How it is doing, as its newest health message said (this terminal: now); nil: offline,
        /// or nothing heard yet (it tells every 10 s; an older build never does).
        public var health: TerminalHealth?
    }

    /// This terminal first, then the directory's other rooms by id.
    public var terminals: [Terminal]
    /// The newest document any of them holds; nil: none.
    public var newestVersion: UInt64?

    /// Builds the overview from this room's announcement and the other rooms' (those not heard
    /// from are offline, with nothing known).
    public init(me: RoomID, own: SiteAnnouncement, directory: [RoomID], heard: [RoomID: SiteAnnouncement], online: Set<RoomID>,
                ownHealth: TerminalHealth? = nil, health: [RoomID: TerminalHealth] = [:]) {
        let all: [(RoomID, SiteAnnouncement?)] = [(me, own)] + directory.filter { $0 != me }.sorted().map { ($0, heard[$0]) }
        let stamps = all.compactMap { $0.1?.site }
        let newest = stamps.max()
        terminals = all.map { room, a in
            let held = a?.site
            let isOnline = room == me || online.contains(room)
            // Behind: known (online, announcing) and holding less than the newest anyone holds.
            var behind = false
            if isOnline, a != nil, let newest { behind = held.map { $0 < newest } ?? true }
            return Terminal(room: room.value, online: isOnline, software: isOnline ? a?.software : nil,
                            siteVersion: isOnline ? held?.version : nil, digest: isOnline ? held?.digest.hexDigits : nil,
                            appliedAt: isOnline ? a?.appliedAt : nil, behind: behind,
                            health: room == me ? ownHealth : isOnline ? health[room] : nil)
        }
        newestVersion = newest?.version
    }
}
