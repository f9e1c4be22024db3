import Synchronization

/// A part of a program with a thread of its own (or several): started once, then stopped once.
/// `stop` wakes every loop of the part at once (each waits in a `Poller` that holds its
/// `StopSignal`'s bell) and returns when they have ended. Stopping a part that never started
/// releases what its init took and nothing more; stopping twice does nothing. The daemon starts
/// and stops its parts from one ordered `ServiceList`.
public protocol Service: AnyObject, Sendable {
    /// For the log of starts and stops.
    var serviceName: String { get }
    func start() throws(SystemError)
    func stop()
}

/// A program's parts, started in the order given and stopped in the reverse order, so that a part
/// stops before the parts it uses (the control socket before the calls it drives, the calls
/// before the network that carries their goodbye).
public struct ServiceList {
    public struct StartFailure: Error, CustomStringConvertible {
        public let part: String
        public let error: SystemError
        public var description: String { "\(part): \(error)" }
    }

    private var parts: [any Service] = []

    public init() {}

    /// The names of the parts given so far, in start order.
    public var names: [String] { parts.map(\.serviceName) }

    /// Starts each part in order, after those given before. When one fails the rest are not
    /// started, and the failure names the part; `stopAll` still stops every part given, started or
    /// not, since a stop also releases what a part took when it was made (the control socket's file).
    public mutating func start(_ more: [any Service]) throws(StartFailure) {
        parts += more
        for part in more {
            do {
                try part.start()
            } catch {
                throw StartFailure(part: part.serviceName, error: error)
            }
        }
    }

    /// Stops every part given, the last first; `stopped` gets each part's name and how long its
    /// stop took (seconds).
    public mutating func stopAll(_ stopped: (String, Double) -> Void = { _, _ in }) {
        while let part = parts.popLast() {
            let begun = MonotonicClock.seconds()
            part.stop()
            stopped(part.serviceName, MonotonicClock.seconds() - begun)
        }
    }
}

/// How a loop is told to stop: a flag it looks at, and a bell among the descriptors it waits for,
/// so that the stop wakes it at once. Setting it is one atomic store and one non-blocking write:
/// safe from any thread, the audio thread's included.
public final class StopSignal: Sendable {
    private let flag = Atomic<Bool>(false)
    public let bell: Doorbell

    public init() throws(SystemError) { bell = try Doorbell() }

    public var isSet: Bool { flag.load(ordering: .acquiring) }

    public func set() {
        flag.store(true, ordering: .releasing)
        bell.ring()
    }

    /// Ready for another run (the audio supervisor's next session): the flag cleared, the bell drained.
    public func clear() {
        flag.store(false, ordering: .releasing)
        bell.drain()
    }

    /// Sleeps until the signal is set or `seconds` pass (nil: forever); returns `isSet`. The
    /// sleep of a loop that has no descriptors of its own. The bell is left rung, so that every
    /// later sleep and wait of the stopping loop returns at once.
    @discardableResult
    public func sleep(seconds: Double?) -> Bool {
        if !isSet { _ = Poller.waitReadable(bell.descriptor, timeoutMs: Poller.milliseconds(seconds)) }
        return isSet
    }
}
