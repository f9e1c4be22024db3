import AudioPipeline
import SignalTools
import TestSupport
import XCTest

/// The howl guard in a simulated loop through another terminal (a delay of `delayFrames` and a
/// loop gain of ×4, i.e. +12 dB), and on natural speech without a loop.
final class HowlGuardTests: XCTestCase {
    let frame = 480

    /// Frame levels and sample peaks (dBFS) of what is sent, for `seconds`; someone speaks (noise at -20 dBFS) for the first second.
    private func loop(_ guardian: HowlGuard, seconds: Double, gain: Double = 4, delayFrames: Int = 7) -> (levels: [Double], peaks: [Double]) {
        var rng = SplitMix64(seed: 3)
        var sent = [[Int16]](repeating: [Int16](repeating: 0, count: frame), count: delayFrames)
        var levels: [Double] = [], peaks: [Double] = []
        var buffer = [Int16](repeating: 0, count: frame)
        for t in 0..<Int(seconds * 100) {
            let back = sent[t % delayFrames]
            let talk = t < 100 ? 3300.0 : 0  // -20 dBFS while the person speaks
            for i in 0..<frame {
                let v = talk * (rng.nextUnit() * 2 - 1) * 1.7 + 10 * (rng.nextUnit() * 2 - 1) + gain * Double(back[i])
                buffer[i] = Int16(max(-32768, min(32767, v.rounded())))
            }
            buffer.withUnsafeMutableBufferPointer { guardian.process($0.baseAddress!) }
            sent[t % delayFrames] = buffer
            var e = 0.0
            for x in buffer { e += Double(x) * Double(x) }
            levels.append(10 * log10(max(e / Double(frame), 1e-3) / (32768.0 * 32768.0)))
            peaks.append(20 * log10(max(Double(buffer.map { abs(Int($0)) }.max()!), 1) / 32767))
        }
        return (levels, peaks)
    }

    func testWithoutTheGuardTheLoopGrowsToFullScale() {
        let guardian = HowlGuard(frameSize: frame, sampleRate: 48_000)
        guardian.enabled.set(false)
        let levels = loop(guardian, seconds: 5).levels
        XCTAssertGreaterThan(levels.suffix(100).max() ?? -.infinity, -3, "the simulated loop howls (the test can fail)")
    }

    /// Alone (no loop canceller) the guard cannot make the loop go away for good: it holds it at
    /// its ceiling, breaks it, and the loop grows again from the room's noise. What it promises is
    /// the bound: no sample sent above the ceiling, for 60 s.
    func testTheGuardKeepsTheLoopBelowItsCeilingFor60Seconds() {
        let guardian = HowlGuard(frameSize: frame, sampleRate: 48_000)
        let peaks = loop(guardian, seconds: 60).peaks
        let loudest = peaks.max() ?? .infinity
        let ceiling = HowlGuard.Settings().ceilingDBFS
        print(String(format: "howl guard alone, loop ×4: loudest sample %.2f dBFS (ceiling %.1f), %d breaks in 60 s", loudest, ceiling, guardian.howls.load))
        XCTAssertLessThanOrEqual(loudest, ceiling + 0.05, "never above the ceiling")
        XCTAssertGreaterThan(guardian.howls.load, 0, "a loop held at the ceiling is broken")
    }

    /// A talker peaking just below the ceiling, at unity gain, passes bit for bit; one peaking 3 dB
    /// above it is brought down to it at once and let go within a second.
    func testSpeechBelowTheCeilingPassesUntouched() throws {
        let guardian = HowlGuard(frameSize: frame, sampleRate: 48_000)
        let ceiling = HowlGuard.Settings().ceilingDBFS
        let speech = try Speech.naturalPhraseSamples(peakDBFS: ceiling - 0.2).joined().map { $0 }
        var out = speech
        out.withUnsafeMutableBufferPointer { p in
            for f in 0..<(speech.count / frame) { guardian.process(p.baseAddress! + f * frame) }
        }
        XCTAssertTrue(out == speech, "speech peaking 0.2 dB below the ceiling is not touched")
        XCTAssertEqual(guardian.howls.load, 0)

        let loud = try Speech.naturalPhraseSamples(peakDBFS: ceiling + 3).joined().map { $0 }
        var limited = loud
        limited.withUnsafeMutableBufferPointer { p in
            for f in 0..<(loud.count / frame) { guardian.process(p.baseAddress! + f * frame) }
        }
        let peak = limited.map { abs(Double($0)) }.max()!
        XCTAssertLessThanOrEqual(20 * log10(peak / 32767), ceiling + 0.05, "a louder talker is held at the ceiling")
        XCTAssertEqual(guardian.howls.load, 0, "speech is not a loop")
    }
}
