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
        var problems = network.problems + (device?.problems ?? [])
        if let device {
            guard let terminal, let budget = PathBudget.estimate(device: device, network: network, terminal: terminal) else {
                Output.err("intercomctl: no whole-path estimate: a measurement above has no figure")
                throw ExitCode(2)
            }
            if !options.json { Output.out(Self.render(budget, room: room)) }
            try write(plot) { LoopbackPlot.budget(budget, room: room) }
        } else {
            try write(plot) { LoopbackPlot.histogram(network, room: room) }
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
        do {
            let (response, line) = try client.send(.command(command))
            if options.json { Output.out(line) }
            switch response.outcome {
            case .failure(let failure):
                Output.err("intercomctl: the daemon refused: \(failure.code.rawValue): \(failure.message)")
                throw ExitCode(Exit.refused)
            case .success(let result):
                guard case .networkLoopback(let s) = try ControlJSON.decodeReply(result, for: command) else { Session.fail(.protocolViolation("not a loopback reply")) }
                return s
            }
        } catch let error as ControlClientError {
            Session.fail(error)
        } catch let error as ControlProtocolViolation {
            Session.fail(.protocolViolation(error.message))
        }
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
        do {
            let (response, line) = try client.send(.command(command))
            if options.json { Output.out(line) }
            switch response.outcome {
            case .failure(let failure):
                Output.err("intercomctl: the daemon refused: \(failure.code.rawValue): \(failure.message)")
                throw ExitCode(Exit.refused)
            case .success(let result):
                guard case .loopback(let s) = try ControlJSON.decodeReply(result, for: command) else { Session.fail(.protocolViolation("not a loopback reply")) }
                return s
            }
        } catch let error as ControlClientError {
            Session.fail(error)
        } catch let error as ControlProtocolViolation {
            Session.fail(.protocolViolation(error.message))
        }
    }

    static func render(_ r: LoopbackAnalysis.Result) -> String {
        func ms(_ v: Double?) -> String { v.map { String(format: "%.2f ms", $0) } ?? "-" }
        var lines = [
            "round trip      \(ms(r.roundTripMs))",
            "  playback buffer \(ms(r.playbackBufferMs))",
            "  path            \(ms(r.pathMs))   (converters, air, sound server)",
            "  capture period  \(ms(r.capturePeriodMs))",
            String(format: "echo            %.1f dBFS, correlation %.2f, SNR %@, clipped samples %d",
                   r.echoLevelDb, r.correlation, r.snrDb.map { String(format: "%.0f dB", $0) } ?? "-", r.clippedSamples),
        ]
        lines += r.warnings.map { "warning: \($0)" }
        lines += r.problems.map { "problem: \($0)" }
        return lines.joined(separator: "\n")
    }
}

extension LoopbackPlot {
    /// The whole-path estimate as one stacked bar against the goal.
    static func budget(_ b: PathBudget, room: RoomID) -> String {
        let w = 720.0, left = 20.0, right = 20.0, barTop = 40.0, barHeight = 36.0
        let h = barTop + barHeight + 40 + Double(b.parts.count) * 18
        let scale = (w - left - right) / max(b.totalMs, b.goalMs)
        let colours = ["#1f5fa8", "#4c9be8", "#7fb800", "#f6a600", "#e4572e", "#8e5ea2", "#5b5b5b"]
        var s = """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(w))" height="\(Int(h))" font-family="sans-serif" font-size="12">
            <rect width="100%" height="100%" fill="white"/>
            <text x="\(left)" y="22">Mouth to ear, here to \(room): \(String(format: "%.1f", b.totalMs)) ms (goal \(String(format: "%.0f", b.goalMs)) ms)</text>

            """
        var x = left
        for (i, p) in b.parts.enumerated() {
            let width = p.ms * scale, colour = colours[i % colours.count]
            s += String(format: "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%@\"/>\n", x, barTop, max(0, width), barHeight, colour)
            let y = barTop + barHeight + 28 + Double(i) * 18
            s += String(format: "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%@\"/>", left, y - 10, colour)
            s += String(format: "<text x=\"%.1f\" y=\"%.1f\">%@: %.2f ms (%@)</text>\n", left + 18, y, p.name, p.ms, p.source)
            x += width
        }
        let goal = left + b.goalMs * scale
        s += String(format: "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#c00\" stroke-width=\"2\" stroke-dasharray=\"5 3\"/>\n",
                    goal, barTop - 6, goal, barTop + barHeight + 6)
        return s + "</svg>\n"
    }

