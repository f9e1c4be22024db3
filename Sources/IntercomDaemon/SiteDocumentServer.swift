import Calls
import Control
import Foundation
import Logging
import Posix
import Site
import SiteSecurity
import Synchronization

/// Hands out the site document this terminal holds to any terminal that asks, and takes a new
/// one from the administrator's tool (`intercom-site publish`): `SiteTransfer` over TCP on the
/// terminal's signalling port number, served by an `ExchangeServer` (one thread, bounded
/// connections); what it takes is judged whole by the `SiteKeeper` before anything of it is used.
/// The administrator's signed orders (`SiteOrder`: the device loopback test, from the site
/// service's page) come the same way, and are answered in the control socket's words.
final class SiteDocumentServer: Service {
    var serviceName: String { "site document transfers" }
    struct Settings: Sendable {
        /// Transfers under way at once; one more is told `busy`.
        var connections = 8
        /// A transfer not done by then (request read, reply written) is dropped.
        var transferTimeout = 5.0
        /// Refused requests are logged at most this often (all are counted).
        var logInterval = 60.0
    }

    private let server: ExchangeServer

    init(port: UInt16, keeper: SiteKeeper, orders: OrderTaker? = nil, settings: Settings = Settings(), logger: Logger,
         onAdopted: @escaping @Sendable () -> Void = {}) throws(SystemError) {
        // A site's terminals hear of a new version at once and connect together: a full backlog
        // drops their SYNs, and each waits a second for its retransmission.
        let listener = try TCPSocket.listen(IPv4Endpoint(address: 0, port: port), backlog: 128)
        let handler = TransferHandler(keeper: keeper, orders: orders, logInterval: settings.logInterval, log: logger, onAdopted: onAdopted)
        server = try ExchangeServer(
            listener: listener, name: "site-server",
            settings: .init(connections: settings.connections, timeout: settings.transferTimeout, maxRequest: SiteTransfer.maximumBytes),
            handler: .init(
                request: { input, peer in handler.request(input, from: peer) },
                busy: {
                    // Counted, not logged: when a site's terminals all hear of a version at once,
                    // this is the spread at work (the asker tries again shortly, or another holder).
                    keeper.count { $0.answeredBusy += 1 }
                    return SiteTransfer.Reply.busy.encoded()
                },
                refused: { peer, why in
                    switch why {
                    case .timedOut: handler.refuse(peer, "not done within \(Int(settings.transferTimeout)) s")
                    case .ended(let bytes): handler.refuse(peer, "the request ended after \(bytes) bytes")
                    case .tooLarge(let bytes): handler.refuse(peer, "\(bytes) bytes and still incomplete")
                    }
                },
                fault: { logger.error("site document server: \($0)") }))
    }

    func start() throws(SystemError) { try server.start() }
    func stop() { server.stop() }
}

/// What the administrator's orders may do at this terminal: the device loopback test (a chirp in
/// the room), only while no call runs and nothing is read aloud, and its result at any time
/// (where there is sound); the room's history, for the site's history on the page.
struct OrderTaker: Sendable {
    /// The most history entries an order gets (the newest; calls and notifications each).
    static let historyLimit = 200
    let loopback: DeviceLoopback?
    let audioRunning: @Sendable () -> Bool
    let isQuiet: @Sendable () -> Bool
    let calls: CallService

    func carryOut(_ action: SiteOrder.Action) -> (command: ControlCommand, outcome: Result<ControlReply, ControlFailure>) {
        let noSound = ControlFailure(.unavailable, "this terminal has no sound ([audio] enabled = false)")
        switch action {
        case .loopback:
            let command = ControlCommand.loopback(insertMs: 0)
            guard let loopback else { return (command, .failure(noSound)) }
            guard isQuiet() else { return (command, .failure(ControlFailure(.busy, "a call or a notification is under way at this terminal"))) }
            return (command, loopback.start(insertMs: 0, audioRunning: audioRunning()))
        case .loopbackResult:
            guard let loopback else { return (.loopbackResult, .failure(noSound)) }
            return (.loopbackResult, .success(loopback.status()))
        case .history:
            let command = ControlCommand.history(limit: Self.historyLimit)
            return (command, calls.handle(command))
        }
    }
}

