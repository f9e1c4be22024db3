import Control
import Foundation
import Synchronization
import TestSupport
import XCTest

/// Status lights and the long press through real daemons on the rig. Room B's LEDs are a folder
/// laid out like /sys/class/leds: green and red have the kernel's timer trigger (its delay_on and
/// delay_off attributes), yellow has not, so the daemon blinks it itself. A watcher reads the
/// folder every few milliseconds and keeps each LED's distinct views in order.
final class TerminalLightsRigTests: XCTestCase {
    /// What an LED shows, read from its folder: "timer on/off" while the kernel blinks it, else its brightness.
    private static func view(_ folder: String) -> String? {
        func read(_ a: String) -> String? {
            let s = (try? String(contentsOfFile: "\(folder)/\(a)", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
            return s?.isEmpty == false ? s : nil  // "" between a writer's truncate and its write: no view
        }
        guard let trigger = read("trigger") else { return nil }
        if trigger == "timer" {
            guard let on = read("delay_on"), let off = read("delay_off") else { return nil }
            return "timer \(on)/\(off)"
        }
        return read("brightness")
    }

    /// Keeps every LED's sequence of distinct views until stopped. A view counts once two reads
    /// 3 ms apart agree: the daemon writes trigger, delay_on, delay_off one after the other, and a
    /// read between those writes sees a mix that no LED ever showed.
    private final class Watcher: @unchecked Sendable {
        let views = Mutex<[String: [String]]>([:])
        private let stopFlag = Mutex(false)
        private var thread: Thread?

        init(dir: String, leds: [String]) {
            let t = Thread { [self] in
                var previous: [String: String] = [:]
                while !stopFlag.withLock({ $0 }) {
                    for led in leds {
                        guard let v = TerminalLightsRigTests.view("\(dir)/\(led)") else { continue }
                        defer { previous[led] = v }
                        guard previous[led] == v else { continue }
                        views.withLock { all in if all[led]?.last != v { all[led, default: []].append(v) } }
                    }
                    usleep(3000)
                }
            }
            thread = t
            t.start()
        }

        func stop() { stopFlag.withLock { $0 = true }; usleep(20_000) }
        func sequence(_ led: String) -> [String] { views.withLock { $0[led] ?? [] } }
    }

    /// An LED class folder with green, red (the kernel's timer trigger) and yellow.
    static func makeLEDs(_ dir: String) throws {
        for (led, timer) in [("green", true), ("red", true), ("yellow", false)] {
            try FileManager.default.createDirectory(atPath: "\(dir)/\(led)", withIntermediateDirectories: true)
            for f in ["brightness", "trigger"] + (timer ? ["delay_on", "delay_off"] : []) {
                try "0\n".write(toFile: "\(dir)/\(led)/\(f)", atomically: false, encoding: .utf8)
            }
        }
        try "255\n".write(toFile: "\(dir)/green/max_brightness", atomically: false, encoding: .utf8)
    }

    func testTheLEDFolderShowsEachStateInOrderAndALongPressCallsBack() throws {
        try Rig.require()
        let rooms = try CallRooms(["roomA", "roomB"])
        defer { rooms.stopAll() }
        let leds = "\(rooms.dir)/leds"
        try Self.makeLEDs(leds)
        let watcher = Watcher(dir: leds, leds: ["green", "red", "yellow"])
        defer { watcher.stop() }
        let fifo = "\(rooms.dir)/roomB-keys"
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        let bExtra = """
            [keys]
            device = "\(fifo)"
            long_press_ms = 600
            [keys.map]
            KEY_1 = "answer"
            [keys.long_map]
            KEY_1 = "call_back"
            [lights]
            led_dir = "\(leds)"
            [lights.map]
            fault = { led = "red", pattern = "fast_blink" }
            mic_muted = { led = "red" }
            ringing = { led = "green", pattern = "fast_blink" }
            calling = { led = "green", pattern = "slow_blink" }
            in_call = { led = "green" }
            missed_call = { led = "yellow", pattern = "slow_blink" }
            dnd = { led = "yellow" }
            """
        // B first, alone: nobody to reach is a fault until A is online.
        try rooms.start("roomb", calls: "auto_answer = false\nanswer_timeout_ms = 2500\nmissed_reminder_s = 0", extra: bExtra)
        XCTAssertTrue(rooms.wait(3) { watcher.sequence("red").last == "timer 125/125" }, "fault while A is offline: \(watcher.sequence("red"))")
        XCTAssertEqual(rooms.status("roomb")?.lights.first { $0.led == "red" }, StatusLight(led: "red", pattern: "fast_blink", state: "fault"))
        try rooms.start("rooma")
        XCTAssertTrue(rooms.waitOnline("roomb", ["rooma"]))
        XCTAssertTrue(rooms.wait(3) { watcher.sequence("red").last == "0" }, "fault cleared once A is online")
        let keys = try FIFOKeyWriter(path: fifo)
        func green(_ pattern: String, _ state: String?) -> Bool {
            rooms.status("roomb")?.lights.first { $0.led == "green" } == StatusLight(led: "green", pattern: pattern, state: state)
        }
        func hold() { Thread.sleep(forTimeInterval: 0.4) }

        // A calls, B rings (fast blink) and answers with a short press; mute lights red.
        _ = try rooms.control("rooma", .perform(.call(button: "roomb")))
        XCTAssertTrue(rooms.wait(3) { green("fast_blink", "ringing") })
        hold()
        keys.press(2)  // KEY_1 short: answer
        XCTAssertTrue(rooms.wait(3) { rooms.isConnected("roomb") }, "answered by a short press")
        XCTAssertTrue(rooms.wait(2) { green("steady", "in_call") })
        hold()
        _ = try rooms.control("roomb", .perform(.setMicrophoneMuted(true)))
        hold()
        _ = try rooms.control("roomb", .perform(.setMicrophoneMuted(false)))
        hold()
        _ = try rooms.control("rooma", .perform(.hangUp))
        XCTAssertTrue(rooms.wait(3) { rooms.isIdle("roomb") })
        hold()

        // A calls again; nobody answers: a missed call blinks yellow (the daemon's own blink).
        _ = try rooms.control("rooma", .perform(.call(button: "roomb")))
        XCTAssertTrue(rooms.wait(3) { green("fast_blink", "ringing") })
        XCTAssertTrue(rooms.wait(5) { rooms.isIdle("roomb") && rooms.isIdle("rooma") }, "the ring timeout ends the call")
        XCTAssertEqual(rooms.status("roomb")?.missedCalls, 1)
        // The lights thread resolves the new state when the calls side wakes it, a moment after the
        // call ended (CI read it off once right after the status said idle).
        let yellow = StatusLight(led: "yellow", pattern: "slow_blink", state: "missed_call")
        XCTAssertTrue(rooms.wait(1) { rooms.status("roomb")?.lights.first { $0.led == "yellow" } == yellow },
                      "\(String(describing: rooms.status("roomb")?.lights))")
        Thread.sleep(forTimeInterval: 2.2)
        let blinks = watcher.sequence("yellow")
        XCTAssertGreaterThanOrEqual(blinks.filter { $0 == "1" }.count, 2, "yellow blinks by brightness (no timer trigger): \(blinks)")

        // A long press calls back: B calls A (slow blink), A answers by itself (in call).
        keys.hold(2, seconds: 0.9)  // KEY_1 long: call back
        XCTAssertTrue(rooms.wait(3) { rooms.status("roomb")?.call?.participants.map(\.room.value) == ["rooma"] }, "the long press called back A")
        XCTAssertTrue(rooms.wait(5) { rooms.isConnected("roomb") })
        hold()
        _ = try rooms.control("roomb", .perform(.hangUp))
        XCTAssertTrue(rooms.wait(3) { rooms.isIdle("roomb") })
        hold()

        // Acknowledged, the blinking stops; do-not-disturb lights yellow steadily.
        _ = try rooms.control("roomb", .perform(.acknowledge(all: true)))
        XCTAssertTrue(rooms.wait(2) { watcher.sequence("yellow").last == "0" })
        hold()
        let beforeDND = watcher.sequence("yellow").count
        _ = try rooms.control("roomb", .perform(.setDoNotDisturb(true)))
        Thread.sleep(forTimeInterval: 1.5)
        XCTAssertEqual(Array(watcher.sequence("yellow").dropFirst(beforeDND)), ["1"], "steady through 1.5 s")
        _ = try rooms.control("roomb", .perform(.setDoNotDisturb(false)))
        XCTAssertTrue(rooms.wait(2) { watcher.sequence("yellow").last == "0" })
        hold()
        watcher.stop()

        XCTAssertEqual(watcher.sequence("green"),
                       ["0", "timer 125/125", "255", "0", "timer 125/125", "0", "timer 500/500", "255", "0"],
                       "ringing, in call, idle; ringing, missed; calling back, in call, idle")
        XCTAssertEqual(watcher.sequence("red"), ["0", "timer 125/125", "0", "1", "0"], "fault until A is online; muted, unmuted")
        XCTAssertEqual(watcher.sequence("yellow").suffix(3), ["0", "1", "0"], "acknowledged; dnd on, off")
        XCTAssertEqual(watcher.sequence("yellow").first, "0")
    }

    /// Without any call configuration, a capture device that cannot be opened is a fault.
    func testAnAudioDeviceThatDoesNotOpenShowsAsAFault() throws {
        let dir = NSTemporaryDirectory() + "leds-audio-\(getpid())-\(UInt32.random(in: .min ... .max))"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try Self.makeLEDs(dir)
        let config = try DaemonProcess.writeConfig("""
            [audio]
            capture_device = "intercomd_no_such_device"
            playback_device = "intercomd_no_such_device"
            [network]
            listen_port = 0
            [control]
            socket = "\(dir).sock"
            [lights]
            led_dir = "\(dir)"
            [lights.map]
            fault = { led = "red", pattern = "fast_blink" }
            """)
        let d = try DaemonProcess(arguments: ["--config", config], name: "intercomd-audio-fault")
        defer { _ = d.terminate() }
        let deadline = Date().addingTimeInterval(5)
        while Self.view("\(dir)/red") != "timer 125/125", Date() < deadline { usleep(10_000) }
        XCTAssertEqual(Self.view("\(dir)/red"), "timer 125/125", "red blinks fast while the device does not open: \(d.log)")
        // Not only the moment before the first open: it stays while the daemon retries.
        Thread.sleep(forTimeInterval: 1.5)
        XCTAssertEqual(Self.view("\(dir)/red"), "timer 125/125", "still a fault 1.5 s later")
        XCTAssertEqual(d.terminate(), 0)
        XCTAssertEqual(Self.view("\(dir)/red"), "0", "a stopped daemon leaves its lights dark")
    }
}
