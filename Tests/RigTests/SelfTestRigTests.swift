import Control
import Foundation
import RigKit
import TestSupport
import XCTest

/// The terminal's own periodic check (`[selftest]`, issue 55) through real daemons on the rig.
final class SelfTestRigTests: XCTestCase {
    /// A terminal whose speaker its microphone hears passes its check, quietly, shown in `stats`
    /// and the metrics; a check that falls due during a call waits for the call's end.
    func testTheCheckPassesIsShownInTheMetricsAndNeverRunsDuringACall() throws {
        try Rig.require()
        let rooms = try CallRooms(["roomA", "roomB"])
        defer { rooms.stopAll() }
        let metricsPort = try FreePort.udp()
        try rooms.start("rooma", extra: "[selftest]\ninterval_s = 2\n[metrics]\nlisten = \"127.0.0.1:\(metricsPort)\"")
        try rooms.start("roomb")
        func selfTest() -> DaemonStatistics.SelfTest? { try? rooms.daemons["rooma"]!.statistics().selfTest }
        XCTAssertNotNil(selfTest(), "stats has the self-test once it is configured")
        XCTAssertNil(try rooms.daemons["roomb"]!.statistics().selfTest, "and not without")

        XCTAssertTrue(rooms.wait(10) { (selfTest()?.runs ?? 0) >= 1 }, "a check ran: \(String(describing: selfTest()))")
        let first = try XCTUnwrap(selfTest()?.last)
        print(String(format: "self-test: passed %@, round trip %@ ms, chirp heard at %.1f dBFS, problems %@", "\(first.passed)",
                     first.roundTripMs.map { String(format: "%.1f", $0) } ?? "-", first.echoLevelDb, first.problems.description))
        XCTAssertTrue(first.passed, "the rig's room hears its speaker: \(first.problems)")
        XCTAssertGreaterThan(first.roundTripMs ?? 0, 0, "a round trip measured")
        // Quiet: the chirp plays at -30 dBFS peak (its RMS some 3 dB lower) where the technician's plays at -12.
        XCTAssertLessThan(first.echoLevelDb, -30, "the check is quiet")
        XCTAssertGreaterThan(first.echoLevelDb, -45, "and heard")
        let scrape = try SiteServiceProcess.run(["/usr/bin/curl", "-s", "-m", "5", "http://127.0.0.1:\(metricsPort)/metrics"]).out
        XCTAssertTrue(scrape.contains("intercom_selftest_passed 1.0"), "the metrics say it passed: \(scrape.split(separator: "\n").filter { $0.contains("selftest") })")
        XCTAssertTrue(scrape.contains("intercom_selftest_runs_total{outcome=\"passed\"}"), "and count it")

        // A call: the checks falling due in it wait, and the next runs once it has ended.
        XCTAssertTrue(rooms.waitOnline("rooma", ["roomb"]))
        _ = try rooms.control("rooma", .perform(.call(button: "roomb")))
        XCTAssertTrue(rooms.wait(8) { rooms.isConnected("rooma") }, "connected: \(rooms.streamHealth())")
        let inCall = try XCTUnwrap(selfTest())
        Thread.sleep(forTimeInterval: 5)
        let afterCall = try XCTUnwrap(selfTest())
        XCTAssertTrue(rooms.isConnected("rooma"), "the call still runs")
        XCTAssertEqual(afterCall.runs, inCall.runs, "no check during the call")
        XCTAssertGreaterThan(afterCall.postponed, inCall.postponed, "the due check waited")
        XCTAssertEqual(try rooms.control("rooma", .perform(.hangUp)), .success(.done))
        XCTAssertTrue(rooms.wait(10) { (selfTest()?.runs ?? 0) > afterCall.runs }, "a check after the call: \(String(describing: selfTest()))")
        XCTAssertEqual(selfTest()?.last?.passed, true)
        XCTAssertEqual(selfTest()?.failures, 0)
    }

    /// A terminal whose microphone does not hear its speaker (it records another room, where
    /// nothing plays) fails its check: the failure and its reason in `stats` and the metrics, and
    /// the fault light blinks.
    func testAFailedCheckIsCountedNamedAndLightsTheFaultLight() throws {
        try Rig.require()
        let dir = try Repo.scratchFolder("selftest-fail")
        let leds = "\(dir)/leds"
        try TerminalLightsRigTests.makeLEDs(leds)
        let metricsPort = try FreePort.udp()
        let config = try DaemonProcess.writeConfig("""
            [audio]
            capture_device = "roomB"
            playback_device = "roomA"
            [log]
            stats_interval_s = 0
            [network]
            listen_port = 0
            [control]
            socket = "\(dir)/ctl.sock"
            \(DaemonProcess.labMode)
            [selftest]
            interval_s = 2
            [metrics]
            listen = "127.0.0.1:\(metricsPort)"
            [lights]
            led_dir = "\(leds)"
            [lights.map]
            fault = { led = "red", pattern = "fast_blink" }
            """)
        let d = try DaemonProcess(arguments: ["--config", config], name: "intercomd-deaf")
        defer { _ = d.terminate() }
        XCTAssertTrue(d.waitUntilRunning(timeout: 10), d.log)
        func selfTest() -> DaemonStatistics.SelfTest? { try? d.statistics().selfTest }
        XCTAssertTrue(waitUntil(10) { (selfTest()?.runs ?? 0) >= 1 }, "a check ran: \(String(describing: selfTest()))")
        let check = try XCTUnwrap(selfTest()?.last)
        print("self-test, deaf microphone: passed \(check.passed), problems \(check.problems)")
        XCTAssertFalse(check.passed, "a microphone that does not hear the speaker fails")
        XCTAssertTrue(check.problems.contains { $0.contains("microphone is silent") || $0.contains("not heard") }, "and says why: \(check.problems)")
        XCTAssertEqual(selfTest()?.failures, selfTest()?.runs, "every check failed")
        let scrape = try SiteServiceProcess.run(["/usr/bin/curl", "-s", "-m", "5", "http://127.0.0.1:\(metricsPort)/metrics"]).out
        XCTAssertTrue(scrape.contains("intercom_selftest_passed 0.0"), "the metrics say it failed")
        func red(_ a: String) -> String { ((try? String(contentsOfFile: "\(leds)/red/\(a)", encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines) }
        XCTAssertTrue(waitUntil(2) { red("trigger") == "timer" && red("delay_on") == "125" }, "the fault light blinks fast: trigger \(red("trigger")), on \(red("delay_on")) ms")
    }
}
