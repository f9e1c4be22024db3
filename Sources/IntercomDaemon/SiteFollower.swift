import Calls
import Foundation
import Logging
import Posix
import Site
import Synchronization

/// Keeps this terminal's site document as new as the newest any terminal announces. The daemon's
/// main loop calls `step` every tenth of a second: what the hellos said goes into `SiteSpread`,
/// which says whom to ask; the fetch itself runs on a thread of its own (a peer that does not
/// answer holds up nothing else), and what comes is judged whole by the `SiteKeeper`. Applying an
/// adopted document is the daemon's (`Daemon.applySiteIfNew`).
final class SiteFollower: @unchecked Sendable {
    // @unchecked: `spread`, `current` and the log limiter belong to the main thread; the worker
    // shares only `mailbox`.
    private struct Mailbox {
        var job: (peer: String, endpoint: IPv4Endpoint)?
        var result: (peer: String, reply: Result<SiteTransfer.Reply, SiteTransferError>)?
    }

    private var spread: SiteSpread
    private let keeper: SiteKeeper
    private let log: Logger
    private let mailbox = Mutex(Mailbox())
    private let stop: StopSignal
    private var worker: WorkerThread?
    private var lastFailureLogged = -Double.infinity
    /// What the hellos said at the last step, and when every peer was last fed to the spread:
    /// a peer is fed again when its stamp changes, and all once a second (the spread forgets one
    /// not heard for `peerSilence`), not ten times a second each.
    private var lastHeard: [RoomID: SiteStamp?] = [:]
    private var lastRefresh = -Double.infinity
    private let failureLogInterval = 60.0

    init(room: String, keeper: SiteKeeper, logger: Logger) throws(SystemError) {
        spread = SiteSpread(me: room, holding: keeper.held?.stamp)
        self.keeper = keeper
        log = logger
        stop = try StopSignal()
    }

    func start() throws(SystemError) {
        let timeout = spread.settings.fetchTimeout, site = keeper.siteID
        let t = WorkerThread(name: "site-fetch") { [self] in
            while !stop.isSet {
                _ = stop.bell.wait(seconds: nil)
                stop.bell.drain()
                guard let job = mailbox.withLock({ m -> (peer: String, endpoint: IPv4Endpoint)? in defer { m.job = nil }; return m.job }) else { continue }
                // The stop bell ends a fetch at once: the daemon stops within its 100 ms.
                let reply = SiteTransfer.exchange(.get(site: site), with: job.endpoint, timeout: timeout, cancel: stop.bell.descriptor)
                mailbox.withLock { $0.result = (job.peer, reply) }
            }
        }
        try t.start()
        worker = t
    }

    func stopAndJoin() {
        stop.set()
        worker?.join()
        worker = nil
    }

    /// - Parameters:
    ///   - heard: what each online room's hellos say it holds.
    ///   - directory: where each room's terminal listens (its signalling port takes transfers);
    ///     asked for only when a fetch starts.
    func step(now: Double, heard: [RoomID: SiteStamp?], directory: () -> [RoomID: DirectoryEntry]) {
        var effects: [SiteSpread.Effect] = []
        if let done = mailbox.withLock({ m -> (peer: String, reply: Result<SiteTransfer.Reply, SiteTransferError>)? in defer { m.result = nil }; return m.result }) {
            effects += spread.handle(.fetchEnded(peer: done.peer, outcome: judge(done.reply, from: done.peer, now: now)), now: now)
        }
        // What the keeper holds now (fetched just above, or handed over by the administrator's
        // tool), before anything heard could make the spread fetch it again.
        if let held = keeper.held?.stamp, spread.held.map({ $0 < held }) ?? true {
            effects += spread.handle(.holding(held), now: now)
        }
        let refresh = now - lastRefresh >= 1
        for (room, stamp) in heard where refresh || lastHeard[room] != .some(stamp) {
            effects += spread.handle(.heard(peer: room.value, stamp: stamp), now: now)
        }
        lastHeard = heard
        if refresh { lastRefresh = now }
        effects += spread.handle(.tick, now: now)
        // Only the fetch the spread still wants (one asked for before a `holding` may be moot).
        for case .fetch(let peer, let stamp) in effects where spread.fetching.map({ $0.peer == peer && $0.stamp == stamp }) ?? false {
            guard let endpoint = RoomID(peer).flatMap({ directory()[$0]?.signalling }) else {
                effects += spread.handle(.fetchEnded(peer: peer, outcome: .failed), now: now)
                continue
            }
            log.info("site: \(peer) holds version \(stamp.version), this terminal \(keeper.version): fetching it from \(endpoint)")
            mailbox.withLock { $0.job = (peer, endpoint) }
            stop.bell.ring()
        }
    }

    private func judge(_ reply: Result<SiteTransfer.Reply, SiteTransferError>, from peer: String, now: Double) -> SiteSpread.FetchOutcome {
        let failure: String
        switch reply {
        case .success(.document(let bytes)):
            keeper.count { $0.fetched += 1 }
            switch keeper.offer(bytes, from: peer) {
            case .adopt(let held):
                log.notice("site: version \(held.version) fetched from \(peer), checked and kept")
                return .adopted
            case .alreadyHeld:
                return .adopted
            case .refuse(_, let describe):
                if let describe { log.warning("\(describe)") }
                return .refused
            }
        case .success(let other): failure = "answered \(other)"
        case .failure(let error): failure = error.description
        }
        keeper.count { $0.fetchFailed += 1 }
        if now - lastFailureLogged >= failureLogInterval {
            log.warning("site: fetching the site document from \(peer) failed: \(failure) (tried again, or another terminal; logged at most once a minute)")
            lastFailureLogged = now
        }
        return .failed
    }
}
