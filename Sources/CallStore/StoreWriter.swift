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
///
/// Requests are numbered: `requested` is the newest one's number, `completed` the newest whose
/// write has been tried, so that an ack can wait for the write of what it acknowledges.
public final class StoreWriter: Sendable {
    private final class Shared: Sendable {
        let pending = Mutex<(stores: [ObjectIdentifier: any PersistentStore], requested: UInt64)>(([:], 0))
        let completed = Atomic<UInt64>(0)
        /// Writes done and failed since start.
        let counts = Mutex<(written: Int, failed: Int)>((0, 0))
    }
    private let shared = Shared()
    private let signal: StopSignal
    private let thread: WorkerThread

    /// `failed` runs on the writer's thread for each write that did not succeed; the change stays
    /// in memory and is written with the next request for that store. `tried` runs there after
    /// each round of writes, once `completed` has moved (a failed write counts as tried: it is
    /// logged and counted, and holding acks for it would only make senders repeat themselves).
    public init(failed: @escaping @Sendable (StoreError) -> Void,
                tried: @escaping @Sendable () -> Void = {}) throws(SystemError) {
        let signal = try StopSignal()
        let shared = shared
        self.signal = signal
        thread = WorkerThread(name: "intercom-store") {
            while true {
                let stopping = signal.isSet
                let (stores, upTo) = shared.pending.withLock { p in
                    defer { p.stores.removeAll() }
                    return (Array(p.stores.values), p.requested)
                }
                for store in stores {
                    do throws(StoreError) {
                        try store.persist()
                        shared.counts.withLock { $0.written += 1 }
                    } catch {
                        shared.counts.withLock { $0.failed += 1 }
                        failed(error)
                    }
                }
                if upTo != shared.completed.load(ordering: .acquiring) {
                    shared.completed.store(upTo, ordering: .releasing)
                    tried()
                }
                if stopping { return }
                if stores.isEmpty { signal.bell.wait(seconds: nil) }
            }
        }
        try thread.start()
    }

    /// Asks for `store` to be written soon; returns at once.
    public func persist(_ store: any PersistentStore) {
        shared.pending.withLock {
            $0.stores[ObjectIdentifier(store)] = store
            $0.requested += 1
        }
        signal.bell.ring()
    }

    /// The newest request's number (0: none yet).
    public var requested: UInt64 { shared.pending.withLock { $0.requested } }
    /// The newest request whose write has been tried: everything asked for up to it is on disk
    /// or has failed (counted in `statistics`).
    public var completed: UInt64 { shared.completed.load(ordering: .acquiring) }

    public var statistics: (written: Int, failed: Int) { shared.counts.withLock { $0 } }

    /// Writes everything asked for so far, then ends the thread.
    public func stop() {
        signal.set()
        thread.join()
    }
}
