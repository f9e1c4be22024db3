import Calls
import Control
import Foundation
import SiteAdmin
import Synchronization

/// The site service's member of the site's signalling: a terminal's daemon, reached over its
/// control socket (the terminal on the service's own box, or an intercomd of its own on a
/// server; docs/site-service.md). Through it the service sends notifications and sees presence,
/// calls and history: signalling, sealing, delivery and reminders stay the daemon's, in one place.
public final class SiteMember: Sendable {
    public let socket: String
    public let events: EventLog
    /// Seconds a command may take before the request is answered 503.
    public static let timeout = 2.0
    /// Seconds between attempts to reach a member that is away.
    public static let retry = 1.0
    private let stopping = Atomic<Bool>(false)
    /// Whether the events are followed now: a change is said once in the event stream.
    private let connected = Atomic<Bool>(false)

    public init(socket: String, events: EventLog = EventLog()) {
        self.socket = socket
        self.events = events
    }

    /// Runs `command` at the member: a connection of its own on a Dispatch thread, so that a
    /// slow daemon holds up this request only, never the server's event loops.
    /// Its refusal is a problem naming `field`.
    public func run(_ command: ControlCommand, field: String? = nil) async throws -> ControlReply {
        let socket = socket
        let answer: Result<Result<ControlReply, ControlFailure>, ControlClientError> = await onDispatchThread {
            Result { () throws(ControlClientError) in
                let client = try ControlClient(path: socket, timeout: Self.timeout)
                defer { client.close() }
                return try client.run(command)
            }
        }
        switch answer {
        case .failure(let error):
            throw Problem(.serviceUnavailable, "member-unreachable", "The service's terminal does not answer", detail: error.description)
        case .success(.failure(let refusal)): throw Problem(refusal, field: field)
        case .success(.success(let reply)): return reply
        }
    }

    /// Follows the member's events into `events` on a thread of its own until `stop`; when the
    /// daemon is away, tries again every `retry` seconds; the event stream says when it went and came.
    public func follow() {
        let thread = Thread { [self] in
            while !stopping.load(ordering: .relaxed) {
                do {
                    let client = try ControlClient(path: socket, timeout: Self.timeout)
                    defer { client.close() }
                    guard case .success(.subscribed) = try client.send(.subscribe).response.outcome else {
                        throw ControlClientError.protocolViolation("subscribe was not answered subscribed")
                    }
                    changed(connected: true, detail: nil)
                    while !stopping.load(ordering: .relaxed) {
                        do {
                            guard let event = try client.readEvent(timeout: Self.retry) else {
                                throw ControlClientError.closed(path: socket, reason: nil)
                            }
                            events.append(.terminal(event))
                        } catch ControlClientError.timedOut {
                            continue
                        }
                    }
                } catch {
                    changed(connected: false, detail: "\(error)")
                    if !stopping.load(ordering: .relaxed) { Thread.sleep(forTimeInterval: Self.retry) }
                }
            }
        }
        thread.name = "site-member"
        thread.start()
    }

    public func stop() { stopping.store(true, ordering: .relaxed) }

    private func changed(connected now: Bool, detail: String?) {
        if connected.exchange(now, ordering: .relaxed) != now { events.append(.member(connected: now, detail: detail)) }
    }
}
