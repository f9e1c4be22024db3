import Foundation
import Jitter
import TestSupport
import XCTest

/// The suite's clock-drift figures: a sender 200 ppm fast or slow for ten minutes over the drift
/// traces' bad network, through the real jitter buffer and drift corrector on simulated clocks
/// (the rig's rooms share one clock, so real drift cannot be made there).
final class SuiteDriftTests: XCTestCase {
    func testSuiteJitterBufferDelayAtStartAndEndOfTenMinutesOfDrift() throws {
        let mode = try SuiteMode.require()
        let frames = mode.isSmoke ? 2 * DriftSimulation.Result.minute : 10 * DriftSimulation.Result.minute
        let minutes = frames / DriftSimulation.Result.minute
        // The start is the second minute (the first holds the buffer's start-up), the end the last.
        let startMinute = minutes > 2 ? 1 : 0
        SuiteMode.emit("### Clock drift, ±200 ppm for \(minutes) minutes (simulated clocks; real jitter buffer, drift corrector, packet trace of `DriftTraceTests`)")
        SuiteMode.emit("")
        SuiteMode.emitTable(intro: "The delay a listener hears should be the same at the end as at the start: growth means the buffer fills (a fast sender) and will drop audio; shrinkage means it drains and will insert. Goal: delay at the end within one frame (10 ms) of the start, with no more drops or inserts than the same trace without drift.",
                            columns: ["sender clock", "correction", "delay heard, minute \(startMinute + 1) (median)", "minute \(minutes) (median)", "change", "buffer drops / inserts"])
        for (ppm, corrected) in [(0.0, true), (200.0, true), (-200.0, true), (200.0, false), (-200.0, false)] {
            var sim = DriftSimulation(ppm: ppm, profile: DriftTraceTests.profile, frames: frames)
            sim.drift.enabled = corrected
            let r = try sim.run()
            // What is heard: the corrector's delay (the buffer's own reading plus its resampler) when on.
            let heard = corrected ? r.correctedDelayMs : r.delayMs
            func median(minute m: Int) -> Double {
                DriftSimulation.Result.median(r.minutes(m, m + 1).filter { r.playing[$0] }.map { heard[$0] })
            }
            let first = median(minute: startMinute), last = median(minute: minutes - 1)
            XCTAssertTrue(first.isFinite && last.isFinite, "the delay was measured")
            SuiteMode.emit(String(format: "| %+.0f ppm | %@ | %.1f ms | %.1f ms | %+.1f ms | %d / %d |", ppm, corrected ? "on" : "off",
                                  first, last, last - first, r.statistics.dropped.load, r.statistics.inserted.load))
        }
        SuiteMode.emit("")
    }
}
