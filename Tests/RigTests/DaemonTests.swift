import Control
import Foundation
import IntercomDaemon
import TestSupport
import XCTest

/// intercomd as a process: configuration errors, devices that are missing or vanish, clean stop.
final class DaemonTests: XCTestCase {
    func testBrokenConfigurationNamesTheKeyAndExitsWithConfigError() throws {
        let path = try DaemonProcess.writeConfig("""
            [audio]
            period_ms = 7
            capture_devise = "roomA"
            """)
        let d = try DaemonProcess(arguments: ["--config", path])
        let status = d.wait(timeout: 10)
        XCTAssertEqual(status, 78, d.log)
        XCTAssertTrue(d.log.contains("audio.period_ms: 7 is not one of"), d.log)
        XCTAssertTrue(d.log.contains("audio.capture_devise: unknown key (did you mean audio.capture_device?)"), d.log)
    }

    /// `--check-config` refuses each malformed peer address (exit 78, the key named), where a lenient
    /// parser once passed `10.0.0.300.2:5004` and sent media to 10.0.0.2; and accepts a good one.
    func testCheckConfigRefusesEveryMalformedAddress() throws {
        for bad in ["10.0.0.300.2:5004", "1.2.x.3.4:5", "1.2.3.4:5:"] {
            let path = try DaemonProcess.writeConfig("[network]\npeers = [\"\(bad)\"]\n")
            let d = try DaemonProcess(arguments: ["--config", path, "--check-config"])
            XCTAssertEqual(d.wait(timeout: 10), 78, "\(bad): \(d.log)")
            XCTAssertTrue(d.log.contains("network.peers: element 1 \"\(bad)\": is not an IPv4 address and port"), d.log)
        }
        let good = try DaemonProcess.writeConfig("[network]\npeers = [\"10.0.0.2:5004\"]\n" + DaemonProcess.labMode)
        let d = try DaemonProcess(arguments: ["--config", good, "--check-config"])
        XCTAssertEqual(d.wait(timeout: 10), 0, d.log)
    }

    func testMissingConfigurationFileIsNamed() throws {
        let d = try DaemonProcess(arguments: ["--config", "/nonexistent/intercomd.toml"])
        XCTAssertEqual(d.wait(timeout: 10), 78)
        XCTAssertTrue(d.log.contains("/nonexistent/intercomd.toml"), d.log)
    }

    /// Without CAP_SYS_NICE and CAP_IPC_LOCK (an unprivileged service) intercomd says so clearly
    /// and still runs audio with normal scheduling.
    func testWithoutRealtimeRightsItWarnsAndRunsWithNormalScheduling() throws {
        try Rig.require()
        let config = try DaemonProcess.writeRoomConfig("roomD")
        let d = try DaemonProcess(arguments: ["--config", config],
                                  wrapper: ["/usr/bin/setpriv", "--bounding-set=-sys_nice,-ipc_lock"])
        XCTAssertTrue(d.waitUntilRunning(timeout: 10), d.log)
        // The warnings are what the administrator reads: their text is the product here.
        XCTAssertTrue(d.log.contains("real-time priority 70 refused (Operation not permitted); running with normal scheduling"), d.log)
        XCTAssertTrue(d.log.contains("cannot lock memory"), d.log)
        let ran = d.waitForStatistics(timeout: 5) { $0.audio.frames > 100 }
        XCTAssertNotNil(ran, "audio ran: \(d.log)")
        XCTAssertEqual(d.terminate(), 0, d.log)
    }

    /// Ctrl-C (SIGINT) stops the daemon as cleanly as SIGTERM: audio stops, final statistics, status 0.
    func testSIGINTStopsCleanly() throws {
        try Rig.require()
        let d = try DaemonProcess(arguments: ["--config", try DaemonProcess.writeRoomConfig("roomC")])
        XCTAssertTrue(d.waitUntilRunning(timeout: 10), d.log)
        Thread.sleep(forTimeInterval: 0.5)
        kill(d.process.processIdentifier, SIGINT)
        XCTAssertEqual(d.wait(timeout: 5), 0, d.log)
        XCTAssertTrue(d.log.contains("signal \(SIGINT): stopping"), d.log)
        XCTAssertTrue(d.log.contains("audio stopped"), d.log)
        XCTAssertTrue(d.log.contains("final stats: frames="), d.log)
    }

