import Glibc

/// The one `poll` of the program: every thread that waits for descriptors (the audio thread's
/// devices, the network and calls threads, the control and exchange servers, the key reader, the
/// relay) waits here, with one rule for an interrupted call: it is a wake-up with nothing ready.
/// Each loop puts its `StopSignal`'s bell among the descriptors, so a stop wakes it at once.
///
/// Allocation-free once built: the entries keep their capacity across `reset`, so the audio thread
/// may wait with it (it adds its descriptors once per session and then only waits).
public struct Poller {
    private var fds: [pollfd]
    /// The last wait was interrupted by a signal (it returned 0 before its time).
    public private(set) var wasInterrupted = false

    /// - Parameter capacity: how many descriptors are expected (more only cost a reallocation).
    public init(capacity: Int = 4) {
        fds = []
        fds.reserveCapacity(capacity)
    }

    public mutating func reset() { fds.removeAll(keepingCapacity: true) }

    public var count: Int { fds.count }

    /// Adds a descriptor; returns its index for `events(at:)`.
    @discardableResult
    public mutating func add(_ descriptor: Int32, read: Bool, write: Bool = false) -> Int {
        var events: Int16 = 0
        if read { events |= Int16(POLLIN) }
        if write { events |= Int16(POLLOUT) }
        fds.append(pollfd(fd: descriptor, events: events, revents: 0))
        return fds.count - 1
    }

    /// Adds entries a library filled in (ALSA's poll descriptors); returns their indices.
    @discardableResult
    public mutating func add(entries: [pollfd]) -> Range<Int> {
        let first = fds.count
        fds.append(contentsOf: entries)
        return first..<fds.count
    }

    /// Waits up to `timeoutMs` (-1: forever) and returns how many descriptors are ready. An
    /// interrupted wait (EINTR) returns 0 with nothing ready: the caller's loop looks again.
    @discardableResult
    public mutating func wait(timeoutMs: Int32) throws(SystemError) -> Int {
        for i in fds.indices { fds[i].revents = 0 }
        let rc = fds.withUnsafeMutableBufferPointer { poll($0.baseAddress, nfds_t($0.count), timeoutMs) }
        wasInterrupted = false
        if rc >= 0 { return Int(rc) }
        let code = SystemError.currentErrno
        if code == .interrupted {
            wasInterrupted = true
            return 0
        }
        throw SystemError("poll", code)
    }

    /// `wait` with the time as seconds (nil: forever).
    @discardableResult
    public mutating func wait(seconds: Double?) throws(SystemError) -> Int {
        try wait(timeoutMs: Self.milliseconds(seconds))
    }

    public struct Ready: Sendable {
        public var readable: Bool
        public var writable: Bool
        /// Hang-up or error: reading tells which (end of stream or the error).
        public var broken: Bool
        public var any: Bool { readable || writable || broken }
    }

    public func events(at index: Int) -> Ready {
        let r = fds[index].revents
        return Ready(readable: r & Int16(POLLIN) != 0,
                     writable: r & Int16(POLLOUT) != 0,
                     broken: r & (Int16(POLLHUP) | Int16(POLLERR) | Int16(POLLNVAL)) != 0)
    }

    /// The entries as `poll` left them, for a library that reads its own (`snd_pcm_poll_descriptors_revents`).
    public mutating func withEntries<R>(_ range: Range<Int>, _ body: (UnsafeMutablePointer<pollfd>, Int) -> R) -> R {
        fds.withUnsafeMutableBufferPointer { body($0.baseAddress! + range.lowerBound, range.count) }
    }

    /// Seconds as `poll`'s milliseconds: rounded up (a wait never ends early), clamped to
    /// 0...Int32.max; nil or infinity: -1, forever. A deadline already past may be -infinity.
    public static func milliseconds(_ seconds: Double?) -> Int32 {
        guard let seconds, seconds.isFinite || seconds < 0 else { return -1 }
        return Int32(max(0, min(seconds * 1000, Double(Int32.max))).rounded(.up))
    }

    /// Waits up to `timeoutMs` for one descriptor to be readable (or hung up); false on timeout,
    /// on an interrupted wait and on an error. Allocates nothing (a datagram's wait calls it).
    public static func waitReadable(_ descriptor: Int32, timeoutMs: Int32) -> Bool {
        var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, timeoutMs) > 0
    }
}