    /// The round trips as an SVG bar chart.
    static func histogram(_ r: RoundTripSummary, room: RoomID) -> String {
        let w = 640.0, h = 320.0, left = 60.0, right = 20.0, top = 30.0, bottom = 50.0
        let bins = r.histogram, most = Double(max(1, bins.map(\.count).max() ?? 1))
        let bar = (w - left - right) / Double(max(1, bins.count))
        var s = """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(w))" height="\(Int(h))" font-family="sans-serif" font-size="12">
            <rect width="100%" height="100%" fill="white"/>
            <text x="\(left)" y="18">Network round trip to \(room): \(r.received)/\(r.sent) back, median \(r.medianMs.map { String(format: "%.2f ms", $0) } ?? "-")</text>
            <line x1="\(left)" y1="\(h - bottom)" x2="\(w - right)" y2="\(h - bottom)" stroke="#333"/>
            <text x="\(w / 2)" y="\(h - 12)" text-anchor="middle">round trip, ms (bins of \(r.binWidthMs) ms)</text>

            """
        for (i, b) in bins.enumerated() {
            let height = Double(b.count) / most * (h - top - bottom)
            s += String(format: "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#1f5fa8\"/>\n",
                        left + Double(i) * bar + 1, h - bottom - height, max(1, bar - 2), height)
            if i % max(1, bins.count / 5) == 0 {
                s += String(format: "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.1f</text>\n", left + Double(i) * bar, h - bottom + 16, b.fromMs)
            }
        }
        return s + "</svg>\n"
    }
}

/// The correlation around the match as a small SVG line chart: a sharp single peak is a clean
/// measurement; a broad or double peak is a room (or a device) worth a second look.
enum LoopbackPlot {
    static func svg(_ r: LoopbackAnalysis.Result) -> String {
        let w = 640.0, h = 320.0, left = 60.0, right = 20.0, top = 30.0, bottom = 50.0
        let points = r.curve
        let x0 = points.first?.ms ?? 0, x1 = max(points.last?.ms ?? 1, x0 + 0.001)
        func x(_ ms: Double) -> Double { left + (ms - x0) / (x1 - x0) * (w - left - right) }
        func y(_ v: Double) -> Double { top + (1 - (v + 1) / 2) * (h - top - bottom) }
        let path = points.map { String(format: "%.1f,%.1f", x($0.ms), y($0.value)) }.joined(separator: " ")
        var s = """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(w))" height="\(Int(h))" font-family="sans-serif" font-size="12">
            <rect width="100%" height="100%" fill="white"/>
            <text x="\(left)" y="18">Device round trip: correlation of the chirp with the microphone (\(r.roundTripMs.map { String(format: "%.2f ms", $0) } ?? "no measurement"))</text>
            <line x1="\(left)" y1="\(y(0))" x2="\(w - right)" y2="\(y(0))" stroke="#bbb"/>
            <line x1="\(left)" y1="\(top)" x2="\(left)" y2="\(h - bottom)" stroke="#333"/>
            <line x1="\(left)" y1="\(h - bottom)" x2="\(w - right)" y2="\(h - bottom)" stroke="#333"/>
            <text x="\(left - 8)" y="\(y(1) + 4)" text-anchor="end">1</text>
            <text x="\(left - 8)" y="\(y(0) + 4)" text-anchor="end">0</text>
            <text x="\(left - 8)" y="\(y(-1) + 4)" text-anchor="end">-1</text>
            <text x="\(w / 2)" y="\(h - 12)" text-anchor="middle">path delay, ms (speaker buffer to microphone buffer)</text>

            """
        for k in 0...4 {
            let ms = x0 + (x1 - x0) * Double(k) / 4
            s += String(format: "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.2f</text>\n", x(ms), h - bottom + 16, ms)
        }
        if let p = r.pathMs {
            s += String(format: "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#c33\" stroke-dasharray=\"4 3\"/>\n", x(p), top, x(p), h - bottom)
        }
        s += "<polyline fill=\"none\" stroke=\"#1f5fa8\" stroke-width=\"1.5\" points=\"\(path)\"/>\n</svg>\n"
        return s
    }
}
