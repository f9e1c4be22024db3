import Posix
import Foundation

/// The reader thread's state; lives only on that thread.
struct KeyReaderLoop {
    let settings: KeyReaderSettings
    let wakeFD: Int32
    let shared: KeyReader.Shared
    let onPress: @Sendable (KeyPress) -> Void
    let onEvent: @Sendable (KeyReaderEvent) -> Void

    private var source: InputSource?
    private var decoder = InputEventDecoder()
    private var filter: KeyFilter
    private var backoff: Double
    private var nextOpen = 0.0
    private var nextPathCheck = 0.0
    private var lastOpenFailure: String?
    private var gotData = false

    init(settings: KeyReaderSettings, wakeFD: Int32, shared: KeyReader.Shared,
         onPress: @escaping @Sendable (KeyPress) -> Void, onEvent: @escaping @Sendable (KeyReaderEvent) -> Void) {
        self.settings = settings
        self.wakeFD = wakeFD
        self.shared = shared
        self.onPress = onPress
        self.onEvent = onEvent
        filter = KeyFilter(map: settings.map, debounce: settings.debounce, longPress: settings.longPress)
        backoff = settings.reopenFirstDelay
    }

    mutating func run() {
        // Whole records per read: evdev refuses buffers that are not a multiple of the record size.
        var buffer = [UInt8](repeating: 0, count: InputEvent.size * 64)
        defer { source?.close() }
        var poller = Poller(capacity: 2)
        while true {
            var now = MonotonicClock.seconds()
            if source == nil, now >= nextOpen { open(now: now) }
            var deadline = source == nil ? nextOpen : nextPathCheck
            if let held = filter.nextDeadline { deadline = min(deadline, Double(held) / 1e6) }
            poller.reset()
            let wake = poller.add(wakeFD, read: true)
            let device = source.map { poller.add($0.fd, read: true) }
            _ = try? poller.wait(seconds: deadline - now)  // a failed wait is a wake-up with nothing ready
            if poller.events(at: wake).any { return }
            if let device, poller.events(at: device).any { drain(&buffer) }
            now = MonotonicClock.seconds()
            for d in filter.due(now: Int64(now * 1e6)) {
                shared.stats.withLock { s in
                    s.actions += d.action == nil ? 0 : 1
                    s.longPresses += d.long ? 1 : 0
                }
                onPress(KeyPress(action: d.action, code: d.code, long: d.long, time: now))
            }
            if let s = source, now >= nextPathCheck {
                nextPathCheck = now + settings.pathCheckInterval
                let current = FileIdentity.of(path: settings.path)
                if current == nil {
                    lose("path removed", now: now)
                } else if current != s.identity {
                    lose("path now names another file", now: now)
                }
            }
        }
    }

    private mutating func open(now: Double) {
        switch InputSource.open(path: settings.path) {
        case .success(let s):
            source = s
            decoder.reset()
            gotData = false
            lastOpenFailure = nil
            nextPathCheck = now + settings.pathCheckInterval
            shared.stats.withLock { $0.opens += 1 }
            onEvent(.opened(path: settings.path))
        case .failure(let failure):
            shared.stats.withLock { $0.openFailures += 1 }
            if failure.description != lastOpenFailure {
                lastOpenFailure = failure.description
                onEvent(.openFailed(path: settings.path, reason: failure.description, retryIn: backoff))
            }
            nextOpen = now + backoff
            backoff = min(backoff * 2, settings.reopenMaxDelay)
        }
    }

    private mutating func drain(_ buffer: inout [UInt8]) {
        guard let s = source else { return }
        while true {
            let result = buffer.withUnsafeMutableBytes { s.read(into: $0) }
            switch result {
            case .bytes(let n):
                gotData = true
                backoff = settings.reopenFirstDelay
                var events: [InputEvent] = []
                buffer.withUnsafeBytes { raw in
                    decoder.feed(UnsafeRawBufferPointer(rebasing: raw[0..<n])) { events.append($0) }
                }
                let arrival = Int64(MonotonicClock.seconds() * 1e6)
                for event in events { handle(event, arrival: arrival) }
            case .wouldBlock:
                return
            case .endOfFile:
                lose("end of file", now: MonotonicClock.seconds())
                return
            case .failed(let failure):
                lose(failure.description, now: MonotonicClock.seconds())
                return
            }
        }
    }

    private mutating func handle(_ event: InputEvent, arrival: Int64) {
        let outcome = filter.handle(event, arrivalMicroseconds: arrival)
        shared.stats.withLock { s in
            switch outcome {
            case .action: s.actions += 1
            case .held: break
            case .notAKey: s.otherEvents += 1
            case .release: s.releases += 1
            case .autorepeat: s.autorepeats += 1
            case .bounce: s.bounces += 1
            case .unknown: s.unknownKeys += 1
            }
        }
        switch outcome {
        case .action(let action):
            onPress(KeyPress(action: action, code: event.code, time: Double(event.timeMicroseconds) / 1e6))
        case .unknown(let code):
            onEvent(.unknownKey(code: code))
        default:
            break
        }
    }

    /// Closes the source. A source that delivered data is retried at once (a FIFO whose writer
    /// left, a device replugged quickly); one that did not backs off, so a path that opens but
    /// yields nothing cannot spin.
    private mutating func lose(_ reason: String, now: Double) {
        source?.close()
        source = nil
        decoder.reset()
        filter.reset()
        shared.stats.withLock { $0.losses += 1 }
        onEvent(.lost(path: settings.path, reason: reason))
        if gotData {
            nextOpen = now
        } else {
            nextOpen = now + backoff
            backoff = min(backoff * 2, settings.reopenMaxDelay)
        }
    }
}
