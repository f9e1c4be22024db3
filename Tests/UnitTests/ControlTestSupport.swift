import Calls
@testable import Control
import Foundation
import Synchronization
import XCTest

/// A handler with a small fixed directory that records what it was asked.
final class FakeControlHandler: ControlHandler {
    struct Seen: Sendable {
        var commands: [ControlCommand] = []
        var clients: [ControlClientInfo] = []
        var connected: [ControlClientInfo] = []
        var disconnected: [(ControlClientInfo, String)] = []
    }

    let seen = Mutex(Seen())
    static let here = RoomID("empfang")!
    static let kitchen = RoomID("kueche")!
    static let office = RoomID("buero")!
    static let forbidden = RoomID("serverraum")!
    static let buttons: [String: [RoomID]] = ["Kueche": [kitchen], "Alle": [kitchen, office]]
    static let placedCall = CallID(0xC0FFEE)
    static let history: [HistoryEntry] = (1...5).map(historyEntry)

    private static func historyEntry(_ i: Int) -> HistoryEntry {
        let declined = i == 3
        let incoming = i % 2 == 0
        let started = 1_700_000_000 + Double(i * 60)
        let status: ParticipantStatus = declined ? .declined(.doNotDisturb) : .connected
        return HistoryEntry(callID: CallID(UInt64(i)), direction: incoming ? .incoming : .outgoing,
                            caller: incoming ? kitchen : here, participants: [Participant(room: kitchen, status: status)],
                            outcome: declined ? .declined : .finished, reason: declined ? .doNotDisturb : nil,
                            started: started, ended: started + 30)
    }
    private let state = Mutex((mute: MuteState(), dnd: false, inCall: false))

    func handle(_ command: ControlCommand, from client: ControlClientInfo) -> Result<ControlReply, ControlFailure> {
        seen.withLock {
            $0.commands.append(command)
            $0.clients.append(client)
        }
        return state.withLock { s in
            switch command {
            case .perform(.call(let button)):
                guard let rooms = Self.buttons[button] else { return .failure(.init(.invalidArgument, "no button \(button)")) }
                s.inCall = true
                return .success(.callPlaced(Self.placedCall, to: rooms))
            case .perform(.callRooms(let rooms, _)):
                if rooms.contains(Self.forbidden) { return .failure(.init(.notPermitted, "empfang may not call serverraum")) }
                if s.inCall { return .failure(.init(.busy, "already in a call")) }
                s.inCall = true
                return .success(.callPlaced(Self.placedCall, to: rooms))
            case .perform(.hangUp):
                guard s.inCall else { return .failure(.init(.notInCall, "no call to end")) }
                s.inCall = false
                return .success(.done)
            case .perform(.setMicrophoneMuted(let on)):
                s.mute.microphone = on
                return .success(.mute(s.mute))
            case .perform(.setSpeakerMuted(let on)):
                s.mute.speaker = on
                return .success(.mute(s.mute))
            case .perform(.setDoNotDisturb(let on)):
                s.dnd = on
                return .success(.doNotDisturb(on))
            case .status:
                let call = s.inCall ? ActiveCall(callID: Self.placedCall, direction: .outgoing, caller: Self.here,
                                                 participants: [Participant(room: Self.kitchen, status: .connected),
                                                                Participant(room: Self.office, status: .declined(.busy))],
                                                 connected: true) : nil
                return .success(.status(ControlStatus(room: Self.here, name: "Empfang", doNotDisturb: s.dnd, mute: s.mute, call: call)))
            case .rooms:
                return .success(.rooms(RoomDirectory(
                    rooms: [.init(id: Self.kitchen, name: "Küche", presence: Presence(online: true, inCall: true)),
                            .init(id: Self.office, name: "Büro", presence: Presence(online: false))],
                    buttons: Self.buttons.keys.sorted().map { .init(name: $0, rooms: Self.buttons[$0]!) })))
            case .history(let limit):
                return .success(.history(Array(Self.history.suffix(limit ?? Self.history.count)), notifications: []))
            case .loopback, .loopbackResult, .networkLoopback, .networkLoopbackResult, .statistics:
                return .failure(.init(.unavailable, "no audio in this fake"))
            case .perform, .eraseHistory, .site:
                return .failure(.init(.unavailable, "no calls in this fake"))
            }
        }
    }

    func clientConnected(_ client: ControlClientInfo) { seen.withLock { $0.connected.append(client) } }
    func clientDisconnected(_ client: ControlClientInfo, reason: String) { seen.withLock { $0.disconnected.append((client, reason)) } }
}

/// A private directory for sockets (short: a socket path has at most 107 bytes).
final class SocketDirectory: Sendable {
    let path: String
    init() throws {
        path = "/tmp/ctl-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
    }
    func socket(_ name: String = "control.sock") -> String { path + "/" + name }
    deinit { try? FileManager.default.removeItem(atPath: path) }
}

enum ControlTestTools {
    /// Resident memory of this process (/proc/self/statm, second field, in pages).
    static func residentBytes() -> Int {
        let text = (try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8)) ?? ""
        let fields = text.split(separator: " ")
        return (fields.count > 1 ? Int(fields[1]) ?? 0 : 0) * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    /// Polls `condition` until it holds or `timeout` passes.
    static func wait(timeout: Double, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if condition() { return true }
            usleep(2_000)
        }
        return condition()
    }

    static func event(_ line: String?) throws -> ControlEvent {
        guard let line else { throw ControlClientError.closed(path: "test", reason: "connection closed") }
        return try Wire.decode(ControlEvent.self, from: Array(line.utf8))
    }

    static func parse(_ line: String?) throws -> JSONValue {
        guard let line else { throw ControlClientError.closed(path: "test", reason: "connection closed") }
        return try JSONValue.parse(Array(line.utf8))
    }

    /// Reads lines until the connection ends (EOF or reset); how many lines came.
    static func drainUntilClosed(_ client: ControlClient, timeout: Double) -> (lines: [String], closed: Bool) {
        var lines: [String] = []
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            do {
                guard let line = try client.readLine(timeout: deadline.timeIntervalSinceNow) else { return (lines, true) }
                lines.append(line)
            } catch ControlClientError.closed {
                return (lines, true)
            } catch {
                return (lines, false)
            }
        }
        return (lines, false)
    }
}

/// A started server with the fake handler in a private directory, stopped by `stop`.
final class ServerFixture: Sendable {
    let directory: SocketDirectory
    let handler = FakeControlHandler()
    let server: ControlServer
    var settings: ControlSettings { server.settings }

    init(_ configure: (inout ControlSettings) -> Void = { _ in }) throws {
        directory = try SocketDirectory()
        var settings = ControlSettings(socketPath: directory.socket())
        configure(&settings)
        server = try ControlServer(settings: settings, handler: handler)
        try server.start()
    }

    func client(timeout: Double = 5) throws -> ControlClient { try ControlClient(path: server.settings.socketPath, timeout: timeout) }
    func stop() { server.stop() }
}