    /// A terminal without calls has a control socket too: `intercomctl stats` shows its counters
    /// (typed: they grow while audio runs), and a calls command is refused as unavailable.
    func testStatsAnswerOnATerminalWithoutCalls() throws {
        try Rig.require()
        let d = try DaemonProcess(arguments: ["--config", try DaemonProcess.writeRoomConfig("roomC")])
        defer { d.terminate() }
        XCTAssertTrue(d.waitUntilRunning(timeout: 10), d.log)
        let socket = try XCTUnwrap(d.controlSocket)
        let first = try d.statistics()
        Thread.sleep(forTimeInterval: 0.5)
        let text = try Command.run(Repo.builtProgram("intercomctl"), ["stats", "--socket", socket])
        let json = try Command.run(Repo.builtProgram("intercomctl"), ["stats", "--socket", socket, "--json"])
        let second = try d.statistics()
        print("stats on a terminal without calls:\n\(text)")
        XCTAssertGreaterThan(second.audio.frames, first.audio.frames + 20, "frames count on: \(first.audio) → \(second.audio)")
        XCTAssertNil(second.calls, "no calls section without calls")
        XCTAssertTrue(text.contains("xruns") && text.contains("echo canceller"), text)
        let reply = try ControlResponse.read(Array(json.utf8.prefix { $0 != 10 }), to: .command(.statistics))
        guard case .success(.statistics) = reply.outcome else { return XCTFail("a statistics line: \(json)") }
        let refused = Process()
        refused.executableURL = URL(fileURLWithPath: Repo.builtProgram("intercomctl"))
        refused.arguments = ["status", "--socket", socket]
        let err = Pipe()
        refused.standardError = err
        refused.standardOutput = Pipe()
        try refused.run()
        refused.waitUntilExit()
        let message = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        XCTAssertEqual(refused.terminationStatus, 1, "status is refused: \(message)")
        XCTAssertTrue(message.contains("unavailable") && message.contains("[room] id"), message)
    }

    /// What an installer does first: print the defaults into a file and check it. Every section
    /// is there and the file passes the daemon's own check.
    func testThePrintedDefaultConfigurationPassesTheCheck() throws {
        let printed = try Command.run(DaemonProcess.binary, ["--print-default-config"])
        let path = try DaemonProcess.writeConfig(printed, name: "printed-defaults")
        let check = try Command.run(DaemonProcess.binary, ["--check-config", "--config", path])
        XCTAssertEqual(check, "\(path): OK\n")
        for section in ["[audio]", "[room]", "[calls]", "[security]", "[control]", "[keys]", "[tones]", "[speech]", "#   [notifications."] {
            XCTAssertTrue(printed.contains("\n\(section)"), "\(section) is printed")
        }
    }

    /// Two daemons on one control socket (the collision that broke scripts/run.sh on a fresh
    /// machine): the second says so, naming the first's pid, and exits at once with nothing left
    /// behind, whether it starts after the first or at the same moment; the first keeps its socket
    /// and, once stopped, leaves neither the socket file nor its lock file.
    func testASecondDaemonOnTheSameControlSocketFailsCleanlyAndTheFirstKeepsIt() throws {
        try Rig.require()
        let socket = "\(try Repo.scratchFolder("one-socket"))/control.sock"
        func config(_ room: String) throws -> String {
            try DaemonProcess.writeRoomConfig(room, extra: "[control]\nsocket = \"\(socket)\"")
        }
        let first = try DaemonProcess(arguments: ["--config", try config("roomA")], name: "first")
        XCTAssertTrue(first.waitUntilRunning(timeout: 10), first.log)
        var inode = stat()
        XCTAssertEqual(lstat(socket, &inode), 0)

        let second = try DaemonProcess(arguments: ["--config", try config("roomB")], name: "second")
        let started = Date()
        let code = second.wait(timeout: 5)
        print(String(format: "a second daemon on the socket: exit %@ after %.2f s: %@", code.map(String.init) ?? "none",
                     Date().timeIntervalSince(started), second.log.split(separator: "\n").last.map(String.init) ?? ""))
        XCTAssertEqual(code, IntercomDaemon.ExitCode.software.rawValue, "the second daemon exits by itself: \(second.log)")
        XCTAssertTrue(second.log.contains("another daemon is listening on it (pid \(first.process.processIdentifier)"), second.log)
        XCTAssertFalse(second.log.contains("audio thread"), "the second never started audio: \(second.log)")
        var after = stat()
        XCTAssertEqual(lstat(socket, &after), 0)
        XCTAssertEqual(after.st_ino, inode.st_ino, "the socket file is still the first daemon's")
        XCTAssertEqual(try first.statistics().audio.running, true, "the first still answers on it")
        XCTAssertEqual(first.terminate(), 0, first.log)
        XCTAssertFalse(FileManager.default.fileExists(atPath: socket), "no socket file left")
        XCTAssertFalse(FileManager.default.fileExists(atPath: socket + ".lock"), "no lock file left")

        // Started at the same moment: exactly one runs, the other exits.
        for round in 0..<3 {
            let pair = try ["roomA", "roomB"].map { try DaemonProcess(arguments: ["--config", try config($0)], name: "pair-\($0)") }
            // The loser exits by itself within moments; then the winner must still run.
            XCTAssertTrue(waitUntil(5) { pair.contains { !$0.isRunning } }, "round \(round): one of two exits by itself")
            Thread.sleep(forTimeInterval: 0.5)
            let exited = pair.filter { !$0.isRunning }, running = pair.filter(\.isRunning)
            XCTAssertEqual(exited.count, 1, "round \(round): one of two exits: \(pair.map(\.log))")
            XCTAssertEqual(running.count, 1, "round \(round): one of two runs")
            for d in exited { XCTAssertEqual(d.wait(timeout: 1), IntercomDaemon.ExitCode.software.rawValue, d.log) }
            if let r = running.first {
                XCTAssertTrue(r.waitUntilRunning(timeout: 10), "round \(round): the one running answers on the socket: \(r.log)")
                XCTAssertEqual(r.terminate(), 0, r.log)
            }
            XCTAssertFalse(FileManager.default.fileExists(atPath: socket), "round \(round): no socket file left")
            XCTAssertFalse(FileManager.default.fileExists(atPath: socket + ".lock"), "round \(round): no lock file left")
        }
    }