/// What a transfer request is answered; runs on the server's thread.
private final class TransferHandler: Sendable {
    let keeper: SiteKeeper
    let orders: OrderTaker?
    let logInterval: Double
    let log: Logger
    let onAdopted: @Sendable () -> Void
    /// When a refusal was last logged, and how many were not since.
    private let logged = Mutex((at: -Double.infinity, unlogged: 0))

    init(keeper: SiteKeeper, orders: OrderTaker?, logInterval: Double, log: Logger, onAdopted: @escaping @Sendable () -> Void) {
        self.keeper = keeper
        self.orders = orders
        self.logInterval = logInterval
        self.log = log
        self.onAdopted = onAdopted
    }

    func request(_ input: [UInt8], from peer: IPv4Endpoint) -> ExchangeServer.Step {
        switch SiteTransfer.parseRequest(input) {
        case .incomplete: return .readMore
        case .malformed(let why):
            refuse(peer, why)
            return .reply(SiteTransfer.Reply.badRequest(why).encoded())
        case .complete(let request): return .reply(reply(to: request, from: peer).encoded())
        }
    }

    private func reply(to request: SiteTransfer.Request, from peer: IPv4Endpoint) -> SiteTransfer.Reply {
        guard request.site == keeper.siteID else {
            keeper.count { $0.badRequests += 1 }
            return .otherSite
        }
        switch request {
        case .get:
            guard let held = keeper.held else { return .noDocument }
            keeper.count { $0.served += 1 }
            return .document(held.encoded)
        case .offer(_, let document):
            keeper.count { $0.offered += 1 }
            switch keeper.offer(document, from: "a transfer from \(peer.host)") {
            case .adopt:
                onAdopted()
                return .adopted
            case .alreadyHeld: return .alreadyHeld
            case .refuse(let reason, let describe):
                if let describe { log.warning("\(describe)") }
                return .refused(reason.rawValue)
            }
        case .enrolment:
            return .enrolment(keeper.enrolmentRequest)
        case .order(_, let signed):
            guard let orders else {
                refuse(peer, "an order, and this terminal takes none (no audio or no calls)")
                return .refused("no orders taken here")
            }
            switch keeper.take(order: signed, now: Date().timeIntervalSince1970) {
            case .failure(let why):
                refuse(peer, "an order: \(why.rawValue)")
                return .refused(why.rawValue)
            case .success(let order):
                // The history is for the service alone: an order for it names the key to seal to.
                if order.action == .history, order.replyKey == nil {
                    refuse(peer, "an order for the history without a key to seal it to")
                    return .refused(SiteOrderRefusal.malformed.rawValue)
                }
                let (command, outcome) = orders.carryOut(order.action)
                if order.action == .loopback { log.notice("site: the administrator's order from \(peer.host): \(command)") }
                guard let reply = try? Wire.encode(ControlResponse(id: nil, outcome: outcome)) else { return .refused("the reply could not be written") }
                if order.replyKey == nil { return .orderDone(reply) }
                guard let sealed = OrderReplySeal.seal(reply, for: order) else {
                    refuse(peer, "an order whose reply key is not one")
                    return .refused(SiteOrderRefusal.malformed.rawValue)
                }
                return .orderDone(sealed)
            }
        }
    }

    /// Counts a refused transfer and logs it, at most once per `logInterval`.
    func refuse(_ peer: IPv4Endpoint, _ why: String) {
        keeper.count { $0.badRequests += 1 }
        let now = MonotonicClock.seconds()
        let more: Int? = logged.withLock { state in
            guard now - state.at >= logInterval else { state.unlogged += 1; return nil }
            defer { state = (now, 0) }
            return state.unlogged
        }
        guard let more else { return }
        log.warning("site document transfer from \(peer.host) refused: \(why)\(more > 0 ? " (and \(more) more since the last such line)" : "")")
    }
}
