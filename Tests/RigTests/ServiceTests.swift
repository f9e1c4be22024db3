import Calls
import Control
import Foundation
import Glibc
import TestSupport
import XCTest

/// intercomd as systemd runs it, with the test as the service manager: the notification socket
/// is the test's own (sd_notify's protocol), the watchdog interval is 1 s, signals come from here.
final class ServiceTests: XCTestCase {
    /// The notifications a daemon sent, collected by a thread of the test.
    final class NotifySocket: @unchecked Sendable {
        let path = NSTemporaryDirectory() + "notify-\(UUID().uuidString.prefix(8)).sock"
        private let fd: Int32
        private let lock = NSLock()
        private var received: [(time: Double, text: String)] = []
        private var open = true

        init() throws {
            fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
            var a = sockaddr_un()
            a.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &a.sun_path) { p in for (i, b) in path.utf8.enumerated() { p[i] = b } }
            let rc = withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
            guard rc == 0 else { throw RigError(description: "bind \(path): errno \(errno)") }
            var tv = timeval(tv_sec: 0, tv_usec: 200_000)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
            Thread { [self] in
                var buffer = [UInt8](repeating: 0, count: 4096)
                while lock.withLock({ open }) {
                    let n = recv(fd, &buffer, buffer.count, 0)
                    if n > 0 {
                        let text = String(decoding: buffer[0..<n], as: UTF8.self)
                        lock.withLock { received.append((Date().timeIntervalSince1970, text)) }
                    }
                }
            }.start()
        }

        func close() {
            lock.withLock { open = false }
            usleep(300_000)
            Glibc.close(fd)
            unlink(path)
        }

