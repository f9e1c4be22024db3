import AudioPipeline
import Foundation
import TestSupport
import XCTest

/// The audio engine on real ALSA (the rig's pulse PCMs), in this process.
final class EngineRealtimeTests: XCTestCase {
    /// Runs `seconds` at the given period: no xruns; after the first second, the frames processed
    /// match the wall time within 1 % and the audio thread makes no heap allocation.
    private func runSteadyState(periodMs: Double, seconds: Double) throws {
        let frame = Int(48.0 * periodMs)
        // The rig's sound server needs about 30 ms of playback buffer not to starve now and then
        // (a sound card needs far less): 3 periods at 10 ms, 6 at 5 ms.
        let h = try EngineHarness(room: "roomA", periodFrames: frame, bufferPeriods: Int(30 / periodMs))
        try h.start()
        Thread.sleep(forTimeInterval: 1)
        let framesAtArm = h.engine.stats.frames.load
        let armedAt = Date()
        AllocationCounter.arm()
        Thread.sleep(forTimeInterval: seconds - 1)
        AllocationCounter.disarm()
        // Pace is judged in steady state, after the sound server's start-up transient.
        let elapsed = Date().timeIntervalSince(armedAt)
        let frames = h.engine.stats.frames.load - framesAtArm
        let framesCounted = frames
        h.stop()

        let s = h.engine.stats
        XCTAssertEqual(s.xruns, 0, "xruns at \(periodMs) ms: capture \(s.captureXruns.load), playback \(s.playbackXruns.load)")
        let audioSeconds = Double(frames) * periodMs / 1000
        XCTAssertEqual(audioSeconds, elapsed, accuracy: elapsed * 0.01,
                       "\(frames) frames = \(audioSeconds) s of audio in \(elapsed) s wall time")
        XCTAssertEqual(AllocationCounter.count, 0,
                       "\(AllocationCounter.count) allocations (\(AllocationCounter.bytes) bytes) on the audio thread over \(framesCounted) frames, from: \(AllocationCounter.callers.joined(separator: "; "))")
        print("steady state \(periodMs) ms: \(frames) frames in \(String(format: "%.3f", elapsed)) s, \(s.xruns) xruns, allocations \(AllocationCounter.count) over \(framesCounted) frames")
    }

    func testTenSecondsAt10msPeriodsHasNoXrunsKeepsPaceAndDoesNotAllocate() throws {
        try runSteadyState(periodMs: 10, seconds: 10)
    }

    func testTenSecondsAt5msPeriodsHasNoXrunsKeepsPaceAndDoesNotAllocateOver1000Frames() throws {
        try runSteadyState(periodMs: 5, seconds: 10)
    }

    func testForcedStallOfTheAudioThreadCausesAnXrunThatIsRecoveredAndCounted() throws {
        let h = try EngineHarness(room: "roomA", periodFrames: 480, countAllocations: false)
        try h.start()
        Thread.sleep(forTimeInterval: 1)
        let resetsBefore = h.engine.canceller.resets.load
        h.engine.stallRequest.post(300_000)  // 300 ms against a 30 ms buffer
        Thread.sleep(forTimeInterval: 1)
        let framesAfterStall = h.engine.stats.frames.load
        Thread.sleep(forTimeInterval: 1)
        let framesLater = h.engine.stats.frames.load
        let running = h.engine.stats.running.isSet
        h.stop()
        XCTAssertGreaterThanOrEqual(h.engine.stats.xruns, 1, "a 300 ms stall must overrun a 30 ms buffer")
        XCTAssertGreaterThan(h.engine.canceller.resets.load, resetsBefore, "the echo canceller is reset after an xrun")
        XCTAssertTrue(running, "the session survives the xrun")
        XCTAssertGreaterThan(framesLater - framesAfterStall, 90, "audio continues after recovery (~100 frames/s)")
    }

    func testMissingDeviceThrowsAnErrorNamingIt() throws {
        try Rig.require()
        XCTAssertThrowsError(try AudioDevices(DeviceSettings(captureDevice: "roomNowhere", playbackDevice: "roomNowhere"))) { error in
            let text = "\(error)"
            XCTAssertTrue(text.contains("roomNowhere"), text)
            XCTAssertTrue(text.contains("open"), text)
        }
    }
}
