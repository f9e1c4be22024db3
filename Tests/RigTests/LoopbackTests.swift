import Control
import Foundation
import SignalTools
import TestSupport
import XCTest

/// The technician's device round-trip test against a running daemon on the rig.
final class LoopbackTests: XCTestCase {
    /// Runs one test through the control socket and waits for its result.
    private func measure(_ rooms: CallRooms, insertMs: Double = 0) throws -> LoopbackStatus {
        let client = try ControlClient(path: rooms.room("rooma").socket, timeout: 5)
        defer { client.close() }
        guard case .success(.loopback(var s)) = try client.run(.loopback(insertMs: insertMs)) else {
            throw RigError(description: "loopback refused")
        }
        let deadline = Date().addingTimeInterval(8)
        while s.state == .running, Date() < deadline {
            usleep(100_000)
            guard case .success(.loopback(let next)) = try client.run(.loopbackResult) else { throw RigError(description: "loopback_result refused") }
            s = next
        }
        return s
    }

    /// The round trip is found, with its parts, and a delay inserted before the chirp (unknown to
    /// the analysis) lengthens the measured path by that delay within 0.5 ms; `intercomctl
    /// loopback` prints the report and writes the plot.
    func testRoundTripIsMeasuredAndAnInsertedDelayIsFoundWithinHalfAMillisecond() throws {
        try Rig.require()
        try measureWithRetries("device loopback") { c in
            let rooms = try CallRooms(["roomA", "roomB"])
            defer { rooms.stopAll() }
            let a = try rooms.start("rooma")
            Thread.sleep(forTimeInterval: 0.5)
            var paths: [Double: [Double]] = [:]
            for insert in [0.0, 7.3, 0.0, 7.3] {
                let s = try measure(rooms, insertMs: insert)
                guard s.state == .done, let r = s.result else {
                    c.check(false, "insert \(insert) ms: the test did not finish: \(s.state)")
                    continue
                }
                print(String(format: "loopback: insert %.1f ms: round trip %@ ms (playback buffer %@, path %@, capture period %.2f), correlation %.2f, echo %.1f dBFS, SNR %@ dB, problems %@",
                             insert, r.roundTripMs.map { String(format: "%.3f", $0) } ?? "-", r.playbackBufferMs.map { String(format: "%.3f", $0) } ?? "-",
                             r.pathMs.map { String(format: "%.3f", $0) } ?? "-", r.capturePeriodMs, r.correlation, r.echoLevelDb,
                             r.snrDb.map { String(format: "%.0f", $0) } ?? "-", r.problems.description))
                c.check(r.problems.isEmpty, "insert \(insert) ms: a clean rig room measures without problems: \(r.problems)")
                guard let path = r.pathMs, let trip = r.roundTripMs else { continue }
                // The rig's sound server sometimes lets its streams slip apart without an xrun (the
                // analysis warns): then only the round trip holds, and the attempt is the rig's fault.
                if r.warnings.contains(where: { $0.contains("out of step") }) {
                    c.rigFault("insert \(insert) ms: the rig's streams were out of step (path \(path) ms, buffer \(r.playbackBufferMs ?? 0) ms)")
                    continue
                }
                c.check(r.correlation > 0.8, "insert \(insert) ms: the chirp is found clearly (correlation \(r.correlation))")
                // On the rig the "air" (a sink's monitor) returns the played samples in the same
                // stream clock: the path is 0 there, and the round trip is all buffering.
                c.check(path >= -0.1 && trip >= path + r.capturePeriodMs, "insert \(insert) ms: path \(path) ms not negative, within the round trip \(trip) ms")
                paths[insert, default: []].append(path)
            }
            if let base = paths[0], let longer = paths[7.3], base.count == 2, longer.count == 2 {
                for (p0, p1) in zip(base, longer) {
                    c.check(abs((p1 - p0) - 7.3) <= 0.5, String(format: "the inserted 7.3 ms is found as %.3f ms (paths %.3f and %.3f ms)", p1 - p0, p0, p1))
                }
            }

            // The command-line tool: a readable report and an SVG plot.
            let plot = "\(rooms.dir)/loopback.svg"
            let out = Pipe()
            let ctl = try Command.start(Repo.builtProgram("intercomctl"), ["loopback", "--socket", rooms.room("rooma").socket, "--plot", plot],
                                        stdout: out.fileHandleForWriting)
            ctl.waitUntilExit()
            try? out.fileHandleForWriting.close()
            let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            print("loopback: intercomctl printed:\n\(text)")
            c.check(ctl.terminationStatus == 0, "intercomctl loopback exits 0: \(ctl.terminationStatus)")
            c.check(text.contains("round trip") && text.contains("playback buffer"), "the report names the round trip and its parts: \(text)")
            let svg = (try? String(contentsOfFile: plot, encoding: .utf8)) ?? ""
            c.check(svg.hasPrefix("<svg") && svg.contains("<polyline"), "the plot is an SVG chart: \(plot)")
            return [a]
        }
    }

