import Calls
import Control
import Foundation
import Posix
import RigKit
import Synchronization

/// The practice running: one intercomd per terminal, each terminal's events as they happen
/// (typed, from its control socket), its keys, and a recorder on each room's speaker for the
/// whole run. Everything started here is stopped by `stop()`, which `deinit` calls too.
final class RunningPractice {
    let practice: Practice
    private(set) var daemons: [String: DaemonProcess] = [:]
    private var keys: [String: FIFOKeyWriter] = [:]
    private(set) var recorders: [String: RoomRecorder] = [:]
    private var streams: [String: EventStream] = [:]
    /// When the speaker recordings started (their time 0).
    private(set) var recordingStart = Date()

    init(_ practice: Practice) { self.practice = practice }

    func speakerRecording(_ id: String) -> String { "\(practice.folder)/\(practice.terminal(id).rig)-speaker.wav" }

    /// Starts the recorders and the daemons; returns once every daemon runs its audio and sees
    /// the others online, or throws naming the one that did not.
    func start() throws {
        for t in practice.terminals {
            recorders[t.id] = try RoomRecorder(room: t.rig, path: speakerRecording(t.id))
        }
        recordingStart = Date()
        for t in practice.terminals {
            daemons[t.id] = try DaemonProcess(arguments: ["--config", practice.configPath(t.id)], name: t.id,
                                              logPath: "\(practice.folder)/\(t.id).log")
        }
        for t in practice.terminals {
            guard daemons[t.id]!.waitUntilRunning(timeout: 15) else {
                throw RigError(description: "\(t.name) did not start; its log (\(practice.folder)/\(t.id).log) ends:\n"
                               + daemons[t.id]!.log.split(separator: "\n").suffix(8).joined(separator: "\n"))
            }
            streams[t.id] = try EventStream(socket: practice.socket(t.id))
            keys[t.id] = try FIFOKeyWriter(path: practice.keyDevice(t.id))
        }
        for t in practice.terminals {
            let others = practice.terminals.filter { $0.id != t.id }.map(\.id)
            guard wait(8, { self.online(t.id, others) }) else {
                throw RigError(description: "\(t.name) does not see \(others.joined(separator: ", ")) online")
            }
        }
    }

    /// Presses a key on a terminal's keyboard (through its key device, as the box gets it).
    func press(_ id: String, _ key: Practice.Key) { keys[id]!.press(key.code) }

    /// The terminal's events from now on: pass `events(id).count` to `waitFor` as `after`.
    func eventCount(_ id: String) -> Int { streams[id]!.count }

    /// Waits for an event at a terminal (seen after the first `after`); the event and when it came.
    func waitFor(_ id: String, after: Int, timeout: Double, _ match: (CallEvent) -> Bool) -> (event: CallEvent, at: Date)? {
        streams[id]!.waitFor(after: after, timeout: timeout, match)
    }

    func control(_ id: String, _ command: ControlCommand) throws -> ControlReply {
        let client = try ControlClient(path: practice.socket(id), timeout: 5)
        defer { client.close() }
        switch try client.run(command) {
        case .success(let reply): return reply
        case .failure(let f): throw RigError(description: "\(id): \(command) refused: \(f)")
        }
    }

    func status(_ id: String) -> ControlStatus? {
        guard case .status(let s)? = try? control(id, .status) else { return nil }
        return s
    }

    func history(_ id: String) -> [HistoryEntry] {
        guard case .history(let h, _)? = try? control(id, .history(limit: nil)) else { return [] }
        return h
    }

    func statistics(_ id: String) -> DaemonStatistics? { try? daemons[id]?.statistics() }

    /// Every terminal's xruns now (the machine starved an audio thread: a measurement is spoiled).
    func xruns() -> Int { practice.terminals.compactMap { statistics($0.id)?.audio.xruns }.reduce(0, +) }

    func online(_ id: String, _ others: [String]) -> Bool {
        guard case .rooms(let d)? = try? control(id, .rooms) else { return false }
        return others.allSatisfy { o in d.rooms.first { $0.id.value == o }?.presence.online == true }
    }

    func wait(_ timeout: Double, _ condition: () -> Bool) -> Bool { waitUntil(timeout, every: 0.02, condition) }

    /// Stops the daemons (each stopped by SIGTERM, waited for), the event streams and the
    /// recorders. Returns the daemons that did not exit cleanly, with how they ended.
    @discardableResult
    func stop() -> [String] {
        var unclean: [String] = []
        for s in streams.values { s.stop() }
        streams = [:]
        for (id, d) in daemons.sorted(by: { $0.key < $1.key }) {
            let running = d.isRunning
            let code = d.terminate()
            if code != 0 { unclean.append("\(id) (\(running ? "" : "had already ")\(code.map { "exited \($0)" } ?? "killed"))") }
        }
        daemons = [:]
        for r in recorders.values { r.stop() }
        recorders = [:]
        keys = [:]
        return unclean
    }

    deinit { stop() }
}

/// One terminal's event stream (`subscribe` on its control socket), read by a thread of its own
/// into a list that steps wait on.
final class EventStream: @unchecked Sendable {
    // @unchecked: the client is used by the reader thread only; the list is behind its mutex.
    private let client: ControlClient
    private let events = Mutex<[(event: CallEvent, at: Date)]>([])
    private let stopped = Atomic<Bool>(false)
    private var thread: Thread?
    private let done = DispatchSemaphore(value: 0)

    init(socket: String) throws {
        client = try ControlClient(path: socket, timeout: 5)
        _ = try client.send(.subscribe)
        let t = Thread { [self] in
            defer { done.signal() }
            while !stopped.load(ordering: .acquiring) {
                let line: String?
                do { line = try client.readLine(timeout: 0.2) } catch { usleep(50_000); continue }
                guard let line, case .call(let e)? = try? Wire.decode(ControlEvent.self, from: Array(line.utf8)) else { continue }
                events.withLock { $0.append((e, Date())) }
            }
        }
        t.name = "events"
        thread = t
        t.start()
    }

    var count: Int { events.withLock { $0.count } }

    func waitFor(after: Int, timeout: Double, _ match: (CallEvent) -> Bool) -> (event: CallEvent, at: Date)? {
        let deadline = Date().addingTimeInterval(timeout)
        repeat {
            if let found = events.withLock({ $0.dropFirst(after).first { match($0.event) } }) { return found }
            usleep(10_000)
        } while Date() < deadline
        return nil
    }

    func stop() {
        guard !stopped.exchange(true, ordering: .acquiringAndReleasing), thread != nil else { return }
        done.wait()
        client.close()
    }
}
