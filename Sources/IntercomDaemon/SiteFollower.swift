import Calls
import Foundation
import Logging
import Posix
import Site

/// Keeps this terminal's site document as new as the newest any terminal announces, on a thread
/// of its own: when a hello names another document (`CallService.siteHeard`), and every tenth of
/// a second, what the hellos said goes into `SiteSpread`, which says
/// whom to ask; the fetch runs here (a peer that does not answer holds up nothing else), what
/// comes is judged whole and kept by the `SiteKeeper`, and the hellos say so at once, before the
/// daemon applies it (`Daemon.followSite`): the next hop does not wait for this one's apply.
final class SiteFollower: Service, @unchecked Sendable {
    // @unchecked: everything but `stopping` and `worker` belongs to the worker thread.
    var serviceName: String { "site follower" }
    private var spread: SiteSpread
    private let keeper: SiteKeeper
    private let calls: CallService
    private let log: Logger
    private let stopping: StopSignal
    private var worker: WorkerThread?
    private var lastFailureLogged = -Double.infinity
    /// What the hellos said at the last step, and when every peer was last fed to the spread:
    /// a peer is fed again when its stamp changes, and all once a second (the spread forgets one
    /// not heard for `peerSilence`), not ten times a second each.
    private var lastHeard: [RoomID: SiteStamp?] = [:]
    private var lastRefresh = -Double.infinity
    private let failureLogInterval = 60.0
    private let interval = 0.1

    init(room: String, keeper: SiteKeeper, calls: CallService, logger: Logger) throws(SystemError) {
        spread = SiteSpread(me: room, holding: keeper.held?.stamp)
        self.keeper = keeper
        self.calls = calls
        log = logger
        stopping = try StopSignal()
    }

    func start() throws(SystemError) {
        let t = WorkerThread(name: "site-fetch") { [self] in
            while !stopping.isSet {
                // A hello naming another document, or one handed over, rings at once; the tenth of
                // a second is for retries and timeouts, only while there are any (an idle site
                // costs no wake-ups).
                calls.siteHeard.wait(seconds: spread.awaitsTicks ? interval : nil)
                guard !stopping.isSet else { break }
                step(now: MonotonicClock.seconds())
            }
        }
        try t.start()
        worker = t
    }

    func stop() {
        stopping.set()
        calls.siteHeard.ring()
        worker?.join()
        worker = nil
    }

    private func step(now: Double) {
        // What the keeper holds now (handed over by the administrator's tool meanwhile), before
        // anything heard could make the spread fetch it again.
        var effects = takeHeld(now: now)
        let heard = calls.heardSites()
        let refresh = now - lastRefresh >= 1
        for (room, stamp) in heard where refresh || lastHeard[room] != .some(stamp) {
            if let stamp, keeper.held.map({ $0.stamp < stamp }) ?? true { keeper.heardOf(stamp.version, from: room.value) }
            effects += spread.handle(.heard(peer: room.value, stamp: stamp), now: now)
        }
        lastHeard = heard
        if refresh { lastRefresh = now }
        effects += spread.handle(.tick, now: now)
        // Only the fetch the spread still wants (one asked for before a `holding` may be moot);
        // its end may start the next at once.
        while let (peer, stamp) = effects.lazy.compactMap({ e -> (String, SiteStamp)? in
            guard case .fetch(let p, let s) = e, self.spread.fetching.map({ $0.peer == p && $0.stamp == s }) ?? false else { return nil }
            return (p, s)
        }).first, !stopping.isSet {
            let outcome = fetch(stamp, from: peer)
            let now = MonotonicClock.seconds()
            effects = takeHeld(now: now) + spread.handle(.fetchEnded(peer: peer, outcome: outcome), now: now)
        }
    }

    /// A document the keeper adopted since the last look (fetched here, or handed over by the
    /// administrator's tool): the spread learns of it, and the hellos say it now, so that the others
    /// may fetch it from here while the daemon applies it.
    private func takeHeld(now: Double) -> [SiteSpread.Effect] {
        guard let held = keeper.held?.stamp, spread.held.map({ $0 < held }) ?? true else { return [] }
        let effects = spread.handle(.holding(held), now: now)
        for case .announce in effects { keeper.announce(to: calls) }
        return effects
    }

    private func fetch(_ stamp: SiteStamp, from peer: String) -> SiteSpread.FetchOutcome {
        guard let endpoint = RoomID(peer).flatMap({ calls.signalling(of: $0) }) else { return .failed }
        log.info("site: \(peer) holds version \(stamp.version), this terminal \(keeper.version): fetching it from \(endpoint)")
        keeper.fetching(stamp.version, from: peer)
        // The stop bell ends a fetch at once: the daemon stops within its 100 ms.
        let reply = SiteTransfer.exchange(.get(site: keeper.siteID), with: endpoint, timeout: spread.settings.fetchTimeout,
                                          cancel: stopping.bell.descriptor)
        if case .success(.document) = reply { keeper.received(stamp.version) }
        return judge(reply, from: peer)
    }

    private func judge(_ reply: Result<SiteTransfer.Reply, SiteTransferError>, from peer: String) -> SiteSpread.FetchOutcome {
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
        case .success(.busy):
            keeper.count { $0.fetchBusy += 1 }
            return .busy
        case .success(let other): failure = "answered \(other)"
        case .failure(let error): failure = error.description
        }
        keeper.count { $0.fetchFailed += 1 }
        let now = MonotonicClock.seconds()
        if now - lastFailureLogged >= failureLogInterval {
            log.warning("site: fetching the site document from \(peer) failed: \(failure) (tried again, or another terminal; logged at most once a minute)")
            lastFailureLogged = now
        }
        return .failed
    }
}