        var all: [(time: Double, text: String)] { lock.withLock { received } }
        func count(_ line: String, since: Double = 0) -> Int {
            all.filter { $0.time >= since && $0.text.split(separator: "\n").contains(Substring(line)) }.count
        }
        /// STATUS= texts, oldest first.
        var statuses: [String] {
            all.flatMap { $0.text.split(separator: "\n") }.filter { $0.hasPrefix("STATUS=") }.map { String($0.dropFirst(7)) }
        }
        func wait(_ timeout: Double, _ condition: () -> Bool) -> Bool {
            let until = Date().addingTimeInterval(timeout)
            while Date() < until { if condition() { return true }; usleep(50_000) }
            return condition()
        }
    }

    /// Ready once audio and sockets are up; STATUS follows the call; WATCHDOG=1 stops while the
    /// audio thread is stalled (the sound server frozen) and resumes after; SIGHUP applies the
    /// live parts of a changed file, names the rest, survives a broken file, and defers call
    /// settings during a call; SIGTERM in a call makes the other room see this one leave.
    func testSystemdNotifyWatchdogFollowsTheAudioThreadReloadAppliesLivePartsAndStopLeavesTheCall() throws {
        try Rig.require()
        let notify = try NotifySocket()
        defer { notify.close() }
        let rooms = try CallRooms(["roomA", "roomB"])
        defer { rooms.stopAll() }
        try rooms.start("rooma")
        let b = try rooms.start("roomb", environment: ["NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "1000000"])
        let configPath = try XCTUnwrap(b.process.arguments?.last)

        // Ready, with a status a person can read, and fed watchdog.
        XCTAssertTrue(notify.wait(8) { notify.count("READY=1") == 1 }, "READY=1: \(notify.all) \(b.log)")
        XCTAssertTrue(b.log.contains("audio thread"), "ready comes after the audio thread started")
        XCTAssertTrue(notify.statuses.first?.contains("room roomb: idle") == true, "\(notify.statuses)")
        XCTAssertTrue(notify.statuses.first?.contains("audio running") == true, "\(notify.statuses)")
        // Counted once the audio thread makes progress: ready comes when it started, and a new
        // stream of the rig's sound server may take a second to move (2 pings in 2 s under
        // emulated host stalls, scripts/host-stalls.sh, counted from ready).
        XCTAssertNotNil(b.waitForStatistics(timeout: 5) { $0.audio.frames >= 50 }, "the audio thread makes progress: \(b.log)")
        let t0 = Date().timeIntervalSince1970
        Thread.sleep(forTimeInterval: 2)
        let pings = notify.count("WATCHDOG=1", since: t0)
        XCTAssertGreaterThanOrEqual(pings, 3, "every 0.5 s while audio runs")

        // Reload while idle: a new button is live, the period change waits for a restart.
        let original = try String(contentsOfFile: configPath, encoding: .utf8)
        try (original + "\n[buttons.both]\nrooms = [\"rooma\"]\n").replacingOccurrences(of: "[audio]\n", with: "[audio]\nperiod_ms = 5\n")
            .write(toFile: configPath, atomically: true, encoding: .utf8)
        kill(b.process.processIdentifier, SIGHUP)
        let reloaded = b.waitForStatistics(timeout: 3) { $0.reload.count == 1 }?.reload
        XCTAssertEqual(reloaded?.applied, ["buttons"], b.log)
        XCTAssertEqual(reloaded?.restartNeeded, ["audio.period_ms"], b.log)
        XCTAssertTrue(notify.wait(2) { notify.count("RELOADING=1") == 1 && notify.count("READY=1") == 2 }, "\(notify.all)")
        guard case .success(.rooms(let directory)) = try rooms.control("roomb", .rooms) else { return XCTFail("rooms") }
        XCTAssertTrue(directory.buttons.contains { $0.name == "both" }, "the new button is live: \(directory.buttons)")

        // A broken file changes nothing and stops nothing.
        try (original + "\n[mixer]\nmic_gain_db = 99\n").write(toFile: configPath, atomically: true, encoding: .utf8)
        kill(b.process.processIdentifier, SIGHUP)
        let refused = b.waitForStatistics(timeout: 3) { $0.reload.failed == 1 }?.reload
        XCTAssertEqual(refused?.count, 1, "the configuration is unchanged: \(b.log)")
        XCTAssertTrue(refused?.lastError?.contains("mixer.mic_gain_db") == true, "the key is named: \(String(describing: refused))")
        XCTAssertNotNil(rooms.status("roomb"), "still answering")

        // In a call: the status says so.
        _ = try rooms.control("rooma", .perform(.call(button: "roomb")))
        XCTAssertTrue(rooms.wait(5) { rooms.isConnected("rooma") && rooms.isConnected("roomb") })
        XCTAssertTrue(notify.wait(3) { notify.statuses.last?.contains("in a call with rooma") == true }, "\(notify.statuses)")

        // Call settings reloaded during the call wait for its end.
        try original.write(toFile: configPath, atomically: true, encoding: .utf8)
        kill(b.process.processIdentifier, SIGHUP)
        let deferred = b.waitForStatistics(timeout: 3) { $0.reload.count == 2 }?.reload
        XCTAssertEqual(deferred?.waitingForCallEnd, ["buttons"], "the button goes when the call ends: \(b.log)")
        XCTAssertEqual(deferred?.applied, [], b.log)

        // The audio thread stalls (its sound server frozen): no WATCHDOG=1 while it lasts.
        let pulse = try XCTUnwrap(Rig.soundServerPID, "the rig's pulseaudio pid")
        kill(pulse, SIGSTOP)
        defer { try? Rig.restart() }  // a fresh rig for the tests after this one
        Thread.sleep(forTimeInterval: 1.0)  // the last frames drain, the health thread notices
        let frozen = Date().timeIntervalSince1970
        Thread.sleep(forTimeInterval: 2.0)
        let pingsFrozen = notify.count("WATCHDOG=1", since: frozen)
        let stalledStatus = notify.statuses.contains { $0.hasPrefix("audio stalled") }
        kill(pulse, SIGCONT)
        XCTAssertEqual(pingsFrozen, 0, "no watchdog while the audio thread is stalled")
        XCTAssertTrue(stalledStatus, "\(notify.statuses)")
        let thawed = Date().timeIntervalSince1970
        XCTAssertTrue(notify.wait(5) { notify.count("WATCHDOG=1", since: thawed) >= 2 }, "fed again once audio runs: \(b.log)")

        // A clean stop ends the call: A sees B leave, not vanish.
        XCTAssertTrue(rooms.wait(5) { rooms.isConnected("rooma") && rooms.isConnected("roomb") }, "the call survived the stall")
        let stopAt = Date()
        XCTAssertEqual(rooms.stop("roomb"), 0)
        XCTAssertTrue(notify.count("STOPPING=1") == 1, "\(notify.all)")
        XCTAssertTrue(rooms.wait(1) { rooms.isIdle("rooma") }, "A's call ended at once, not after the silence timeout")
        let last = rooms.history("rooma").last
        XCTAssertEqual(last?.participants.first?.status, .left, "A sees B leave: \(String(describing: last))")
        print(String(format: "service: %d watchdog pings in 2 s, 0 while stalled, call ended %.2f s after SIGTERM; statuses: %@",
                     pings, Date().timeIntervalSince(stopAt), notify.statuses.suffix(3).joined(separator: " | ")))
    }
}
