import AudioPipeline
import SignalTools
import XCTest

/// The howl guard in a simulated loop through another terminal (a delay of `delayFrames` and a
/// loop gain of ×4, i.e. +12 dB), and on speech without a loop.
final class HowlGuardTests: XCTestCase {
    let frame = 480

    /// Frame levels (dBFS) of what is sent, for `seconds`; someone speaks (noise at -20 dBFS) for the first second.
    private func loop(guardOn: Bool, seconds: Double, gain: Double = 4, delayFrames: Int = 7) -> [Double] {
        let guardian = HowlGuard(frameSize: frame, sampleRate: 48_000)
        guardian.enabled.set(guardOn)
        var rng = SplitMix64(seed: 3)
        var sent = [[Int16]](repeating: [Int16](repeating: 0, count: frame), count: delayFrames)
        var levels: [Double] = []
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
        }
        return levels
    }

    func testWithoutTheGuardTheLoopGrowsToFullScale() {
        let levels = loop(guardOn: false, seconds: 5)
        XCTAssertGreaterThan(levels.suffix(100).max() ?? -.infinity, -3, "the simulated loop howls (the test can fail)")
    }

    func testTheGuardKeepsTheLoopBelowItsCeilingAndQuietFor60Seconds() {
        let levels = loop(guardOn: true, seconds: 60)
        let loudest = levels.max() ?? .infinity
        let late = levels.suffix(3000).sorted()
        print(String(format: "howl guard: loudest frame %.1f dBFS, median of the last 30 s %.1f dBFS, loudest of the last 30 s %.1f dBFS",
                     loudest, late[late.count / 2], late.last!))
        XCTAssertLessThanOrEqual(loudest, HowlGuard.Settings().ceilingDBFS + 0.5, "never above the ceiling")
        XCTAssertLessThan(late[late.count / 2], -50, "the loop dies down and stays down")
        XCTAssertLessThan(late.last!, -30, "no burst in the last 30 s")
    }

    func testSpeechWithoutALoopPassesUntouched() {
        let guardian = HowlGuard(frameSize: frame, sampleRate: 48_000)
        // A close talker at unity gain: -20 dBFS peak, -23 dBFS RMS.
        let speech = Signals.toInt16(Signals.chirp(from: 150, to: 4000, duration: 3, sampleRate: 48_000, amplitude: 0.1))
        var out = speech
        out.withUnsafeMutableBufferPointer { p in
            for f in 0..<(speech.count / frame) { guardian.process(p.baseAddress! + f * frame) }
        }
        XCTAssertTrue(out == speech, "a -23 dBFS signal below the ceiling is not touched")
        XCTAssertEqual(guardian.howls.load, 0)
    }
}
