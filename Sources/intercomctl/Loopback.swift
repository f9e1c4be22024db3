import ArgumentParser
import Calls
import Control
import Foundation
import SignalTools

struct Loopback: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Measure this terminal's device round trip: a chirp from the speaker, found in the microphone.",
        discussion: """
            Plays a 0.5 s chirp from the speaker (instead of the room's audio, for about a second) and
            finds it in the microphone: the round trip with sub-millisecond resolution, split into the
            playback buffer, the path (converters, air, a sound server) and the capture period; the
            echo's level, its signal-to-noise ratio and clipping. Exit status 2 when the measurement
            failed (a silent microphone, an unheard speaker, clipping), with the diagnosis.
            """)
    @OptionGroup var options: GlobalOptions
    @Option(help: "Measure the network round trip to this room instead (its daemon reflects test packets).") var room: String?
    @Option(help: "Probes for --room, one every 10 ms.") var count = 200
    @Option(help: "Write an SVG plot to this file: the correlation around the match, or with --room the round-trip histogram.") var plot: String?
    @Option(help: "Milliseconds of silence played before the chirp unannounced (checks the measurement: the path grows by it).")
    var insertMs: Double = 0

    func validate() throws {
        guard insertMs >= 0, insertMs <= 500 else { throw ValidationError("--insert-ms must be 0...500") }
        guard (1...2000).contains(count) else { throw ValidationError("--count must be 1...2000") }
        if let room, RoomID(room) == nil { throw ValidationError("--room: \"\(room)\" is not a room id") }
    }

    @Flag(help: "With --room: also run the device test and estimate the whole path, mouth to ear, part by part.") var path = false

    func run() throws {
        let client: ControlClient
        do { client = try ControlClient(path: options.socket, timeout: options.timeout) } catch { Session.fail(error) }
        guard let room = room.flatMap(RoomID.init) else {
            let r = try runDevice(client)
            try write(plot) { LoopbackPlot.svg(r) }
            if !options.json { Output.out(Self.render(r)) }
            if !r.problems.isEmpty { throw ExitCode(2) }
            return
        }
        // The device first: it plays a chirp instead of the room's audio for a second.
        let device = path ? try runDevice(client) : nil
        if let device, !options.json { Output.out(Self.render(device)) }
        let (network, terminal) = try runNetwork(client, room)
        if !options.json { Output.out(Self.render(network, room: room)) }
        let problems = network.problems + (device?.problems ?? [])
        if let device {
            guard let terminal, let budget = PathBudget.estimate(device: device, network: network, terminal: terminal) else {
                Output.err("intercomctl: no whole-path estimate: a measurement above has no figure")
                throw ExitCode(2)
            }
            if !options.json { Output.out(Self.render(budget, room: room)) }
            try write(plot) { LoopbackPlot.budget(budget, room: room.value) }
        } else {
            try write(plot) { LoopbackPlot.histogram(network, room: room.value) }
        }
        if !problems.isEmpty { throw ExitCode(2) }
    }

    private func write(_ file: String?, _ svg: () -> String) throws {
        guard let file else { return }
        do {
            try svg().write(toFile: file, atomically: true, encoding: .utf8)
        } catch {
            Output.err("intercomctl: cannot write \(file): \(error.localizedDescription)")
            throw ExitCode(73)  // EX_CANTCREAT
        }
    }

    private func runDevice(_ client: ControlClient) throws -> LoopbackAnalysis.Result {
        var status = try request(client, .loopback(insertMs: insertMs))
        let deadline = Date().addingTimeInterval(10)
        while status.state == .running, Date() < deadline {
            usleep(100_000)
            status = try request(client, .loopbackResult)
        }
        guard status.state == .done, let r = status.result else {
            Output.err("intercomctl: the loopback test \(status.state == .aborted ? "was aborted: the audio streams restarted (an xrun) during it; measure again" : "did not finish")")
            throw ExitCode(2)
        }
        return r
    }

    private func runNetwork(_ client: ControlClient, _ room: RoomID) throws -> (RoundTripSummary, TerminalTiming?) {
        var status = try requestNetwork(client, .networkLoopback(room: room, count: count))
        let deadline = Date().addingTimeInterval(Double(count) / 100 + 5)
        while status.state == .running, Date() < deadline {
            usleep(100_000)
            status = try requestNetwork(client, .networkLoopbackResult)
        }
        guard status.state == .done, let r = status.result else {
            Output.err("intercomctl: the network loopback test \(status.state == .aborted ? "was aborted" : "did not finish")")
            throw ExitCode(2)
        }
        return (r, status.terminal)
    }

    static func render(_ b: PathBudget, room: RoomID) -> String {
        var lines = ["mouth to ear, here to \(room) (estimate)"]
        for p in b.parts {
            lines.append("  " + p.name.padding(toLength: 36, withPad: " ", startingAt: 0) + String(format: "%6.2f ms  (%@)", p.ms, p.source))
        }
        lines.append("  " + "total".padding(toLength: 36, withPad: " ", startingAt: 0)
                     + String(format: "%6.2f ms  goal %.0f ms: %@", b.totalMs, b.goalMs, b.totalMs <= b.goalMs ? "met" : "not met"))
        lines += b.recommendations.map { "recommendation: \($0)" }
        return lines.joined(separator: "\n")
    }

    private func requestNetwork(_ client: ControlClient, _ command: ControlCommand) throws -> NetworkLoopbackStatus {
        try reply(client, command) { if case .networkLoopback(let s) = $0 { s } else { nil } }
    }

    static func render(_ r: RoundTripSummary, room: RoomID) -> String {
        func ms(_ v: Double?) -> String { v.map { String(format: "%.2f", $0) } ?? "-" }
        var lines = [
            "network round trip to \(room): \(r.received) of \(r.sent) probes back (\(String(format: "%.1f", r.lossPercent)) % lost\(r.duplicates > 0 ? ", \(r.duplicates) duplicated" : ""))",
            "  round trip min \(ms(r.minMs)) / median \(ms(r.medianMs)) / 95 % \(ms(r.p95Ms)) / max \(ms(r.maxMs)) ms, jitter \(ms(r.jitterMs)) ms",
        ]
        let most = max(1, r.histogram.map(\.count).max() ?? 1)
        for b in r.histogram where b.count > 0 {
            lines.append(String(format: "  %7.2f ms %@ %d", b.fromMs, String(repeating: "#", count: max(1, b.count * 40 / most)), b.count))
        }
        lines += r.recommendations.map { "recommendation: \($0)" }
        lines += r.problems.map { "problem: \($0)" }
        return lines.joined(separator: "\n")
    }

    private func request(_ client: ControlClient, _ command: ControlCommand) throws -> LoopbackStatus {
        try reply(client, command) { if case .loopback(let s) = $0 { s } else { nil } }
    }

    /// Sends one loopback command and takes its status out of the reply; a refusal or a reply of
    /// another kind ends the session with the daemon's message.
    private func reply<T>(_ client: ControlClient, _ command: ControlCommand, _ take: (ControlReply) -> T?) throws -> T {
        do {
            let (response, line) = try client.send(.command(command))
            if options.json { Output.out(line) }
            switch response.outcome {
            case .failure(let failure):
                Output.err("intercomctl: the daemon refused: \(failure.code.rawValue): \(failure.message)")
                throw ExitCode(Exit.refused)
            case .success(let reply):
                guard let s = take(reply) else { Session.fail(.protocolViolation("not a loopback reply")) }
                return s
            }
        } catch let error as ControlClientError {
            Session.fail(error)
        }
    }

    static func render(_ r: LoopbackAnalysis.Result) -> String { r.report }
}
