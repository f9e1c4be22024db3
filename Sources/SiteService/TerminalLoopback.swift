import Control
import SignalTools

/// A terminal's device loopback test as the API gives it: the terminal's own status (the control
/// socket's words) and, once done, the report and the plot a technician knows from intercomctl.
struct TerminalLoopback: Encodable, Sendable {
    var room: String
    var status: LoopbackStatus
    /// The round trip and its parts, the echo, warnings and problems, as text.
    var report: String?
    /// The plot, SVG.
    var plot: String?

    init(room: String, _ reply: ControlReply) throws {
        guard case .loopback(let status) = reply else {
            throw Problem(.badGateway, "terminal-answer", "The terminal's answer is not understood", detail: "\(room): \(reply)")
        }
        self.room = room
        self.status = status
        report = status.result?.report
        plot = status.result.map { LoopbackPlot.svg($0) }
    }
}
