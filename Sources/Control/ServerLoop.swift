import Calls
import Posix
import Foundation

/// The server thread's state and loop. Only that thread touches it once started.
final class ServerLoop: @unchecked Sendable {
    private let server: ControlServer
    private let settings: ControlSettings
    private var clients: [ClientConnection] = []
    private var nextNumber = 1
    private var acceptPausedUntil = 0.0
    private var readBuffer: [UInt8]

    init(server: ControlServer) {
        self.server = server
        settings = server.settings
        readBuffer = [UInt8](repeating: 0, count: max(1, settings.readChunkBytes))
    }

    private var now: Double { ProcessInfo.processInfo.systemUptime }

    /// How often idle and stalled clients are looked for: often enough to honour the shorter timeout.
    private var checkIntervalMs: Int32 {
        let timeouts = [settings.idleTimeout, settings.stalledOutputTimeout].filter { $0 > 0 }
        guard let shortest = timeouts.min() else { return -1 }
        return Int32(min(1000, max(10, shortest * 1000 / 4)))
    }

    func run() {
        var poller = Poller()
        while !server.stopping.isSet {
            poller.reset()
            poller.add(server.stopping.bell.descriptor, read: true)
            let bell = poller.add(server.doorbell.descriptor, read: true, write: false)
            let accepting = now >= acceptPausedUntil
            let listen = poller.add(server.listener.descriptor, read: accepting, write: false)
            let first = listen + 1
            for c in clients {
                poller.add(c.socket.descriptor, read: c.closeReason == nil, write: c.queuedOutput > 0)
            }
            do {
                try poller.wait(timeoutMs: accepting ? checkIntervalMs : 100)
            } catch {
                server.handler.serverError("\(error)")
                break
            }
            let t = now
            if poller.events(at: bell).readable {
                server.doorbell.drain()
                deliverEvents(now: t)
            }
            let polled = clients
            if poller.events(at: listen).readable { acceptAll(now: t) }
            for (i, c) in polled.enumerated() {
                let ready = poller.events(at: first + i)
                if (ready.readable || ready.broken), c.closeReason == nil, c.dropReason == nil { read(c, now: t) }
                if ready.writable || c.queuedOutput > 0, c.dropReason == nil { _ = c.flush(now: t) }
            }
            sweep(now: t)
            removeFinished()
        }
        for c in clients { c.dropReason = "server stopping" }
        removeFinished()
        server.listener.close()
    }

    // MARK: Accepting

    private func acceptAll(now t: Double) {
        while true {
            let socket: UnixSocket?
            do {
                socket = try server.listener.accept()
            } catch {
                // Out of descriptors: pause accepting instead of spinning on a readable listener.
                server.handler.serverError("\(error)")
                acceptPausedUntil = t + 0.1
                return
            }
            guard let socket else { return }
            let info = ControlClientInfo(number: nextNumber, credentials: socket.peerCredentials())
            nextNumber += 1
            guard clients.count < settings.maxClients else {
                let refusal = ControlResponse(id: nil, outcome: .failure(.init(.unavailable, "too many control clients (limit \(settings.maxClients))")))
                if let line = try? Wire.encode(refusal) {
                    _ = (line + [UInt8(ascii: "\n")]).withUnsafeBytes { socket.send($0) }
                }
                socket.close()
                server.counters.withLock { $0.refused += 1 }
                continue
            }
            clients.append(ClientConnection(info: info, socket: socket, now: t))
            server.counters.withLock {
                $0.accepted += 1
                $0.clients = clients.count
            }
            server.handler.clientConnected(info)
        }
    }

    // MARK: Reading and answering

    private func read(_ c: ClientConnection, now t: Double) {
        let result = readBuffer.withUnsafeMutableBytes { c.socket.receive(into: $0) }
        switch result {
        case .done(let n):
            c.lastInput = t
            let lines = readBuffer.withUnsafeBytes { c.takeLines(appending: UnsafeRawBufferPointer(rebasing: $0[..<n])) }
            for line in lines where c.closeReason == nil && c.dropReason == nil {
                answer(line, from: c, now: t)
            }
            if c.input.count > settings.maxLineBytes, c.closeReason == nil {
                refuseLongLine(c, now: t)
            }
        case .endOfStream:
            // A client may half-close after its last request: answer it, then close.
            if let rest = c.takeRemainder(), c.closeReason == nil { answer(rest, from: c, now: t) }
            if c.closeReason == nil { c.closeReason = "closed by the client" }
        case .wouldBlock:
            break
        case .failed(let code):
            c.dropReason = "read failed: \(code.description)"
        }
        _ = c.flush(now: t)
        checkOutputBound(c, now: t)
    }

