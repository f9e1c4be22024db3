import Foundation
import Logging
import Posix
import Site

/// Hands out the site document this terminal holds to any terminal that asks, and takes a new
/// one from the administrator's tool (`intercom-site publish`): `SiteTransfer` over TCP on the
/// terminal's signalling port number. One thread, one poller, every connection non-blocking and
/// bounded in time and size, so that a client that stalls or floods holds up nobody else; what it
/// takes is judged whole by the `SiteKeeper` before anything of it is used.
final class SiteDocumentServer: @unchecked Sendable {
    // @unchecked: `connections` and `lastLogged` belong to the server thread once started.
    struct Settings: Sendable {
        /// Transfers under way at once; one more is told `busy`.
        var connections = 8
        /// A transfer not done by then (request read, reply written) is dropped.
        var transferTimeout = 5.0
        /// Refused requests are logged at most this often (all are counted).
        var logInterval = 60.0
    }

    private final class Connection {
        let socket: TCPSocket
        let peer: IPv4Endpoint
        let deadline: Double
        var input: [UInt8] = []
        var output: [UInt8] = []
        var written = 0
        /// Answered before its request was read (`busy`): the request is read and dropped until
        /// the client closes, since a socket closed with unread data resets the connection, and
        /// the reset throws the answer away before the client reads it.
        var draining = false
        var drained = 0
        var clientClosed = false
        var replied: Bool { !output.isEmpty && written == output.count }
        /// The reply is written (and, draining, the client has closed): closed.
        var done: Bool { replied && (!draining || clientClosed) }
        init(socket: TCPSocket, peer: IPv4Endpoint, deadline: Double) {
            self.socket = socket
            self.peer = peer
            self.deadline = deadline
        }
    }

    let listener: TCPSocket
    private let keeper: SiteKeeper
    private let settings: Settings
    private let log: Logger
    private let stop: StopSignal
    private var thread: WorkerThread?
    private var connections: [Connection] = []
    private var lastLogged = -Double.infinity
    private var unlogged = 0
    /// Called when a document handed over is adopted (the follower announces it at once).
    private let onAdopted: @Sendable () -> Void

    init(port: UInt16, keeper: SiteKeeper, settings: Settings = Settings(), logger: Logger,
         onAdopted: @escaping @Sendable () -> Void = {}) throws(SystemError) {
        // A site's terminals hear of a new version at once and connect together: a full backlog
        // drops their SYNs, and each waits a second for its retransmission.
        listener = try TCPSocket.listen(IPv4Endpoint(address: 0, port: port), backlog: 128)
        self.keeper = keeper
        self.onAdopted = onAdopted
        self.settings = settings
        log = logger
        stop = try StopSignal()
    }

    func start() throws(SystemError) {
        let t = WorkerThread(name: "site-server") { [self] in run() }
        try t.start()
        thread = t
    }

    func stopAndJoin() {
        stop.set()
        thread?.join()
        thread = nil
    }

    private func run() {
        var poller = Poller()
        var chunk = [UInt8](repeating: 0, count: 16_384)
        while !stop.isSet {
            poller.reset()
            poller.add(stop.bell.descriptor, read: true, write: false)
            let listening = poller.add(listener.descriptor, read: true, write: false)
            for c in connections { poller.add(c.socket.descriptor, read: c.output.isEmpty || c.replied, write: !c.output.isEmpty && !c.replied) }
            do {
                try poller.wait(timeoutMs: connections.isEmpty ? -1 : 100)
            } catch {
                log.error("site document server: \(error); it stops")
                break
            }
            let now = MonotonicClock.seconds()
            let polled = connections
            for (i, c) in polled.enumerated() {
                let ready = poller.events(at: listening + 1 + i)
                if c.output.isEmpty, ready.readable || ready.broken { read(c, into: &chunk) }
                if !c.output.isEmpty, !c.replied { write(c) }
                if c.draining, c.replied, ready.readable || ready.broken { drain(c, into: &chunk) }
            }
            if poller.events(at: listening).readable { acceptAll(now: now) }
            for c in connections where now >= c.deadline && !c.done {
                refuse(c, "not done within \(Int(settings.transferTimeout)) s")
            }
            connections.removeAll { $0.done || now >= $0.deadline }
        }
        connections.removeAll()
    }

    private func acceptAll(now: Double) {
        while true {
            let accepted: (socket: TCPSocket, peer: IPv4Endpoint)?
            do { accepted = try listener.accept() } catch {
                log.error("site document server: \(error)")
                return
            }
            guard let accepted else { return }
            let c = Connection(socket: accepted.socket, peer: accepted.peer, deadline: now + settings.transferTimeout)
            connections.append(c)
            if connections.count > settings.connections {
                // Counted, not logged: when a site's terminals all hear of a version at once,
                // this is the spread at work (the asker tries again shortly, or another holder).
                keeper.count { $0.answeredBusy += 1 }
                c.draining = true
                answer(c, .busy)
            }
        }
    }

    private func read(_ c: Connection, into chunk: inout [UInt8]) {
        while c.output.isEmpty {
            switch chunk.withUnsafeMutableBytes({ c.socket.receive(into: $0) }) {
            case .done(let n):
                c.input += chunk[..<n]
                switch SiteTransfer.parseRequest(c.input) {
                case .incomplete: continue
                case .malformed(let why):
                    refuse(c, why)
                    answer(c, .badRequest(why))
                case .complete(let request): answer(c, reply(to: request, from: c.peer))
                }
            case .wouldBlock: return
            case .endOfStream, .failed:
                refuse(c, "the request ended after \(c.input.count) bytes")
                c.output = [0]
                c.written = 1  // nothing to write: dropped
                return
            }
        }
    }

    /// Reads and drops what a client answered `busy` still sends, until it closes (bounded by
    /// the transfer's deadline and size).
    private func drain(_ c: Connection, into chunk: inout [UInt8]) {
        while true {
            switch chunk.withUnsafeMutableBytes({ c.socket.receive(into: $0) }) {
            case .done(let n):
                c.drained += n
                if c.drained > SiteTransfer.maximumBytes { c.clientClosed = true; return }
            case .wouldBlock: return
            case .endOfStream, .failed:
                c.clientClosed = true
                return
            }
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
        }
    }

    private func answer(_ c: Connection, _ reply: SiteTransfer.Reply) {
        c.output = reply.encoded()
        write(c)
    }

    private func write(_ c: Connection) {
        while c.written < c.output.count {
            let r = c.output.withUnsafeBytes { c.socket.send(UnsafeRawBufferPointer(rebasing: $0[c.written...])) }
            switch r {
            case .done(let n): c.written += n
            case .wouldBlock: return
            case .endOfStream, .failed:
                c.written = c.output.count  // the client left: dropped
                return
            }
        }
    }

    /// Counts a refused transfer and logs it, at most once per `logInterval`.
    private func refuse(_ c: Connection, _ why: String) {
        keeper.count { $0.badRequests += 1 }
        let now = MonotonicClock.seconds()
        guard now - lastLogged >= settings.logInterval else { unlogged += 1; return }
        let more = unlogged > 0 ? " (and \(unlogged) more since the last such line)" : ""
        log.warning("site document transfer from \(c.peer.host) refused: \(why)\(more)")
        lastLogged = now
        unlogged = 0
    }
}