    /// A terminal whose sound card is not there yet keeps retrying, names the device, starts
    /// audio as soon as the device appears, survives its disappearance, and stops cleanly.
    func testMissingDeviceIsNamedRetriedAndPickedUpWhenItAppears() throws {
        try Rig.require()
        let rigDir = try XCTUnwrap(Rig.directory)
        // An ALSA device for a room whose sink does not exist yet.
        let extraConf = NSTemporaryDirectory() + "late-\(getpid()).conf"
        try """
            pcm.roomLate { type asym playback.pcm { type pulse device "roomLate" } capture.pcm { type pulse device "roomLate.monitor" } }
            """.write(toFile: extraConf, atomically: true, encoding: .utf8)
        let alsaPath = (ProcessInfo.processInfo.environment["ALSA_CONFIG_PATH"] ?? "/usr/share/alsa/alsa.conf") + ":" + extraConf
        let config = try DaemonProcess.writeRoomConfig("roomLate", extra: "[retry]\ninitial_ms = 100\nmax_ms = 400")
        let d = try DaemonProcess(arguments: ["--config", config], environment: ["ALSA_CONFIG_PATH": alsaPath])
        defer { d.terminate() }
        XCTAssertTrue(d.waitForLog("retrying in", timeout: 5), d.log)
        Thread.sleep(forTimeInterval: 1)
        XCTAssertTrue(d.isRunning, "must keep retrying, not exit")
        XCTAssertEqual(try d.statistics().audio.running, false, "stats answers while the device is missing: no audio")
        XCTAssertTrue(d.log.contains("'roomLate'"), "the error names the device: \(d.log)")

        let module = try Command.run("/usr/bin/pactl", ["load-module", "module-null-sink", "sink_name=roomLate", "rate=48000", "channels=1"])
            .trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertTrue(d.waitUntilRunning(timeout: 5), "opens once the device exists: \(d.log)")
        let opened = try d.statistics()
        Thread.sleep(forTimeInterval: 1)
        try Command.run("/usr/bin/pactl", ["unload-module", module])
        let deadline = Date().addingTimeInterval(5)
        while (try? d.statistics())?.audio.running != false, Date() < deadline { usleep(50_000) }
        let vanished = try d.statistics()
        XCTAssertFalse(vanished.audio.running, "notices the device vanished: \(d.log)")
        XCTAssertEqual(opened.audio.sessions, 1, "one session started: \(opened.audio)")
        Thread.sleep(forTimeInterval: 0.5)
        XCTAssertTrue(d.isRunning, "survives the device vanishing")
        XCTAssertEqual(d.terminate(), 0, "SIGTERM stops it cleanly: \(d.log)")
        XCTAssertTrue(d.log.contains("final stats"), d.log)
        _ = rigDir
    }
}
