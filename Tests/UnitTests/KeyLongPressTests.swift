@testable import Keys
import Foundation
import Glibc
import XCTest

/// Long and short presses of one key: the filter's decisions on a simulated clock, then the real
/// reader on a FIFO with a real hold.
final class KeyLongPressTests: XCTestCase {
    private let key: UInt16 = 59        // KEY_F1: short = call button 1, long = call back
    private let longOnly: UInt16 = 60   // KEY_F2: only a long action
    private let plain: UInt16 = 61      // KEY_F3: only a short action
    private var map: KeyMap {
        KeyMap([key: .callButton(1), plain: .perform(.hangUp)], long: [key: .perform(.callBack), longOnly: .perform(.acknowledge(all: true))])
    }
    private let ms: Int64 = 1000

    private func event(_ code: UInt16, _ value: Int32) -> InputEvent {
        InputEvent(type: InputEvent.keyType, code: code, value: value)
    }

    /// Feeds `events` at their times (ms) and ticks every ms up to `until`; returns the decisions with their times.
    private func run(_ events: [(Int64, UInt16, Int32)], until: Int64, debounce: Int = 30, long: Int = 800)
        -> [(ms: Int64, KeyFilter.Decision)] {
        var f = KeyFilter(map: map, debounce: .milliseconds(debounce), longPress: .milliseconds(long))
        var out: [(Int64, KeyFilter.Decision)] = []
        var pending = events[...]
        for t in 0...until {
            while let e = pending.first, e.0 == t {
                _ = f.handle(event(e.1, e.2), arrivalMicroseconds: t * ms)
                pending = pending.dropFirst()
            }
            if let d = f.nextDeadline { XCTAssertGreaterThan(d, t * ms - ms, "a deadline left in the past") }
            for d in f.due(now: t * ms) { out.append((t, d)) }
        }
        return out
    }

    func testAShortTapFiresTheShortActionOnceTheReleaseIsNoBounce() {
        let d = run([(100, key, InputEvent.press), (250, key, InputEvent.release)], until: 2000)
        XCTAssertEqual(d.map(\.1), [.init(code: key, action: .callButton(1), long: false)])
        XCTAssertEqual(d.first?.ms, 280, "decided one debounce window after the release")
    }

    func testAHoldFiresTheLongActionAtTheThresholdWhileStillHeldAndNothingOnRelease() {
        let d = run([(100, key, InputEvent.press), (500, key, InputEvent.autorepeat), (2000, key, InputEvent.release)], until: 3000)
        XCTAssertEqual(d.map(\.1), [.init(code: key, action: .perform(.callBack), long: true)])
        XCTAssertEqual(d.first?.ms, 900)
    }

    func testContactBounceDuringAHoldDoesNotCutItShort() {
        // Down, a 5 ms opening, down again, held past the threshold.
        let d = run([(100, key, InputEvent.press), (110, key, InputEvent.release), (115, key, InputEvent.press),
                     (1200, key, InputEvent.release), (1205, key, InputEvent.press), (1210, key, InputEvent.release)], until: 3000)
        XCTAssertEqual(d.map(\.1), [.init(code: key, action: .perform(.callBack), long: true)],
                       "one long press: the bounce on the way down continues the hold, the one on the way up is ignored")
    }

    func testLetGoJustBeforeTheThresholdIsShort() {
        let d = run([(0, key, InputEvent.press), (799, key, InputEvent.release)], until: 2000)
        XCTAssertEqual(d.map(\.1), [.init(code: key, action: .callButton(1), long: false)])
    }

    func testAKeyWithOnlyALongActionReportsAShortPressAsDoingNothing() {
        let d = run([(0, longOnly, InputEvent.press), (100, longOnly, InputEvent.release),
                     (500, longOnly, InputEvent.press), (1400, longOnly, InputEvent.release)], until: 2000)
        XCTAssertEqual(d.map(\.1), [.init(code: longOnly, action: nil, long: false),
                                    .init(code: longOnly, action: .perform(.acknowledge(all: true)), long: true)])
    }

    func testKeysWithoutALongActionStillFireOnTheWayDown() {
        var f = KeyFilter(map: map, debounce: .milliseconds(30), longPress: .milliseconds(800))
        XCTAssertEqual(f.handle(event(plain, InputEvent.press), arrivalMicroseconds: 0), .action(.perform(.hangUp)))
        XCTAssertEqual(f.handle(event(key, InputEvent.press), arrivalMicroseconds: 0), .held)
        XCTAssertNil(f.due(now: 0).first)
    }

    func testTwoKeysHeldTogetherAreDecidedEachOnItsOwn() {
        let d = run([(0, key, InputEvent.press), (100, longOnly, InputEvent.press), (300, key, InputEvent.release),
                     (1000, longOnly, InputEvent.release)], until: 2000)
        XCTAssertEqual(d.map(\.1), [.init(code: key, action: .callButton(1), long: false),
                                    .init(code: longOnly, action: .perform(.acknowledge(all: true)), long: true)])
        XCTAssertEqual(d.map(\.ms), [330, 900])
    }

    func testALostDeviceForgetsHeldKeys() {
        var f = KeyFilter(map: map, debounce: .milliseconds(30), longPress: .milliseconds(800))
        _ = f.handle(event(key, InputEvent.press), arrivalMicroseconds: 0)
        f.reset()
        XCTAssertNil(f.nextDeadline)
        XCTAssertEqual(f.due(now: 10_000 * ms), [])
    }

    /// The reader thread on a real FIFO: a tap and a real 0.5 s hold against a 300 ms threshold.
    func testTheReaderDecidesShortAndLongPressesOnItsOwnTimer() throws {
        signal(SIGPIPE, SIG_IGN)
        let dir = NSTemporaryDirectory() + "keys-long-\(getpid())-\(UInt32.random(in: .min ... .max))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let fifo = dir + "/event0"
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        let c = KeyCollector()
        let reader = try KeyReader(settings: KeyReaderSettings(path: fifo, map: map, debounce: .milliseconds(30), longPress: .milliseconds(300)),
                                   onPress: c.onPress, onEvent: c.onEvent)
        defer { reader.stop() }
        let w = try FIFOWriter(path: fifo)
        defer { w.close() }
        w.write([event(key, InputEvent.press), event(key, InputEvent.release)])
        XCTAssertEqual(c.waitForActions(1), [.callButton(1)])
        let down = Date()
        w.write([event(key, InputEvent.press)])
        XCTAssertEqual(c.waitForActions(2), [.callButton(1), .perform(.callBack)], "the long action fires while the key is down")
        let fired = Date().timeIntervalSince(down)
        XCTAssertGreaterThanOrEqual(fired, 0.3)
        usleep(200_000)
        w.write([event(key, InputEvent.release), event(plain, InputEvent.press), event(plain, InputEvent.release)])
        XCTAssertEqual(c.waitForActions(3), [.callButton(1), .perform(.callBack), .perform(.hangUp)])
        XCTAssertEqual(c.allPresses.map(\.long), [false, true, false])
        XCTAssertEqual(reader.stats.longPresses, 1)
        XCTAssertEqual(reader.stats.actions, 3)
    }
}
