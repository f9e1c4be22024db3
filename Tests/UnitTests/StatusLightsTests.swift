import Foundation
import Lights
import Synchronization
import XCTest

/// The status lights: the plan's priorities, and the lights thread writing a real folder laid out
/// like /sys/class/leds (an LED whose kernel has the timer trigger, and one without, which the
/// thread blinks itself); libgpiod refusing a chip that is not there.
final class StatusLightsTests: XCTestCase {
    private var dir = ""

    override func setUpWithError() throws {
        dir = NSTemporaryDirectory() + "leds-\(getpid())-\(UInt32.random(in: .min ... .max))"
        // green: the timer trigger's attributes exist (as after choosing it on a real LED); red: no timer trigger.
        for (led, files) in [("green", ["brightness", "trigger", "delay_on", "delay_off"]), ("red", ["brightness", "trigger"])] {
            try FileManager.default.createDirectory(atPath: "\(dir)/\(led)", withIntermediateDirectories: true)
            for f in files { try "0\n".write(toFile: "\(dir)/\(led)/\(f)", atomically: false, encoding: .utf8) }
        }
        try "255\n".write(toFile: "\(dir)/green/max_brightness", atomically: false, encoding: .utf8)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(atPath: dir) }

    private func read(_ led: String, _ attribute: String) -> String {
        ((try? String(contentsOfFile: "\(dir)/\(led)/\(attribute)", encoding: .utf8)) ?? "?").trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private let rules: [LightState: LightRule] = [
        .fault: LightRule(led: "red", pattern: .fastBlink),
        .ringing: LightRule(led: "green", pattern: .fastBlink),
        .inCall: LightRule(led: "green", pattern: .steady),
        .micMuted: LightRule(led: "red", pattern: .steady),
        .missedCall: LightRule(led: "green", pattern: .slowBlink),
    ]

    func testTheFirstActiveStateInPriorityOrderShowsOnASharedLED() {
        let plan = LightPlan(rules: rules)
        XCTAssertEqual(plan.leds, ["green", "red"])
        XCTAssertEqual(plan.resolve([]), ["green": .dark, "red": .dark])
        XCTAssertEqual(plan.resolve([.inCall, .missedCall])["green"], LightShown(pattern: .steady, state: .inCall))
        XCTAssertEqual(plan.resolve([.ringing, .inCall])["green"], LightShown(pattern: .fastBlink, state: .ringing))
        XCTAssertEqual(plan.resolve([.micMuted, .fault])["red"], LightShown(pattern: .fastBlink, state: .fault))
        XCTAssertEqual(plan.resolve([.doNotDisturb])["green"], .dark, "a state no rule names shows nowhere")
        XCTAssertEqual(LightState.allCases.sorted(), LightState.allCases)
    }

    func testTheLightsThreadWritesEachLEDAndBlinksTheOneTheKernelCannot() throws {
        let states = Mutex<Set<LightState>>([])
        let problems = Mutex<[LightError]>([])
        let lights = try StatusLights(settings: LightsSettings(plan: LightPlan(rules: rules), ledDirectory: dir, pollInterval: 0.05),
                                      inputs: { states.withLock { $0 } }, onProblem: { e in problems.withLock { $0.append(e) } })
        try lights.start()
        defer { lights.stop() }
        func set(_ s: Set<LightState>) { states.withLock { $0 = s }; lights.changed() }
        // One reading decides: read again, a plain file can be caught between the writer's
        // truncate and its write.
        func until(_ what: String, _ condition: () -> Bool) {
            let deadline = Date().addingTimeInterval(3)
            var met = condition()
            while !met, Date() < deadline { usleep(2000); met = condition() }
            XCTAssertTrue(met, what)
        }
        until("both dark at start") { read("green", "trigger") == "none" && read("green", "brightness") == "0" && read("red", "trigger") == "none" }

        set([.inCall])
        until("in call: green steady at max_brightness") { read("green", "trigger") == "none" && read("green", "brightness") == "255" }
        set([.ringing])
        until("ringing: green on the kernel's timer, 125/125 ms") {
            read("green", "trigger") == "timer" && read("green", "delay_on") == "125" && read("green", "delay_off") == "125"
        }
        XCTAssertEqual(lights.report.first { $0.led == "green" }?.shown, LightShown(pattern: .fastBlink, state: .ringing))

        // Red has no timer trigger: the thread toggles its brightness itself, 4 times a second.
        set([.fault])
        var seen: [String] = []
        let start = Date()
        while Date().timeIntervalSince(start) < 1.1 {
            // A read between the writer's truncate and its write sees "" (a plain file; sysfs has no such moment).
            let b = read("red", "brightness")
            if !b.isEmpty, seen.last != b { seen.append(b) }
            usleep(5000)
        }
        XCTAssertEqual(read("red", "trigger"), "none")
        XCTAssertGreaterThanOrEqual(seen.count, 5, "about 8 phase changes in 1.1 s at 4 Hz: \(seen)")
        XCTAssertLessThanOrEqual(seen.count, 11, "\(seen)")
        XCTAssertEqual(Set(seen), ["0", "1"], "max_brightness missing: 1")

        set([.micMuted])
        until("muted: red steady") {
            read("red", "trigger") == "none" && read("red", "brightness") == "1"
        }
        usleep(400_000)
        XCTAssertEqual(read("red", "brightness"), "1", "no blink left running")
        set([])
        until("all dark again") { read("red", "brightness") == "0" && read("green", "brightness") == "0" && read("green", "trigger") == "none" }
        XCTAssertEqual(problems.withLock { $0 }, [], "the timer trigger missing on red is no problem, only a software blink")
    }

    func testAMissingLEDAndAMissingGPIOChipAreNamedAndTheOtherLEDsStillWork() throws {
        let problems = Mutex<[LightError]>([])
        let plan = LightPlan(rules: [.inCall: LightRule(led: "green", pattern: .steady), .ringing: LightRule(led: "blue", pattern: .steady),
                                     .calling: LightRule(led: "amber", pattern: .steady)])
        let lights = try StatusLights(
            settings: LightsSettings(plan: plan, ledDirectory: dir, gpioLines: ["amber": 5], gpioChip: "/nonexistent/gpiochip9", pollInterval: 0.05),
            inputs: { [.inCall, .ringing, .calling] }, onProblem: { e in problems.withLock { $0.append(e) } })
        try lights.start()
        defer { lights.stop() }
        let deadline = Date().addingTimeInterval(3)
        while read("green", "brightness") != "255", Date() < deadline { usleep(2000) }
        XCTAssertEqual(read("green", "brightness"), "255")
        let found = problems.withLock { $0 }
        XCTAssertEqual(found.map(\.led).sorted(), ["amber", "blue"])
        XCTAssertTrue(found.first { $0.led == "blue" }?.problem.contains("\(dir)/blue: No such file or directory") == true, "\(found)")
        XCTAssertTrue(found.first { $0.led == "amber" }?.problem.contains("gpiod_chip_open_lookup: No such file or directory") == true, "\(found)")
        XCTAssertEqual(lights.report.first { $0.led == "blue" }?.shown.state, .ringing, "the report says what it should show")
        XCTAssertNotNil(lights.report.first { $0.led == "blue" }?.problem)
    }
}
