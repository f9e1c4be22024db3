import Glibc
import Synchronization

/// How a thread was actually scheduled, for the log and for `status`.
public enum SchedulingOutcome: Sendable, Equatable {
    case fifo(priority: Int32)
    /// Real-time scheduling was asked for but refused (the system's message), or not asked for.
    case normal(reason: String)
}

/// The one thread type: a named pthread, with SCHED_FIFO when asked for and permitted (Swift's
/// Thread and Dispatch cannot set a real-time policy before the thread runs). Every long-lived
/// thread of the daemon and its tools is one of these.
public final class WorkerThread: Sendable {
    private let body: @Sendable () -> Void
    private let stackBytes: Int?
    private let state = Mutex<(handle: pthread_t?, scheduling: SchedulingOutcome)>((nil, .normal(reason: "not started")))

    /// - Parameter name: shown by `top -H` and `ps -L` (15 characters at most).
    /// - Parameter stackBytes: the stack's size; nil: the system's default (8 MiB on Linux).
    public init(name: String, stackBytes: Int? = nil, body: @escaping @Sendable () -> Void) {
        self.stackBytes = stackBytes
        let comm = String(name.prefix(15))
        self.body = {
            // Glibc's module lacks pthread_setname_np; the kernel's own file does the same.
            if let f = fopen("/proc/thread-self/comm", "w") { fputs(comm, f); fclose(f) }
            body()
        }
    }

    /// Starts `body` on a new thread at once (normal scheduling).
    @discardableResult
    public static func start(name: String, body: @escaping @Sendable () -> Void) throws(SystemError) -> WorkerThread {
        let t = WorkerThread(name: name, body: body)
        try t.start()
        return t
    }

    public var scheduling: SchedulingOutcome { state.withLock { $0.scheduling } }

    /// Starts the thread. `priority` > 0 asks for SCHED_FIFO; refused, the thread runs normally
    /// and `scheduling` says why.
    public func start(priority: Int32 = 0) throws(SystemError) {
        precondition(state.withLock { $0.handle } == nil, "WorkerThread started twice")
        var outcome = SchedulingOutcome.normal(reason: "disabled in configuration")
        var handle: pthread_t
        if priority > 0 {
            switch spawn(priority: priority) {
            case .success(let h):
                handle = h
                outcome = .fifo(priority: priority)
            case .failure(let refused):
                handle = try spawn(priority: 0).get()
                outcome = .normal(reason: refused.errno.description)
            }
        } else {
            handle = try spawn(priority: 0).get()
        }
        state.withLock { $0 = (handle, outcome) }
    }

    /// Waits for the thread to end (at once if it was never started).
    public func join() {
        guard let h = state.withLock({ s -> pthread_t? in defer { s.handle = nil }; return s.handle }) else { return }
        pthread_join(h, nil)
    }

    private func spawn(priority: Int32) -> Result<pthread_t, SystemError> {
        var attr = pthread_attr_t()
        pthread_attr_init(&attr)
        defer { pthread_attr_destroy(&attr) }
        if let stackBytes { pthread_attr_setstacksize(&attr, stackBytes) }
        if priority > 0 {
            pthread_attr_setinheritsched(&attr, Int32(PTHREAD_EXPLICIT_SCHED))
            pthread_attr_setschedpolicy(&attr, SCHED_FIFO)
            var param = sched_param(sched_priority: priority)
            pthread_attr_setschedparam(&attr, &param)
        }
        let box = Unmanaged.passRetained(BodyBox(body))
        var thread = pthread_t()
        let rc = pthread_create(&thread, &attr, { raw in
            Unmanaged<BodyBox>.fromOpaque(raw!).takeRetainedValue().body()
            return nil
        }, box.toOpaque())
        guard rc == 0 else {
            box.release()
            return .failure(SystemError("pthread_create", Errno(rawValue: rc)))
        }
        return .success(thread)
    }
}

private final class BodyBox: Sendable {
    let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
}

/// A worker that runs `tick` every `interval` seconds until `stop`, which wakes it at once and
/// waits for it: the shape of the statistics log, the service watchdog and the local-mode pump.
public final class PeriodicWorker: Sendable {
    private let signal: StopSignal
    private let thread: WorkerThread

    /// Starts it; the first `tick` runs at once when `tickFirst`, else after one interval.
    public init(name: String, interval: Double, tickFirst: Bool = false, tick: @escaping @Sendable () -> Void) throws(SystemError) {
        let signal = try StopSignal()
        self.signal = signal
        thread = WorkerThread(name: name) {
            if tickFirst { tick() }
            while !signal.isSet {
                if signal.bell.wait(seconds: interval), signal.isSet { break }
                tick()
            }
        }
        try thread.start()
    }

    public func stop() {
        signal.set()
        thread.join()
    }
}

/// Locks pages in RAM once they are used, so that nothing the audio thread has touched is ever
/// paged out again. `MCL_ONFAULT` (Linux 4.4; 4, not in Glibc's Swift module) keeps untouched
/// mappings out: locking them all cost 127-283 MB per process, mostly ICU data and 8 MB thread
/// stacks that are never used. Returns nil on success, else the system's reason.
public func lockProcessMemory() -> String? {
    let onFault: Int32 = 4
    return mlockall(Int32(MCL_CURRENT) | Int32(MCL_FUTURE) | onFault) == 0 ? nil : SystemError.currentErrno.description
}