    /// The network round trip to another room through the impairment relay (20 ms + 0-10 ms jitter
    /// and 5 % loss on the way out; the reflection comes back direct): the report finds the relay's
    /// delay, spread and loss, recommends a jitter-buffer minimum that covers the spread; the
    /// whole-path estimate reports every part and adds up; an offline room is a diagnosis with exit
    /// status 2, not a number.
    func testNetworkRoundTripThroughAnImpairedPathReportsItsDelayJitterLossAndTheWholePath() throws {
        try Rig.require()
        try measureWithRetries("network loopback") { c in
            let rooms = try CallRooms(["roomA", "roomB", "roomC"])
            defer { rooms.stopAll() }
            let relay = try ImpairmentRelayProcess(targetPort: rooms.room("roomb").signalling,
                                                   options: ["--delay", "20", "--jitter", "10", "--loss", "5", "--seed", "11"])
            defer { relay.stop() }
            let a = try rooms.start("rooma", signallingVia: ["roomb": relay.port])
            let b = try rooms.start("roomb")
            c.require(rooms.waitOnline("rooma", ["roomb"]), "A sees B online through the relay")

            func run(_ room: String, count: Int, plot: String, path: Bool = false) throws -> (status: Int32, text: String) {
                let out = Pipe()
                let ctl = try Command.start(Repo.builtProgram("intercomctl"),
                                            ["loopback", "--socket", rooms.room("rooma").socket, "--room", room,
                                             "--count", "\(count)", "--plot", plot] + (path ? ["--path"] : []), stdout: out.fileHandleForWriting)
                ctl.waitUntilExit()
                try? out.fileHandleForWriting.close()
                return (ctl.terminationStatus, String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))
            }
            let plot = "\(rooms.dir)/net-loopback.svg"
            let (status, text) = try run("roomb", count: 300, plot: plot)
            print("net loopback: intercomctl printed:\n\(text)")
            let client = try ControlClient(path: rooms.room("rooma").socket, timeout: 5)
            defer { client.close() }
            guard case .success(.networkLoopback(let s)) = try client.run(.networkLoopbackResult), let r = s.result,
                  let minMs = r.minMs, let median = r.medianMs, let p95 = r.p95Ms else {
                c.check(false, "the result is kept for loopback_result: \(text)")
                return [a, b]
            }
            c.check(r.sent == 300, "300 probes sent: \(r.sent)")
            // The relay holds every probe at least 20 ms; the machine adds scheduling delay on top.
            c.check(minMs >= 20, String(format: "no probe is faster than the relay's 20 ms: min %.2f ms", minMs))
            c.check(median >= 22 && median <= 32, String(format: "median %.2f ms: 20 ms + half of the 10 ms jitter, and wake-ups", median))
            c.check(p95 - minMs >= 6 && p95 - minMs <= 20, String(format: "the spread (95 %% - min, %.2f ms) shows the relay's 10 ms jitter", p95 - minMs))
            c.check(r.lossPercent >= 2 && r.lossPercent <= 9, String(format: "about 5 %% lost: %.1f %%", r.lossPercent))
            c.check(r.problems.contains { $0.contains("lost") }, "the loss is named as a problem: \(r.problems)")
            c.check(status == 2, "intercomctl exits 2 when the path has a problem: \(status)")
            c.check(text.contains("network round trip to roomb") && text.contains("median"), "the report names the figures: \(text)")
            c.check(r.recommendations.contains { $0.hasPrefix("jitter.min_delay_ms = ") }, "a jitter-buffer minimum is recommended: \(r.recommendations)")
            let svg = (try? String(contentsOfFile: plot, encoding: .utf8)) ?? ""
            c.check(svg.hasPrefix("<svg") && svg.components(separatedBy: "<rect").count > 3, "the histogram is an SVG bar chart: \(plot)")

            // The whole path: the device test, then the network, then the estimate part by part.
            let budgetPlot = "\(rooms.dir)/path.svg"
            let (_, pathText) = try run("roomb", count: 100, plot: budgetPlot, path: true)
            print("whole path: intercomctl printed:\n\(pathText)")
            func part(_ name: String) -> Double? {
                guard let line = pathText.split(separator: "\n").first(where: { $0.contains(name) }) else { return nil }
                return line.split(separator: " ").compactMap { Double($0) }.first
            }
            let parts = ["capture period", "echo canceller", "codec look-ahead", "network (half", "jitter buffer (far", "playback buffer (far", "converters and air"]
            let values = parts.compactMap(part)
            c.check(values.count == parts.count, "every part of the path is reported: \(pathText)")
            if let network = part("network (half"), let total = part("  total") {
                c.check(network >= 10, String(format: "the network part is at least half the relay's 20 ms: %.2f ms", network))
                c.check(abs(values.reduce(0, +) - total) < 0.05, "the parts add up to the total \(total)")
            } else {
                c.check(false, "the report has the network part and the total")
            }
            let budgetSVG = (try? String(contentsOfFile: budgetPlot, encoding: .utf8)) ?? ""
            c.check(budgetSVG.contains("Mouth to ear") && budgetSVG.components(separatedBy: "<rect").count >= 1 + 2 * parts.count,
                    "the whole-path plot is a stacked bar with a legend: \(budgetPlot)")

            // Room C is in the directory but its daemon is not running.
            let (offStatus, offText) = try run("roomc", count: 50, plot: "\(rooms.dir)/off.svg")
            print("net loopback to an offline room: \(offText)")
            c.check(offStatus == 2 && offText.contains("offline or unreachable"), "an offline room is diagnosed: \(offStatus) \(offText)")
            return [a, b]
        }
    }

    /// `intercomd --loopback` measures the devices of a stopped service on its own: the report and
    /// the plot, exit status 0 on a clean rig room, and the same round trip as through the control
    /// socket (on the rig: buffering only, 2-5 periods). The figures are read from `--json`, the
    /// control socket's typed `loopback_result` reply; the report is checked to name them.
    /// The typed loopback_result that `intercomd --loopback --json` printed, if any.
    private static func loopbackReply(printedBy d: DaemonProcess) -> ControlReply? {
        d.log.split(separator: "\n").lazy.filter { $0.hasPrefix("{") }
            .compactMap { try? ControlReply.read(Array($0.utf8), to: .command(.loopbackResult)) }.first
    }

    func testDaemonLoopbackFlagMeasuresTheDevicesOfAStoppedService() throws {
        try Rig.require()
        try measureWithRetries("intercomd --loopback") { c in
            let dir = try Repo.scratchFolder("daemon-loopback")
            let config = try DaemonProcess.writeRoomConfig("roomE")
            let d = try DaemonProcess(arguments: ["--config", config, "--loopback", "--json", "--plot", "\(dir)/plot.svg"])
            let status = d.wait(timeout: 20)
            print("intercomd --loopback --json printed:\n\(d.log)")
            c.check(status == 0, "exit status 0 on a clean rig room: \(String(describing: status))")
            let reply = Self.loopbackReply(printedBy: d)
            guard case .loopback(let s)? = reply, s.state == .done, let r = s.result, let trip = r.roundTripMs else {
                c.check(false, "--json prints a finished loopback_result with a round trip: \(String(describing: reply))")
                return [d]
            }
            if r.warnings.contains(where: { $0.contains("out of step") }) {
                c.rigFault("the rig's streams were out of step (round trip \(trip) ms)")
                return [d]
            }
            c.check(r.problems.isEmpty, "a clean rig room measures without problems: \(r.problems)")
            c.check(trip >= 20 && trip <= 60, "round trip \(trip) ms: 2-5 periods of 10 ms on the rig")
            let svg = (try? String(contentsOfFile: "\(dir)/plot.svg", encoding: .utf8)) ?? ""
            c.check(svg.contains("<polyline"), "the correlation plot is written")

            let plain = try DaemonProcess(arguments: ["--config", config, "--loopback"])
            let plainStatus = plain.wait(timeout: 20)
            c.check(plainStatus == 0 && plain.log.contains("round trip") && plain.log.contains("playback buffer"),
                    "without --json the report names the round trip and its parts: \(plain.log)")
            return [d, plain]
        }
    }

    /// `audio.playback_fill_periods` below `buffer_periods` (the default, 2 of 3): the engine keeps
    /// less queued for the speaker than with the whole buffer full (`playback_fill_periods = 0`), so
    /// the device round trip is shorter by what it no longer queues (one 10 ms period of three on
    /// the rig: measured 30 -> 20 ms), and the room still measures cleanly.
    func testAFillTargetBelowTheBufferShortensTheDeviceRoundTripByAPeriod() throws {
        try Rig.require()
        try measureWithRetries("fill target") { c in
            var trips: [Double] = []
            var daemons: [DaemonProcess] = []
            for audio in ["playback_fill_periods = 0", ""] {
                let config = try DaemonProcess.writeRoomConfig("roomE", audio: audio)
                let d = try DaemonProcess(arguments: ["--config", config, "--loopback", "--json"])
                daemons.append(d)
                let status = d.wait(timeout: 20)
                c.check(status == 0, "exit status 0 with [\(audio)]: \(String(describing: status))")
                let reply = Self.loopbackReply(printedBy: d)
                guard case .loopback(let s)? = reply, s.state == .done, let r = s.result, let trip = r.roundTripMs else {
                    c.check(false, "a finished loopback_result with [\(audio)]: \(String(describing: reply))")
                    return daemons
                }
                if r.warnings.contains(where: { $0.contains("out of step") }) {
                    c.rigFault("the rig's streams were out of step (round trip \(trip) ms)")
                    return daemons
                }
                c.check(r.problems.isEmpty, "a clean rig room measures without problems with [\(audio)]: \(r.problems)")
                trips.append(trip)
            }
            guard trips.count == 2 else { return daemons }
            print(String(format: "fill target: device round trip %.2f ms with the buffer full, %.2f ms with 2 of 3 periods queued (the default)", trips[0], trips[1]))
            c.check(trips[1] <= trips[0] - 5, "2 of 3 periods queued take at least half a period off the round trip: \(trips)")
            c.check(trips[1] >= 10, "the round trip keeps at least the capture period: \(trips)")
            return daemons
        }
    }

    /// With `control.technician_group` set, a client outside the group (uid nobody, no groups) may
    /// ask for the status but not start a loopback test (`not_permitted`, exit status 1); the same
    /// user with the group as a supplementary group may; every connection is logged with its
    /// credentials.
    func testTechnicianCommandsAreLimitedToTheTechnicianGroup() throws {
        try Rig.require()
        let rooms = try CallRooms(["roomA", "roomB"])
        defer { rooms.stopAll() }
        chmod((rooms.room("rooma").socket as NSString).deletingLastPathComponent, 0o755)
        let a = try rooms.start("rooma", extra: "mode = \"0666\"\ntechnician_group = \"audio\"")
        let ctl = Repo.builtProgram("intercomctl"), socket = rooms.room("rooma").socket
        func run(_ groups: String, _ args: [String]) throws -> (Int32, String) {
            let out = Pipe()
            let p = try Command.start("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", groups == "" ? "--clear-groups" : "--groups=\(groups)",
                                                            ctl, "--socket", socket] + args, stdout: out.fileHandleForWriting, stderr: out.fileHandleForWriting)
            p.waitUntilExit()
            try? out.fileHandleForWriting.close()
            return (p.terminationStatus, String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))
        }
        let (statusCode, statusText) = try run("", ["status"])
        XCTAssertEqual(statusCode, 0, "anyone who may connect gets the status: \(statusText)")
        let (refusedCode, refusedText) = try run("", ["loopback"])
        XCTAssertEqual(refusedCode, 1, refusedText)
        XCTAssertTrue(refusedText.contains("not_permitted"), refusedText)
        let (allowedCode, allowedText) = try run("29", ["loopback"])
        XCTAssertEqual(allowedCode, 0, "a member of the technician group runs the test: \(allowedText)")
        XCTAssertTrue(allowedText.contains("round trip"), allowedText)
        XCTAssertTrue(a.log.contains("uid 65534 gid 65534 groups 29) connected"), "connections are logged with credentials: \(a.log)")
        print("technician group: refused: \(refusedText.trimmingCharacters(in: .whitespacesAndNewlines)); allowed: \(allowedText.split(separator: "\n").first ?? "")")
    }
}
