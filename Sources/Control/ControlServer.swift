import Calls
import Dispatch
import Foundation
import Posix
import RealTime
import Synchronization

/// The control socket: a listening Unix socket and its clients, served by one thread with one
/// `poll`, everything non-blocking. Requests go to the `ControlHandler` on that thread; events
/// published from any thread are streamed to subscribers. Every buffer is bounded by `settings`.
///
///     let server = try ControlServer(settings: settings, handler: daemonHandler)  // creates the socket file
///     server.start()
///     server.publish(.doNotDisturbChanged(true))                                  // any thread
///     server.stop()                                                               // closes all, removes the file
public final class ControlServer: Service {
    public var serviceName: String { "control socket" }
    public let settings: ControlSettings
    let handler: any ControlHandler
    let listener: UnixSocket
    private let inode: UInt64
    private let lock: SocketLock
    let doorbell: Doorbell
    let events: EventQueue
    let stopping: StopSignal
    private let phase = Mutex(Phase.created)
    private let thread = Mutex<WorkerThread?>(nil)
    let counters = Mutex(ControlServerStatistics())

    private enum Phase { case created, running, stopped }

    /// Creates the socket file (mode and group from `settings`) and its lock file, replacing a
    /// stale socket. Throws when another daemon holds the path or a system call fails (with the
    /// system's reason); a failed start leaves no file behind.
    public init(settings: ControlSettings, handler: any ControlHandler) throws(ControlSocketError) {
        self.settings = settings
        self.handler = handler
        let made = try UnixSocket.listen(path: settings.socketPath, mode: settings.mode, group: settings.group, backlog: settings.backlog)
        (listener, inode, lock) = (made.socket, made.inode, made.lock)
        do {
            doorbell = try Doorbell()
            stopping = try StopSignal()
        } catch {
            UnixSocket.removeSocketFile(path: settings.socketPath, inode: made.inode)
            made.lock.release()
            throw ControlSocketError(error, path: settings.socketPath)
        }
        events = EventQueue(capacity: settings.maxPendingEvents)
    }

    /// Starts the server thread ("intercom-control"). Once only.
    public func start() throws(SystemError) {
        let go = phase.withLock { p in
            guard p == .created else { return false }
            p = .running
            return true
        }
        guard go else { return }
        let loop = ServerLoop(server: self)
        // Decoding nested JSON recurses; 512 levels (the decoder's limit) need 4 MiB of stack.
        let t = WorkerThread(name: "intercom-control", stackBytes: 4 << 20) { loop.run() }
        try t.start()
        thread.withLock { $0 = t }
    }

    /// Queues an event for the subscribers; never blocks beyond a short mutex. When the queue is
    /// full (`maxPendingEvents`) the event is counted as lost and subscribers are told how many.
    public func publish(_ event: CallEvent) {
        if events.push(event) { doorbell.ring() }
    }

    /// Closes every client and the listening socket and removes the socket file (if it is still
    /// ours) and its lock file. Waits for the server thread; do not call it from the handler. Idempotent.
    public func stop() {
        let was = phase.withLock { p in
            defer { p = .stopped }
            return p
        }
        switch was {
        case .running:
            stopping.set()
            thread.withLock { $0 }?.join()
        case .created:
            listener.close()
        case .stopped:
            return
        }
        UnixSocket.removeSocketFile(path: settings.socketPath, inode: inode)
        lock.release()
    }

    public var statistics: ControlServerStatistics {
        var s = counters.withLock { $0 }
        s.eventsPending = events.count
        return s
    }

    deinit {
        // A server that was never started still owns its file.
        if phase.withLock({ $0 }) == .created {
            UnixSocket.removeSocketFile(path: settings.socketPath, inode: inode)
            lock.release()
        }
    }
}
