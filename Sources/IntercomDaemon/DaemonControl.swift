import Control
import Logging

/// What the control socket serves: on every terminal the daemon's counters (`stats`) and the
/// device round-trip test; with calls (`[room] id`), the calls and the network round-trip test,
/// which the calls side answers. The technician's commands may be reserved to a group.
final class DaemonControl: ControlHandler, @unchecked Sendable {
    // @unchecked: every property is set before the server starts and never changed.
    private let statistics: @Sendable () -> DaemonStatistics
    private let loopback: DeviceLoopback
    private let audioRunning: @Sendable () -> Bool
    private let calls: CallService?
    /// When set, only root and members of this group may run the technician's commands.
    private let technicianGroup: UInt32?
    private let log: Logger

    init(statistics: @escaping @Sendable () -> DaemonStatistics, loopback: DeviceLoopback,
         audioRunning: @escaping @Sendable () -> Bool, calls: CallService?, technicianGroup: UInt32?, logger: Logger) {
        self.statistics = statistics
        self.loopback = loopback
        self.audioRunning = audioRunning
        self.calls = calls
        self.technicianGroup = technicianGroup
        log = logger
    }

    func handle(_ command: ControlCommand, from client: ControlClientInfo) -> Result<ControlReply, ControlFailure> {
        if let group = technicianGroup, command.isTechnicians, client.credentials?.mayAct(asMemberOf: group) != true {
            log.notice("control: \(client) refused \(command): not in the technician group \(group)")
            return .failure(ControlFailure(.notPermitted, "the loopback tests are for the technician group (gid \(group)) and root"))
        }
        switch command {
        case .statistics:
            return .success(.statistics(statistics()))
        case .loopback(let insertMs):
            return loopback.start(insertMs: insertMs, audioRunning: audioRunning())
        case .loopbackResult:
            return .success(loopback.status())
        default:
            guard let calls else {
                return .failure(ControlFailure(.unavailable, "no calls on this terminal ([room] id is not set)"))
            }
            return calls.handle(command)
        }
    }

    func clientConnected(_ client: ControlClientInfo) { log.info("control: \(client) connected") }
    func clientDisconnected(_ client: ControlClientInfo, reason: String) { log.info("control: \(client) gone: \(reason)") }
    func serverError(_ message: String) { log.error("control socket: \(message)") }
}
