import Glibc
import Posix
import Synchronization

/// Proof that the machine itself stopped, for the measurements that are repeated only when the
/// machine spoiled them: one watcher thread per core, pinned to it, SCHED_FIFO at the top
/// priority, sleeps 1 ms at a time and notes every wake-up that came `thresholdMs` (a frame) or
/// more late. Nothing on the machine can hold such a thread up that long on its own core (the
/// daemons' real-time threads run below it, the kernel's real-time throttling only past 95 % of a
/// second): a virtual machine whose core was taken away by its host can (seen on a CI machine:
/// wake-ups 5-24 ms late 40 times in 30 s while idle, and a sound server's xruns with them). Costs
/// about a percent of each core. Without real-time rights the readings prove nothing (`fifo`).
public final class MachineStalls: Sendable {
    public struct Reading: Sendable, CustomStringConvertible {
        /// Wake-ups `thresholdMs` or more late, over all cores.
        public var count: Int
        public var worstMs: Double
        /// Every watcher ran SCHED_FIFO on its own core: only then is `count` proof.
        public var fifo: Bool
        public var proves: Bool { fifo && count > 0 }
        public var description: String {
            String(format: "the machine stopped %d times for a frame or more (worst %.1f ms; %@)", count, worstMs,
                   fifo ? "real-time watchers on every core" : "watchers without real-time rights: no proof")
        }
    }

    public let thresholdMs: Double
    private final class Shared: Sendable {
        let state = Mutex<(count: Int, worstNs: Int64, fifo: Bool)>((0, 0, true))
        let stopping = Atomic<Bool>(false)
    }
    private let shared = Shared()
    private let threads: [WorkerThread]

    /// Starts watching at once.
    public init(thresholdMs: Double = 10) {
        self.thresholdMs = thresholdMs
        let cores = max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
        var threads: [WorkerThread] = []
        for core in 0..<cores {
            let thread = WorkerThread(name: "stall-watch-\(core)") { [shared] in
                let pinned = Self.pin(toCore: core)
                let threshold = Int64(thresholdMs * 1e6)
                var request = timespec(tv_sec: 0, tv_nsec: 1_000_000)
                var last = MonotonicClock.nanoseconds()
                while !shared.stopping.load(ordering: .relaxed) {
                    nanosleep(&request, nil)
                    let now = MonotonicClock.nanoseconds()
                    let late = Int64(now) - Int64(last) - 1_000_000
                    last = now
                    if late >= threshold {
                        shared.state.withLock { s in s.count += 1; s.worstNs = max(s.worstNs, late) }
                    }
                }
                if !pinned { shared.state.withLock { $0.fifo = false } }
            }
            threads.append(thread)
        }
        self.threads = threads
        for thread in threads {
            do {
                try thread.start(priority: 99)
            } catch {
                shared.state.withLock { $0.fifo = false }
            }
            if case .normal = thread.scheduling { shared.state.withLock { $0.fifo = false } }
        }
    }

    deinit { shared.stopping.store(true, ordering: .relaxed) }

    /// Stops the watchers and says what they saw.
    public func stop() -> Reading {
        shared.stopping.store(true, ordering: .relaxed)
        for thread in threads { thread.join() }
        return shared.state.withLock { Reading(count: $0.count, worstMs: Double($0.worstNs) / 1e6, fifo: $0.fifo) }
    }

    /// The calling thread onto one core. Swift's Glibc module leaves out the GNU-only
    /// `sched_setaffinity` and its CPU_SET macros: the function is looked up by name, and the set's
    /// first 64 bits are cores 0-63.
    static func pin(toCore core: Int) -> Bool {
        typealias SetAffinity = @convention(c) (pid_t, Int, UnsafeRawPointer) -> Int32
        guard core < 64, let symbol = dlsym(nil, "sched_setaffinity") else { return false }
        var set = cpu_set_t()
        withUnsafeMutableBytes(of: &set) { $0.storeBytes(of: UInt64(1) << UInt64(core), as: UInt64.self) }
        return withUnsafeBytes(of: &set) { bytes in
            unsafeBitCast(symbol, to: SetAffinity.self)(0, MemoryLayout<cpu_set_t>.size, bytes.baseAddress!) == 0
        }
    }
}
