import Calls
import Control
import Foundation
import TestSupport
import XCTest

/// Rooms with calls on: one intercomd per rig room, each with its own control socket, history and
/// state files. By default all on this host (127.0.0.1), each with its own signalling and media
/// ports; with a `NetLab`, each on its own address with the default ports, as installed.
final class CallRooms {
    struct Room {
        let id: String
        let rig: String
        let address: String
        let signalling: Int
        let media: Int
        let socket: String
    }

    let dir: String
    let rooms: [Room]
    private(set) var daemons: [String: DaemonProcess] = [:]

    /// `names`: rig rooms ("roomA"...); their ids are the lowercase names.
    let ringMs: Int
    let lab: NetLab?
    /// False: the terminals have no sound card (their device names are not the rig's); they run
    /// calls and signalling while the audio supervisor keeps retrying, as a terminal with its
    /// USB card unplugged does. For tests about signalling at a site's size.
    let soundCards: Bool
    /// Each daemon's `log.stats_interval_s` (1: a line a second for the tests to read).
    let statsIntervalS: Int

    /// `sharing`: rooms whose terminal stands in another rig room (id → rig room), e.g. two
    /// terminals in one room for the howling test.
    init(_ names: [String], ringMs: Int = 500, lab: NetLab? = nil, sharing: [String: String] = [:], soundCards: Bool = true,
         statsIntervalS: Int = 1) throws {
        self.ringMs = ringMs
        self.lab = lab
        self.soundCards = soundCards
        self.statsIntervalS = statsIntervalS
        dir = try Repo.scratchFolder("calls")
        rooms = try names.map { name in
            let socket = "\(try Repo.scratchFolder("calls-sock"))/\(name).sock"
            let rig = sharing[name.lowercased()] ?? name
            if let lab {
                return Room(id: name.lowercased(), rig: rig, address: lab.host(name).address, signalling: 5070, media: 5004, socket: socket)
            }
            return Room(id: name.lowercased(), rig: rig, address: "127.0.0.1", signalling: try FreePort.udp(),
                        media: try FreePort.udp(), socket: socket)
        }
    }

    func room(_ id: String) -> Room { rooms.first { $0.id == id }! }

