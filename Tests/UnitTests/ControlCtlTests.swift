import Calls
@testable import Control
import Foundation
import Glibc
import XCTest

/// intercomctl, the built binary, against a server with the fake handler: output and exit codes.
final class ControlCtlTests: XCTestCase {
    /// intercomctl next to the test bundle (swift build puts both in .build*/<config>/).
    static var binary: String {
        let dir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        let candidate = dir.appendingPathComponent("intercomctl").path
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        return dir.deletingLastPathComponent().appendingPathComponent("intercomctl").path
    }

    struct Run {
        var status: Int32
        var out: String
        var err: String
    }

    func ctl(_ arguments: [String], timeout: Double = 20) throws -> Run {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Self.binary)
        p.arguments = arguments
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        try p.run()
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        let errData = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return Run(status: p.terminationStatus, out: String(decoding: outData, as: UTF8.self), err: String(decoding: errData, as: UTF8.self))
    }

    func testCommandsPrintReadableAnswersAndExitZero() throws {
        let f = try ServerFixture()
        defer { f.stop() }
        let s = ["--socket", f.settings.socketPath]

        let call = try ctl(s + ["call", "Alle"])
        XCTAssertEqual(call.status, 0, call.err)
        XCTAssertEqual(call.out, "calling kueche, buero (call \(FakeControlHandler.placedCall))\n")

        let status = try ctl(["status"] + s)  // global options after the command work too
        XCTAssertEqual(status.status, 0, status.err)
        XCTAssertTrue(status.out.contains("empfang (Empfang)"), status.out)
        XCTAssertTrue(status.out.contains("buero          declined (busy)"), status.out)

        let mute = try ctl(s + ["mute", "mic"])
        XCTAssertEqual(mute.out, "microphone muted, speaker on\n")
        XCTAssertEqual(try ctl(s + ["dnd", "on"]).out, "do-not-disturb on\n")
        XCTAssertEqual(try ctl(s + ["leave"]).out, "hung up\n")

        let rooms = try ctl(s + ["rooms"])
        XCTAssertTrue(rooms.out.contains("buero   Büro                  offline"), rooms.out)
        XCTAssertTrue(rooms.out.contains("Alle: kueche, buero"), rooms.out)

        let history = try ctl(s + ["history", "--limit", "2"])
        XCTAssertEqual(history.out.split(separator: "\n").count, 2, history.out)
        XCTAssertTrue(history.out.contains("finished, 30 s"), history.out)

        XCTAssertEqual(f.handler.seen.withLock { $0.commands }, [
            .perform(.call(button: "Alle")), .status, .perform(.setMicrophoneMuted(true)), .perform(.setDoNotDisturb(true)), .perform(.hangUp), .rooms, .history(limit: 2),
        ])
    }

    func testJSONPrintsTheDaemonsLine() throws {
        let f = try ServerFixture()
        defer { f.stop() }
        let run = try ctl(["--json", "--socket", f.settings.socketPath, "call", "--rooms", "kueche,buero"])
        XCTAssertEqual(run.status, 0, run.err)
        let json = try JSONValue.parse(Array(run.out.trimmingCharacters(in: .newlines).utf8))
        XCTAssertEqual(json["ok"], true)
        XCTAssertEqual(json["id"], 1)
        XCTAssertEqual(json["result"]?["to"], ["kueche", "buero"])
    }

    func testRefusalUsageAndUnreachableExitCodes() throws {
        let f = try ServerFixture()
        defer { f.stop() }
        let refused = try ctl(["--socket", f.settings.socketPath, "call", "--rooms", "serverraum"])
        XCTAssertEqual(refused.status, 1)
        XCTAssertTrue(refused.err.contains("not_permitted: empfang may not call serverraum"), refused.err)
        XCTAssertEqual(try ctl(["--socket", f.settings.socketPath, "hangup"]).status, 1)

        for usage in [["mute", "lights"], ["dnd"], ["call"], ["call", "Alle", "--rooms", "kueche"], ["call", "--rooms", "Not,Valid"],
                      ["history", "--limit", "0"], ["teleport"]] {
            let run = try ctl(["--socket", f.settings.socketPath] + usage)
            XCTAssertEqual(run.status, 64, "\(usage): \(run.err)")
        }

        let missing = f.directory.socket("nobody-here.sock")
        let unreachable = try ctl(["--socket", missing, "status"])
        XCTAssertEqual(unreachable.status, 69)
        XCTAssertTrue(unreachable.err.contains(missing), unreachable.err)
        XCTAssertTrue(unreachable.err.contains(String(cString: strerror(ENOENT))), unreachable.err)
        XCTAssertEqual(unreachable.out, "")
    }

    func testEventsStreamUntilInterrupted() throws {
        let f = try ServerFixture()
        defer { f.stop() }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Self.binary)
        p.arguments = ["events", "--socket", f.settings.socketPath]
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        defer { if p.isRunning { p.terminate() } }
        XCTAssertTrue(ControlTestTools.wait(timeout: 10) { f.server.statistics.subscribers == 1 })
        f.server.publish(.incomingCall(CallID(0x51), from: FakeControlHandler.kitchen, participants: [FakeControlHandler.here]))
        f.server.publish(.participantStatus(CallID(0x51), room: FakeControlHandler.office, status: .declined(.doNotDisturb)))
        f.server.publish(.doNotDisturbChanged(true))
        var text = ""
        let deadline = Date().addingTimeInterval(10)
        while text.split(separator: "\n").count < 3, Date() < deadline {
            text += String(decoding: out.fileHandleForReading.availableData, as: UTF8.self)
        }
        let lines = text.split(separator: "\n").map { $0.dropFirst("12:34:56 ".count) }
        XCTAssertEqual(lines, ["incoming call 51 from kueche", "call 51: buero declined (do not disturb)", "do-not-disturb on"])
        XCTAssertTrue(p.isRunning, "events keeps streaming")
        p.interrupt()
        p.waitUntilExit()
        XCTAssertEqual(p.terminationReason, .uncaughtSignal)
    }

    func testADaemonThatSpeaksGarbageIsAProtocolErrorAndOneThatIsSilentTimesOut() throws {
        let directory = try SocketDirectory()
        for (reply, expected) in [("this is not json\n", Int32(76)), ("", Int32(69))] {
            let path = directory.socket(expected == 76 ? "garbage.sock" : "silent.sock")
            let listener = try UnixSocket.listen(path: path, mode: 0o600, group: nil, backlog: 4).socket
            let done = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                defer { done.signal() }
                let deadline = Date().addingTimeInterval(10)
                while Date() < deadline {
                    guard let client = try? listener.accept() else { usleep(5_000); continue }
                    _ = Array(reply.utf8).withUnsafeBytes { client.send($0) }
                    usleep(1_500_000)  // hold the connection past the client's timeout
                    return
                }
            }
            let run = try ctl(["--socket", path, "--timeout", "1", "status"])
            XCTAssertEqual(run.status, expected, run.err)
            XCTAssertTrue(run.err.contains(expected == 76 ? "protocol error" : "no answer"), run.err)
            done.wait()
            listener.close()
        }
    }
}
