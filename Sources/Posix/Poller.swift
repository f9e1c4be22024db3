import Glibc

/// One `poll` over several descriptors: the one poller of the non-real-time threads (the control
/// server, the site document's transfers).
public struct Poller {
    private var fds: [pollfd] = []

    public init() {}

    public mutating func reset() { fds.removeAll(keepingCapacity: true) }

    /// Adds a descriptor; returns its index for `events(at:)`.
    @discardableResult
    public mutating func add(_ descriptor: Int32, read: Bool, write: Bool) -> Int {
        var events: Int16 = 0
        if read { events |= Int16(POLLIN) }
        if write { events |= Int16(POLLOUT) }
        fds.append(pollfd(fd: descriptor, events: events, revents: 0))
        return fds.count - 1
    }

    /// Waits up to `timeoutMs` (-1: forever). EINTR counts as a wake-up with nothing ready.
    public mutating func wait(timeoutMs: Int32) throws(SystemError) {
        let rc = fds.withUnsafeMutableBufferPointer { poll($0.baseAddress, nfds_t($0.count), timeoutMs) }
        if rc < 0, SystemError.currentErrno != .interrupted { throw SystemError("poll", SystemError.currentErrno) }
        if rc < 0 { for i in fds.indices { fds[i].revents = 0 } }
    }

    public struct Ready: Sendable {
        public var readable: Bool
        public var writable: Bool
        /// Hang-up or error: reading tells which (end of stream or the error).
        public var broken: Bool
    }

    public func events(at index: Int) -> Ready {
        let r = fds[index].revents
        return Ready(readable: r & Int16(POLLIN) != 0,
                     writable: r & Int16(POLLOUT) != 0,
                     broken: r & (Int16(POLLHUP) | Int16(POLLERR) | Int16(POLLNVAL)) != 0)
    }
}
