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
}
