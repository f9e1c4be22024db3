import Foundation
import Glibc
import Keys
import XCTest

/// The key reader on real FIFOs carrying raw `struct input_event` records.
final class KeyReaderTests: XCTestCase {
    private var directory = ""
    private var fifo = ""
    private var reader: KeyReader?

    // Linux codes (input-event-codes.h) for the mapped keys, and one nobody mapped.
    private let callKey: UInt16 = 59 // KEY_F1
    private let hangUpKey: UInt16 = 60 // KEY_F2
    private let sentinelKey: UInt16 = 61 // KEY_F3: pressed last, proves everything before it was handled
    private let unmappedKey: UInt16 = 30 // KEY_A
    private var map: KeyMap {
        KeyMap([callKey: .callButton(1), hangUpKey: .perform(.hangUp), sentinelKey: .perform(.toggleMicrophoneMute)])
    }

    override func setUpWithError() throws {
        signal(SIGPIPE, SIG_IGN) // a FIFO write racing the reader's close must fail, not kill the tests
        directory = NSTemporaryDirectory() + "keys-\(getpid())-\(UInt32.random(in: .min ... .max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        fifo = directory + "/event0"
        XCTAssertEqual(mkfifo(fifo, 0o600), 0, String(cString: strerror(errno)))
    }

