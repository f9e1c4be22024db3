import Glibc

/// How the audio thread was actually scheduled, for the log and for `status`.
public enum SchedulingOutcome: Sendable, Equatable {
    case fifo(priority: Int32)
    /// Real-time scheduling was asked for but refused; the reason is the system's message.
    case normal(reason: String)
}

/// A dedicated pthread for the audio loop, started with SCHED_FIFO when permitted.
///
/// Swift's Thread/Dispatch cannot set a real-time policy before the thread runs,
/// so this wraps pthread directly.
public final class RealtimeThread: @unchecked Sendable {
    // @unchecked: `handle` is written once by start() and read by join(), both on the owner's thread.
    private var handle: pthread_t?
    private let body: @Sendable () -> Void
    public private(set) var scheduling: SchedulingOutcome = .normal(reason: "not started")

    /// - Parameter name: shown by `top -H` and `ps -L` (15 characters at most).
    public init(name: String, body: @escaping @Sendable () -> Void) {
        let comm = String(name.prefix(15))
        self.body = {
            // Glibc's module lacks pthread_setname_np; the kernel's own file does the same.
            if let f = fopen("/proc/thread-self/comm", "w") { fputs(comm, f); fclose(f) }
            body()
        }
    }

    /// Starts the thread. `priority` 0 means normal scheduling.
    public func start(priority: Int32) throws {
        precondition(handle == nil, "RealtimeThread started twice")
        if priority > 0 {
            if let thread = try? spawn(priority: priority) {
                handle = thread
                scheduling = .fifo(priority: priority)
            } else {
                let err = lastSpawnError
                handle = try spawn(priority: 0)
                scheduling = .normal(reason: String(cString: strerror(err)))
            }
        } else {
            handle = try spawn(priority: 0)
            scheduling = .normal(reason: "disabled in configuration")
        }
    }

    public func join() {
        guard let h = handle else { return }
        pthread_join(h, nil)
        handle = nil
    }

    private var lastSpawnError: Int32 = 0

    private func spawn(priority: Int32) throws -> pthread_t {
        var attr = pthread_attr_t()
        pthread_attr_init(&attr)
        defer { pthread_attr_destroy(&attr) }
        if priority > 0 {
            pthread_attr_setinheritsched(&attr, Int32(PTHREAD_EXPLICIT_SCHED))
            pthread_attr_setschedpolicy(&attr, SCHED_FIFO)
            var param = sched_param(sched_priority: priority)
            pthread_attr_setschedparam(&attr, &param)
        }
        let box = Unmanaged.passRetained(BodyBox(body))
        var thread = pthread_t()
        let rc = pthread_create(&thread, &attr, { raw in
            let box = Unmanaged<BodyBox>.fromOpaque(raw!).takeRetainedValue()
            box.body()
            return nil
        }, box.toOpaque())
        if rc != 0 {
            box.release()
            lastSpawnError = rc
            throw RealtimeError.threadCreation(code: rc, message: String(cString: strerror(rc)))
        }
        return thread
    }
}

private final class BodyBox: Sendable {
    let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
}

public enum RealtimeError: Error, CustomStringConvertible {
    case threadCreation(code: Int32, message: String)
    public var description: String {
        switch self {
        case let .threadCreation(code, message): "cannot create audio thread: \(message) (\(code))"
        }
    }
}

/// Locks pages in RAM once they are used, so that nothing the audio thread has touched is ever
/// paged out again. `MCL_ONFAULT` (Linux 4.4; 4, not in Glibc's Swift module) keeps untouched
/// mappings out: locking them all cost 127-283 MB per process, mostly ICU data and 8 MB thread
/// stacks that are never used. The audio thread touches its buffers before its loop runs.
/// Returns nil on success, else the system's reason.
public func lockProcessMemory() -> String? {
    let onFault: Int32 = 4
    return mlockall(Int32(MCL_CURRENT) | Int32(MCL_FUTURE) | onFault) == 0 ? nil : String(cString: strerror(errno))
}

/// Monotonic clock in nanoseconds.
@inline(__always)
public func monotonicNanos() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}
