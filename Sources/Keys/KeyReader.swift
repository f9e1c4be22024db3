import Dispatch
import Foundation
import Posix
import Synchronization

/// How the key reader finds and treats its device.
public struct KeyReaderSettings: Sendable {
    /// A /dev/input/event* device (or a FIFO carrying the same records).
    public var path: String
    public var map: KeyMap
    /// A second press of the same key sooner than this is contact bounce.
    public var debounce: Duration
    /// A key with a long action held this long fires it (`KeyMap.long`).
    public var longPress: Duration
    /// Back-off between attempts to reopen a lost device: doubles from the first to the maximum.
    public var reopenFirstDelay: Double
    public var reopenMaxDelay: Double
    /// How often an open device's path is checked (removed or replaced: reopen).
    public var pathCheckInterval: Double

    public init(path: String, map: KeyMap, debounce: Duration = KeyTiming.debounce, longPress: Duration = KeyTiming.longPress,
                reopenFirstDelay: Double = 0.1, reopenMaxDelay: Double = 5, pathCheckInterval: Double = 1) {
        self.path = path
        self.map = map
        self.debounce = debounce
        self.longPress = longPress
        self.reopenFirstDelay = reopenFirstDelay
        self.reopenMaxDelay = reopenMaxDelay
        self.pathCheckInterval = pathCheckInterval
    }
}

/// One accepted key press.
public struct KeyPress: Sendable, Equatable {
    /// Nil: a short press of a key that has only a long action (it did nothing).
    public var action: KeyAction?
    public var code: UInt16
    /// A long press (the key's `KeyMap.long` action).
    public var long: Bool
    /// The kernel's time stamp of the press (seconds since 1970 unless the device clock was
    /// changed); for a key with a long action, when the reader decided (monotonic seconds).
    public var time: Double

    public init(action: KeyAction?, code: UInt16, long: Bool = false, time: Double) {
        self.action = action
        self.code = code
        self.long = long
        self.time = time
    }
}

/// What the daemon may want to log.
public enum KeyReaderEvent: Sendable, Equatable {
    case opened(path: String)
    /// The device went away (unplugged, FIFO closed or removed); it is reopened with back-off.
    case lost(path: String, reason: String)
    /// Reported once per distinct reason, not at every retry.
    case openFailed(path: String, reason: String, retryIn: Double)
    /// A key without an action was pressed (helps find a key's code when configuring).
    case unknownKey(code: UInt16)
}

public struct KeyReaderStats: Sendable, Equatable {
    /// Actions delivered, long presses included.
    public var actions = 0
    public var longPresses = 0
    public var releases = 0
    public var autorepeats = 0
    public var bounces = 0
    public var unknownKeys = 0
    /// Non-key events: EV_SYN, EV_MSC and the like.
    public var otherEvents = 0
    public var opens = 0
    public var losses = 0
    public var openFailures = 0
    public init() {}
}

/// Reads key presses from an evdev device on its own thread and delivers the mapped actions.
/// Lost devices are reopened with back-off. `stop()` (or releasing the reader) ends the thread;
/// not from inside the callbacks, which run on that thread (it would wait for itself).
public final class KeyReader: Sendable {
    private let stopping: StopSignal
    private let shared: Shared
    private let thread: WorkerThread
    private let stopped = Mutex(false)

    final class Shared: Sendable {
        let stats = Mutex(KeyReaderStats())
    }

    /// Starts the reader thread. `onPress` and `onEvent` run on that thread: keep them short.
    public init(settings: KeyReaderSettings,
                onPress: @escaping @Sendable (KeyPress) -> Void,
                onEvent: @escaping @Sendable (KeyReaderEvent) -> Void = { _ in }) throws {
        do { stopping = try StopSignal() } catch { throw KeyReaderError(path: settings.path, problem: error.description) }
        shared = Shared()
        let (stopping, shared) = (stopping, shared)
        thread = WorkerThread(name: "intercom-keys") {
            var loop = KeyReaderLoop(settings: settings, wakeFD: stopping.bell.descriptor, shared: shared,
                                     onPress: onPress, onEvent: onEvent)
            loop.run()
        }
        do { try thread.start() } catch { throw KeyReaderError(path: settings.path, problem: error.description) }
    }

    public var stats: KeyReaderStats { shared.stats.withLock { $0 } }

    /// Ends the thread and waits for it; safe to call more than once.
    public func stop() {
        let first = stopped.withLock { s in
            defer { s = true }
            return !s
        }
        guard first else { return }
        stopping.set()
        thread.join()
    }

    deinit { stop() }
}

/// The reader could not start.
public struct KeyReaderError: Error, Sendable, CustomStringConvertible {
    public let path: String
    public let problem: String
    public var description: String { "key device \(path): \(problem)" }
}
