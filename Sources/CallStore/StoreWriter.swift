import Posix
import Synchronization

/// A store whose changes are made in memory first and written by `persist`.
public protocol PersistentStore: AnyObject, Sendable {
    var path: String { get }
    /// Writes the newest state unless it is on disk already.
    func persist() throws(StoreError)
}

extension HistoryStore: PersistentStore {}
extension StateStore: PersistentStore {}

/// Writes stores on a thread of its own, so that whoever changed them (the call engine's lock
/// holders: signalling, control clients, keys) never waits for a slow disk. Requests for one
/// store coalesce: it is written once with its newest state. `stop` writes what is pending.
public final class StoreWriter: Sendable {
    private final class Shared: Sendable {
        let pending = Mutex<[ObjectIdentifier: any PersistentStore]>([:])
        /// Writes done and failed since start.
        let counts = Mutex<(written: Int, failed: Int)>((0, 0))
    }
    private let shared = Shared()
    private let signal: StopSignal
    private let thread: WorkerThread

    /// `failed` runs on the writer's thread for each write that did not succeed; the change stays
    /// in memory and is written with the next request for that store.
    public init(failed: @escaping @Sendable (StoreError) -> Void) throws(SystemError) {
        let signal = try StopSignal()
        let shared = shared
        self.signal = signal
        thread = WorkerThread(name: "intercom-store") {
            while true {
                let stopping = signal.isSet
                let stores = shared.pending.withLock { p in defer { p.removeAll() }; return Array(p.values) }
                for store in stores {
                    do throws(StoreError) {
                        try store.persist()
                        shared.counts.withLock { $0.written += 1 }
                    } catch {
                        shared.counts.withLock { $0.failed += 1 }
                        failed(error)
                    }
                }
                if stopping { return }
                if stores.isEmpty { signal.bell.wait(seconds: nil) }
            }
        }
        try thread.start()
    }

    /// Asks for `store` to be written soon; returns at once.
    public func persist(_ store: any PersistentStore) {
        shared.pending.withLock { $0[ObjectIdentifier(store)] = store }
        signal.bell.ring()
    }

    public var statistics: (written: Int, failed: Int) { shared.counts.withLock { $0 } }

    /// Writes everything asked for so far, then ends the thread.
    public func stop() {
        signal.set()
        thread.join()
    }
}