    /// Starts a room's daemon; `calls` is added to its `[calls]` section, `extra` appended to its configuration.
    /// `signallingVia` points this room's directory entry for another room at a different local
    /// signalling port (an impairment relay in front of that room). `mediaBind`: the loopback
    /// address its media socket binds (its directory address stays 127.0.0.1, where a relay then
    /// stands in for it).
    @discardableResult
    func start(_ id: String, calls: String = "", extra: String = "", signallingVia: [String: Int] = [:], mediaBind: String? = nil,
               environment: [String: String] = [:]) throws -> DaemonProcess {
        let me = room(id)
        let directory = rooms.map { r in
            "[rooms.\(r.id)]\nname = \"\(r.rig.lowercased() == r.id ? r.rig : r.id)\"\naddress = \"\(r.address)\"\nsignalling_port = \(signallingVia[r.id] ?? r.signalling)\nmedia_port = \(r.media)"
        }.joined(separator: "\n")
        let others = rooms.filter { $0.id != id }.map(\.id)
        let buttons = others.map { "[buttons.\($0)]\nrooms = [\"\($0)\"]" }.joined(separator: "\n")
            + "\n[buttons.all]\nrooms = [\(others.map { "\"\($0)\"" }.joined(separator: ", "))]"
        // `extra` right after the [control] section ownSettings ends with: its first lines may be
        // keys of that section.
        let config = try DaemonProcess.writeRoomConfig(me.rig, extra: ownSettings(id, calls: "ring_ms = \(ringMs)\n\(calls)", mediaBind: mediaBind)
                                                           + "\n\(extra)\n\(directory)\n\(buttons)")
        return try start(id, configPath: config, environment: environment)
    }

    /// What a room's file holds of its own: its media port, statistics every second, its room, its
    /// history, state and socket; `calls` more lines of its `[calls]` section. It ends in `[control]`.
    func ownSettings(_ id: String, calls: String = "", mediaBind: String? = nil) -> String {
        let me = room(id)
        return """
            [network]
            listen_port = \(me.media)
            \(mediaBind.map { "bind_address = \"\($0)\"" } ?? "")
            [log]
            stats_interval_s = \(statsIntervalS)
            [room]
            id = "\(id)"
            [calls]
            \(calls)
            history_path = "\(dir)/\(id)-history.json"
            state_path = "\(dir)/\(id)-state.json"
            [control]
            socket = "\(me.socket)"
            """
    }

    /// Starts a room's daemon with the configuration file at `configPath`.
    @discardableResult
    func start(_ id: String, configPath: String, environment: [String: String] = [:]) throws -> DaemonProcess {
        let d = try DaemonProcess(arguments: ["--config", configPath], environment: environment, name: "intercomd-\(id)",
                                  host: lab?.host(room(id).rig))
        daemons[id] = d
        if soundCards {
            XCTAssertTrue(d.waitUntilRunning(timeout: 10), "\(id) answers stats on its control socket with its audio running: \(d.log)")
        } else {
            XCTAssertNotNil(d.waitForStatistics(timeout: 10) { _ in true }, "\(id) answers stats on its control socket: \(d.log)")
        }
        return d
    }

    func stop(_ id: String) -> Int32? {
        let code = daemons[id]?.terminate()
        daemons[id] = nil
        return code
    }

    func stopAll() { for id in Array(daemons.keys) { _ = stop(id) } }

    /// Runs a control command in a room.
    func control(_ id: String, _ command: ControlCommand) throws -> Result<ControlReply, ControlFailure> {
        let client = try ControlClient(path: room(id).socket, timeout: 5)
        defer { client.close() }
        return try client.run(command)
    }

    func status(_ id: String) -> ControlStatus? {
        guard case .success(.status(let s))? = try? control(id, .status) else { return nil }
        return s
    }

    func history(_ id: String) -> [HistoryEntry] {
        guard case .success(.history(let h, _))? = try? control(id, .history(limit: nil)) else { return [] }
        return h
    }

    /// The room's notifications, sent and received, oldest first.
    func notifications(_ id: String) -> [NotificationRecord] {
        guard case .success(.history(_, let n))? = try? control(id, .history(limit: nil)) else { return [] }
        return n
    }

    /// Waits until `condition` holds (polling every 50 ms); false on timeout.
    func wait(_ timeout: Double, _ condition: () -> Bool) -> Bool { waitUntil(timeout, condition) }

    /// Waits until `id` sees every room in `others` online.
    func waitOnline(_ id: String, _ others: [String], timeout: Double = 6) -> Bool {
        wait(timeout) {
            guard case .success(.rooms(let d))? = try? control(id, .rooms) else { return false }
            return others.allSatisfy { o in d.rooms.first { $0.id.value == o }?.presence.online == true }
        }
    }

    /// `id`'s buffer delay of its first stream once it has settled: read every half second until
    /// two readings a second apart are within 2 ms (at most `timeout`, then the last reading).
    /// A stall of the machine at a call's start grows the buffer, which then shrinks over seconds
    /// (a CI run read 60.6 ms 2 s after connecting, 29.4 ms 10 s later).
    func settledDelayMs(_ id: String, timeout: Double = 12) -> Double {
        func read() -> Double { (try? daemons[id]?.statistics().network?.streams.first?.delayMs) ?? .nan }
        var readings = [read()]
        let end = Date().addingTimeInterval(timeout)
        while Date() < end {
            Thread.sleep(forTimeInterval: 0.5)
            readings.append(read())
            if readings.count >= 3, abs(readings[readings.count - 1] - readings[readings.count - 3]) < 2 { break }
        }
        return readings.last ?? .nan
    }

    /// What the rig did to each room's streams so far (typed stats): reads the sound server held
    /// up, packets the sender's held back, frames the jitter buffer dropped and inserted.
    func streamHealth() -> String {
        daemons.keys.sorted().map { id in
            guard let s = try? daemons[id]?.statistics() else { return "\(id): no stats" }
            let streams = s.network?.streams ?? []
            let sum = { (f: (DaemonStatistics.Stream) -> Int) in streams.map(f).reduce(0, +) }
            return "\(id): xruns \(s.audio.xruns), \(streams.count) streams: reads held up \(sum(\.readerHeldUp)), "
                + "held back \(sum(\.arrivalStalls)), dropped \(sum(\.dropped)), inserted \(sum(\.inserted))"
        }.joined(separator: "; ")
    }

    func isConnected(_ id: String) -> Bool { status(id)?.call?.connected == true }
    /// `id` has played more than 50 frames of `other`'s stream (rooms on this host).
    func plays(_ id: String, from other: String) -> Bool {
        let source = "127.0.0.1:\(room(other).media)"
        return status(id)?.media.contains { $0.source == source && $0.played > 50 } == true
    }
    func isIdle(_ id: String) -> Bool { status(id).map { $0.call == nil } ?? false }

    func participant(_ status: ControlStatus?, _ room: String) -> ParticipantStatus? {
        status?.call?.participants.first { $0.room.value == room }?.status
    }

    deinit { stopAll() }
}
