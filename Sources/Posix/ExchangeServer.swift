/// A TCP server for one request and one reply per connection, on a thread of its own with one
/// poller: the daemon's metrics page and its site document transfers. Every connection is
/// non-blocking and bounded in time, size and number, so a client that stalls or floods holds up
/// nobody else. What a request means and what it is answered is the `Handler`'s; this type owns
/// the sockets, the deadlines and the stop.
public final class ExchangeServer: Service, @unchecked Sendable {
    // @unchecked: `connections` belong to the server thread once started.
    public var serviceName: String { name }
    public struct Settings: Sendable {
        /// Exchanges under way at once; one more is answered `handler.busy()`.
        public var connections = 8
        /// An exchange not done by then (request read, reply written) is dropped.
        public var timeout = 5.0
        /// A request still incomplete beyond this many bytes is dropped.
        public var maxRequest = 8192
        public init(connections: Int = 8, timeout: Double = 5.0, maxRequest: Int = 8192) {
            self.connections = connections
            self.timeout = timeout
            self.maxRequest = maxRequest
        }
    }

    /// What the bytes read so far deserve.
    public enum Step {
        case readMore
        case reply([UInt8])
    }

    /// Why a connection was dropped without a reply.
    public enum Refusal: Sendable, Equatable {
        case timedOut
        /// The client closed (or the connection broke) after this many bytes of its request.
        case ended(bytes: Int)
        case tooLarge(bytes: Int)
    }

    public struct Handler: Sendable {
        /// Called on the server thread with the whole request read so far.
        public var request: @Sendable (_ input: [UInt8], _ peer: IPv4Endpoint) -> Step
        /// The reply to a client beyond `Settings.connections`.
        public var busy: @Sendable () -> [UInt8]
        public var refused: @Sendable (_ peer: IPv4Endpoint, _ why: Refusal) -> Void
        /// A fault of the server itself (accept or poll failed).
        public var fault: @Sendable (String) -> Void
        public init(request: @escaping @Sendable ([UInt8], IPv4Endpoint) -> Step, busy: @escaping @Sendable () -> [UInt8],
                    refused: @escaping @Sendable (IPv4Endpoint, Refusal) -> Void, fault: @escaping @Sendable (String) -> Void) {
            self.request = request
            self.busy = busy
            self.refused = refused
            self.fault = fault
        }
    }

    private final class Connection {
        let socket: TCPSocket
        let peer: IPv4Endpoint
        let deadline: Double
        var input: [UInt8] = []
        var output: [UInt8] = []
        var written = 0
        /// Answered before its request was read (busy): the request is read and dropped until
        /// the client closes, since a socket closed with unread data resets the connection, and
        /// the reset throws the answer away before the client reads it.
        var draining = false
        var drained = 0
        var clientClosed = false
        var dropped = false
        var replied: Bool { !output.isEmpty && written == output.count }
        var done: Bool { dropped || (replied && (!draining || clientClosed)) }
        init(socket: TCPSocket, peer: IPv4Endpoint, deadline: Double) {
            self.socket = socket
            self.peer = peer
            self.deadline = deadline
        }
    }

    public let listener: TCPSocket
    private let name: String
    private let settings: Settings
    private let handler: Handler
    private let stopping: StopSignal
    private var thread: WorkerThread?
    private var connections: [Connection] = []

    public init(listener: TCPSocket, name: String, settings: Settings = Settings(), handler: Handler) throws(SystemError) {
        self.listener = listener
        self.name = name
        self.settings = settings
        self.handler = handler
        stopping = try StopSignal()
    }

    public func start() throws(SystemError) {
        let t = WorkerThread(name: name) { [self] in run() }
        try t.start()
        thread = t
    }

    /// Wakes the thread at once and waits for it; open connections are closed.
    public func stop() {
        stopping.set()
        thread?.join()
        thread = nil
    }

    private func run() {
        var poller = Poller()
        var chunk = [UInt8](repeating: 0, count: 16_384)
        while !stopping.isSet {
            poller.reset()
            poller.add(stopping.bell.descriptor, read: true, write: false)
            let listening = poller.add(listener.descriptor, read: true, write: false)
            for c in connections { poller.add(c.socket.descriptor, read: c.output.isEmpty || c.replied, write: !c.output.isEmpty && !c.replied) }
            do {
                try poller.wait(timeoutMs: connections.isEmpty ? -1 : 100)
            } catch {
                handler.fault("\(name): \(error); it stops")
                break
            }
            let now = MonotonicClock.seconds()
            for (i, c) in connections.enumerated() {
                let ready = poller.events(at: listening + 1 + i)
                if c.output.isEmpty, ready.readable || ready.broken { read(c, into: &chunk) }
                if !c.output.isEmpty, !c.replied { write(c) }
                if c.draining, c.replied, ready.readable || ready.broken { drain(c, into: &chunk) }
            }
            if poller.events(at: listening).readable { acceptAll(now: now) }
            for c in connections where now >= c.deadline && !c.done { handler.refused(c.peer, .timedOut) }
            connections.removeAll { $0.done || now >= $0.deadline }
        }
        connections.removeAll()
    }

    private func acceptAll(now: Double) {
        while true {
            let accepted: (socket: TCPSocket, peer: IPv4Endpoint)?
            do { accepted = try listener.accept() } catch {
                handler.fault("\(name): \(error)")
                return
            }
            guard let accepted else { return }
            let c = Connection(socket: accepted.socket, peer: accepted.peer, deadline: now + settings.timeout)
            connections.append(c)
            if connections.count > settings.connections {
                c.draining = true
                answer(c, handler.busy())
            }
        }
    }

    private func read(_ c: Connection, into chunk: inout [UInt8]) {
        while c.output.isEmpty, !c.dropped {
            switch chunk.withUnsafeMutableBytes({ c.socket.receive(into: $0) }) {
            case .done(let n):
                c.input += chunk[..<n]
                switch handler.request(c.input, c.peer) {
                case .reply(let bytes): answer(c, bytes)
                case .readMore where c.input.count > settings.maxRequest:
                    handler.refused(c.peer, .tooLarge(bytes: c.input.count))
                    c.dropped = true
                case .readMore: continue
                }
            case .wouldBlock: return
            case .endOfStream, .failed:
                handler.refused(c.peer, .ended(bytes: c.input.count))
                c.dropped = true
                return
            }
        }
    }

    /// Reads and drops what a client answered busy still sends, until it closes (bounded by
    /// the deadline and `maxRequest`).
    private func drain(_ c: Connection, into chunk: inout [UInt8]) {
        while true {
            switch chunk.withUnsafeMutableBytes({ c.socket.receive(into: $0) }) {
            case .done(let n):
                c.drained += n
                if c.drained > settings.maxRequest { c.clientClosed = true; return }
            case .wouldBlock: return
            case .endOfStream, .failed:
                c.clientClosed = true
                return
            }
        }
    }

    private func answer(_ c: Connection, _ bytes: [UInt8]) {
        guard !bytes.isEmpty else { c.dropped = true; return }
        c.output = bytes
        write(c)
    }

    private func write(_ c: Connection) {
        while c.written < c.output.count {
            let r = c.output.withUnsafeBytes { c.socket.send(UnsafeRawBufferPointer(rebasing: $0[c.written...])) }
            switch r {
            case .done(let n): c.written += n
            case .wouldBlock: return
            case .endOfStream, .failed:
                c.dropped = true  // the client left
                return
            }
        }
    }
}
