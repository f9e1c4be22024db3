import Control
import Foundation
import ServiceLifecycle

/// When each room's terminal was last seen online: every `interval` s the service asks its
/// member which rooms are online and notes them in the database, so the page can say "zuletzt
/// gesehen" of one that is gone, across restarts of the service too (one small write per round).
struct LastSeen: Service {
    let member: SiteMember
    let database: SiteDatabase
    static let interval = 30.0

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                if case .rooms(let directory)? = try? await member.run(.rooms) {
                    let online = directory.rooms.filter(\.presence.online).map(\.id.description)
                    _ = try? database.markSeen(online, now: Date().timeIntervalSince1970)
                }
                try? await Task.sleep(for: .seconds(Self.interval))
            }
        }
    }
}

extension SiteEditor.Terminal {
    /// What the service's member knows of this room's terminal (online, the document it holds)
    /// and when it was last seen; a terminal online now was seen now.
    mutating func add(_ heard: SiteOverview.Terminal?, lastSeen: Double?, now: Double) {
        online = heard?.online
        siteVersion = heard?.siteVersion
        behind = heard?.behind
        health = heard?.health
        self.lastSeen = heard?.online == true ? now : lastSeen
    }
}