    private func refuseLongLine(_ c: ClientConnection, now t: Double) {
        c.discardInput()
        send(ControlResponse(id: nil, outcome: .failure(.init(.parseError, "request line longer than \(settings.maxLineBytes) bytes"))), to: c, now: t)
        c.closeReason = "request line longer than \(settings.maxLineBytes) bytes"
        server.counters.withLock { $0.dropped += 1 }
    }

    private func answer(_ raw: ArraySlice<UInt8>, from c: ClientConnection, now t: Double) {
        guard raw.count <= settings.maxLineBytes else { return refuseLongLine(c, now: t) }
        var line = raw
        if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
        if line.allSatisfy({ $0 == 32 || $0 == 9 }) { return }
        server.counters.withLock { $0.requests += 1 }
        let (id, request) = ControlRequest.read(line)
        let outcome: Result<ControlReply, ControlFailure>
        switch request {
        case .failure(let f):
            outcome = .failure(f)
        case .success(.ping):
            outcome = .success(.pong(protocolVersion: ControlReply.protocolVersion))
        case .success(.subscribe):
            if let refusal = server.handler.subscriptionRefusal(for: c.info) {
                outcome = .failure(refusal)
            } else {
                if !c.subscribed { server.counters.withLock { $0.subscribers += 1 } }
                c.subscribed = true
                outcome = .success(.subscribed)
            }
        case .success(.command(let command)):
            outcome = server.handler.handle(command, from: c.info)
        }
        send(ControlResponse(id: id, outcome: outcome), to: c, now: t)
    }

    private func send(_ response: ControlResponse, to c: ClientConnection, now t: Double) {
        let line: [UInt8]
        do {
            line = try Wire.encode(response)
        } catch {
            line = Array(#"{"error":{"code":"internal","message":"response could not be encoded"},"id":null,"ok":false}"#.utf8)
        }
        c.enqueue(line, now: t)
        checkOutputBound(c, now: t)
    }

    // MARK: Events

    private func deliverEvents(now t: Double) {
        let (events, lost) = server.events.takeAll()
        guard !events.isEmpty || lost > 0 else { return }
        server.counters.withLock {
            $0.eventsDelivered += events.count
            $0.eventsLost += lost
        }
        let subscribers = clients.filter { $0.subscribed }
        guard !subscribers.isEmpty else { return }
        var lines: [[UInt8]] = []
        if lost > 0, let line = try? Wire.encode(ControlEvent.eventsLost(lost)) { lines.append(line) }
        for e in events {
            if let line = try? Wire.encode(e) { lines.append(line) }
        }
        for c in subscribers {
            for line in lines where c.dropReason == nil {
                c.enqueue(line, now: t)
                checkOutputBound(c, now: t)
            }
            if c.dropReason == nil { _ = c.flush(now: t) }
        }
    }

    // MARK: Bounds

    /// Over the bound after writing what the socket takes: the client does not read; drop it.
    private func checkOutputBound(_ c: ClientConnection, now t: Double) {
        guard c.dropReason == nil, c.queuedOutput > settings.maxQueuedOutputBytes else { return }
        _ = c.flush(now: t)
        guard c.dropReason == nil, c.queuedOutput > settings.maxQueuedOutputBytes else { return }
        c.dropReason = "not reading: more than \(settings.maxQueuedOutputBytes) bytes queued"
        server.counters.withLock { $0.dropped += 1 }
    }

    private func sweep(now t: Double) {
        for c in clients where c.dropReason == nil {
            if c.queuedOutput > 0, settings.stalledOutputTimeout > 0, t - c.lastOutputProgress > settings.stalledOutputTimeout {
                c.dropReason = "not reading: output stalled for \(settings.stalledOutputTimeout) s"
                server.counters.withLock { $0.dropped += 1 }
            } else if settings.idleTimeout > 0, !c.subscribed, c.queuedOutput == 0, t - c.lastInput > settings.idleTimeout {
                c.dropReason = "idle for \(settings.idleTimeout) s"
                server.counters.withLock { $0.dropped += 1 }
            }
        }
    }

    private func removeFinished() {
        guard clients.contains(where: { $0.isFinished }) else { return }
        var kept: [ClientConnection] = []
        for c in clients {
            guard c.isFinished else { kept.append(c); continue }
            c.socket.close()
            server.handler.clientDisconnected(c.info, reason: c.dropReason ?? c.closeReason ?? "closed")
        }
        clients = kept
        server.counters.withLock {
            $0.clients = kept.count
            $0.subscribers = kept.filter(\.subscribed).count
        }
    }
}