    override func tearDownWithError() throws {
        reader?.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func start(_ collector: KeyCollector, debounceMilliseconds: Int = 50,
                       reopenFirstDelay: Double = 0.02, reopenMaxDelay: Double = 0.1,
                       pathCheckInterval: Double = 0.05) throws {
        let settings = KeyReaderSettings(path: fifo, map: map, debounce: .milliseconds(debounceMilliseconds),
                                         reopenFirstDelay: reopenFirstDelay, reopenMaxDelay: reopenMaxDelay,
                                         pathCheckInterval: pathCheckInterval)
        reader = try KeyReader(settings: settings, onPress: collector.onPress, onEvent: collector.onEvent)
    }

    /// Press and release of `code` at `time`, with the EV_SYN a real device sends after each.
    private func tap(_ code: UInt16, at time: Double) -> [InputEvent] {
        let sync = { (t: Double) in InputEvent(seconds: Int(t), type: 0, code: 0, value: 0) }
        return [.key(code, InputEvent.press, at: time), sync(time),
                .key(code, InputEvent.release, at: time + 0.01), sync(time + 0.01)]
    }

    func testRecordLayoutIsTheKernels() {
        // timeval (two longs) + type + code + value.
        XCTAssertEqual(InputEvent.size, 2 * MemoryLayout<Int>.size + 2 + 2 + 4)
        let e = InputEvent(seconds: 1_700_000_000, microseconds: 123_456, type: 1, code: 59, value: 1)
        let bytes = e.encoded()
        XCTAssertEqual(bytes.count, InputEvent.size)
        XCTAssertEqual(bytes.withUnsafeBytes { InputEvent(decoding: $0) }, e)
    }

    func testPressMapsToItsActionWhileReleaseAndAutorepeatAreIgnored() throws {
        let c = KeyCollector()
        try start(c)
        let w = try FIFOWriter(path: fifo)
        defer { w.close() }
        w.write([.key(callKey, InputEvent.press, at: 100), .key(callKey, InputEvent.autorepeat, at: 100.3),
                 .key(callKey, InputEvent.autorepeat, at: 100.4), .key(callKey, InputEvent.release, at: 100.5)])
        w.write(tap(hangUpKey, at: 101) + tap(sentinelKey, at: 102))

        XCTAssertEqual(c.waitForActions(3), [.callButton(1), .perform(.hangUp), .perform(.toggleMicrophoneMute)])
        let stats = try XCTUnwrap(reader?.stats)
        XCTAssertEqual(stats.actions, 3)
        XCTAssertEqual(stats.autorepeats, 2)
        XCTAssertEqual(stats.releases, 3)
        XCTAssertEqual(stats.otherEvents, 4) // the EV_SYN records
        XCTAssertEqual(c.allEvents.first, .opened(path: fifo))
    }

    /// Found by fuzz/keys: a record whose time fields are absurd trapped on overflow in the reader
    /// thread (and took the daemon down). Now it is just a press with an odd stamp.
    func testRecordsWithAbsurdTimeStampsDoNotStopTheReader() throws {
        let c = KeyCollector()
        try start(c)
        let w = try FIFOWriter(path: fifo)
        defer { w.close() }
        let absurd = [InputEvent(seconds: .max, microseconds: .max, type: InputEvent.keyType, code: callKey, value: InputEvent.press),
                      InputEvent(seconds: .min, microseconds: .min, type: InputEvent.keyType, code: callKey, value: InputEvent.press)]
        w.write(absurd + tap(sentinelKey, at: 300))
        XCTAssertEqual(c.waitForActions(3), [.callButton(1), .callButton(1), .perform(.toggleMicrophoneMute)])
    }

    func testBounceWithinTheDebounceWindowIsFilteredAndALaterPressIsNot() throws {
        let c = KeyCollector()
        let debounceMS = 50
        try start(c, debounceMilliseconds: debounceMS)
        let window = Double(debounceMS) / 1000
        let w = try FIFOWriter(path: fifo)
        defer { w.close() }
        let t0 = 200.0
        // Contact bounce: press, release, press again well inside the window.
        w.write([.key(callKey, InputEvent.press, at: t0), .key(callKey, InputEvent.release, at: t0 + window / 10),
                 .key(callKey, InputEvent.press, at: t0 + window / 2), .key(callKey, InputEvent.release, at: t0 + window * 0.6)])
        // Another key inside the same window is its own key, not a bounce.
        w.write(tap(hangUpKey, at: t0 + window / 4))
        // A deliberate second press after the window.
        w.write(tap(callKey, at: t0 + window * 3) + tap(sentinelKey, at: t0 + 10))

        XCTAssertEqual(c.waitForActions(4), [.callButton(1), .perform(.hangUp), .callButton(1), .perform(.toggleMicrophoneMute)])
        XCTAssertEqual(reader?.stats.bounces, 1)
    }

    func testUnstampedRecordsAreDebouncedOnArrivalTime() throws {
        let c = KeyCollector()
        let debounceMS = 50
        try start(c, debounceMilliseconds: debounceMS)
        let w = try FIFOWriter(path: fifo)
        defer { w.close() }
        let press = InputEvent(type: InputEvent.keyType, code: callKey, value: InputEvent.press)
        let release = InputEvent(type: InputEvent.keyType, code: callKey, value: InputEvent.release)
        w.write([press, release, press, release]) // arrive together: the second is a bounce
        XCTAssertEqual(c.waitForActions(1), [.callButton(1)])
        usleep(UInt32(debounceMS * 3 * 1000))
        w.write([press, release])
        XCTAssertEqual(c.waitForActions(2), [.callButton(1), .callButton(1)])
        XCTAssertEqual(reader?.stats.bounces, 1)
    }

    func testRecordsSplitAcrossWritesStillDecode() throws {
        let c = KeyCollector()
        try start(c)
        let w = try FIFOWriter(path: fifo)
        defer { w.close() }
        let bytes = [InputEvent.key(callKey, InputEvent.press, at: 300), .key(hangUpKey, InputEvent.press, at: 301),
                     .key(sentinelKey, InputEvent.press, at: 302)].flatMap { $0.encoded() }
        // Cuts inside the first record, and across the second and third.
        let cuts = [InputEvent.size / 3, InputEvent.size * 2 - 5, bytes.count]
        var from = 0
        for cut in cuts {
            w.write(Array(bytes[from..<cut]))
            from = cut
            usleep(50_000) // let the reader see each piece on its own
        }
        XCTAssertEqual(c.waitForActions(3), [.callButton(1), .perform(.hangUp), .perform(.toggleMicrophoneMute)])
        XCTAssertEqual(reader?.stats.otherEvents, 0, "a misaligned decode would produce garbage events")
    }

    func testUnknownCodesAreCountedReportedAndIgnored() throws {
        let c = KeyCollector()
        try start(c)
        let w = try FIFOWriter(path: fifo)
        defer { w.close() }
        w.write(tap(unmappedKey, at: 400) + tap(unmappedKey, at: 401) + tap(sentinelKey, at: 402))

        XCTAssertEqual(c.waitForActions(1), [.perform(.toggleMicrophoneMute)])
        XCTAssertEqual(reader?.stats.unknownKeys, 2)
        XCTAssertEqual(c.allEvents.filter { $0 == .unknownKey(code: unmappedKey) }.count, 2)
    }

    func testFIFORemovedAndCreatedAgainIsReopened() throws {
        let c = KeyCollector()
        try start(c)
        var w = try FIFOWriter(path: fifo)
        w.write(tap(callKey, at: 500))
        XCTAssertEqual(c.waitForActions(1), [.callButton(1)])

        w.close()
        XCTAssertEqual(unlink(fifo), 0)
        XCTAssertTrue(c.wait { c.allEvents.contains { if case .openFailed = $0 { true } else { false } } },
                      "the missing FIFO is retried and the failure reported: \(c.allEvents)")
        usleep(200_000) // several back-off rounds while the path is missing
        let failuresReported = c.allEvents.filter { if case .openFailed = $0 { true } else { false } }.count
        XCTAssertEqual(failuresReported, 1, "one report per distinct reason, not one per retry")
        XCTAssertGreaterThan(reader?.stats.openFailures ?? 0, 1)

        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        w = try FIFOWriter(path: fifo)
        defer { w.close() }
        w.write(tap(hangUpKey, at: 510))
        XCTAssertEqual(c.waitForActions(2), [.callButton(1), .perform(.hangUp)])
        let events = c.allEvents
        let lastOpen = try XCTUnwrap(events.lastIndex(of: .opened(path: fifo)))
        let firstFailure = try XCTUnwrap(events.firstIndex { if case .openFailed = $0 { true } else { false } })
        XCTAssertGreaterThan(lastOpen, firstFailure, "reopened after the failures: \(events)")
    }

    func testPathReplacedWhileTheOldWriterStaysOpenIsNoticed() throws {
        let c = KeyCollector()
        try start(c)
        let old = try FIFOWriter(path: fifo)
        defer { old.close() }
        old.write(tap(callKey, at: 600))
        XCTAssertEqual(c.waitForActions(1), [.callButton(1)])

        // No end of file reaches the reader: only the periodic path check can notice this.
        // rename() swaps the path in one step, so the check never sees it missing.
        let replacement = directory + "/event0.new"
        XCTAssertEqual(mkfifo(replacement, 0o600), 0)
        XCTAssertEqual(rename(replacement, fifo), 0)
        let new = try FIFOWriter(path: fifo)
        defer { new.close() }
        new.write(tap(hangUpKey, at: 610))
        XCTAssertEqual(c.waitForActions(2), [.callButton(1), .perform(.hangUp)])
        XCTAssertTrue(c.allEvents.contains { if case .lost(_, let reason) = $0 { reason.contains("another file") } else { false } },
                      "\(c.allEvents)")
    }

    func testStopIsPromptWhileWaitingForADeviceOrForInput() throws {
        // Long back-off and path checks: only the wake pipe can end the thread quickly.
        let slow = 30.0
        for missing in [false, true] {
            if missing { XCTAssertEqual(unlink(fifo), 0) }
            let c = KeyCollector()
            try start(c, reopenFirstDelay: slow, reopenMaxDelay: slow, pathCheckInterval: slow)
            XCTAssertTrue(c.wait { !c.allEvents.isEmpty })
            let begin = Date()
            reader?.stop()
            reader?.stop() // twice is harmless
            let elapsed = Date().timeIntervalSince(begin)
            XCTAssertLessThan(elapsed, slow / 10, "stop took \(elapsed) s (device missing: \(missing))")
            reader = nil
        }
    }
}
