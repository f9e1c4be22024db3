import EchoCancel
import SignalTools
import XCTest

/// The canceller on a synthetic echo path (delay + gain + a little reverb), without devices.
final class EchoCancellerTests: XCTestCase {
    private let frame = 480

    /// Speech-like far end: noise shaped by a slowly varying envelope.
    private func farEnd(seconds: Double, seed: UInt64) -> [Int16] {
        var rng = SplitMix64(seed: seed)
        let n = Int(seconds * 48000)
        var out = [Int16](repeating: 0, count: n)
        var lp = 0.0
        for i in 0..<n {
            let envelope = 0.5 + 0.5 * sin(Double(i) / 48000 * 2 * .pi * 3)
            let white = Double(rng.next() % 20001) / 10000 - 1
            lp = 0.7 * lp + 0.3 * white
            out[i] = Int16(lp * 8000 * envelope)
        }
        return out
    }

    /// Runs the canceller over `mic = echo(far) + near`, the reference queued like the engine does.
    private func run(_ c: EchoCanceller, far: [Int16], near: [Int16]?, delay: Int) -> (mic: [Float], out: [Float]) {
        var mic = [Float](), out = [Float]()
        var inBuf = [Int16](repeating: 0, count: frame), outBuf = [Int16](repeating: 0, count: frame)
        let silence = [Int16](repeating: 0, count: frame)
        c.played(silence); c.played(silence)  // primed playback, as the engine does
        for f in 0..<(far.count / frame) {
            for i in 0..<frame {
                let t = f * frame + i
                var echo = 0.0
                if t >= delay { echo += 0.6 * Double(far[t - delay]) }
                if t >= delay + 300 { echo += 0.2 * Double(far[t - delay - 300]) }
                inBuf[i] = Int16(clamping: Int(echo) + Int(near?[t] ?? 0))
            }
            c.process(capture: inBuf, output: &outBuf)
            c.played(Array(far[(f * frame)..<((f + 1) * frame)]))
            mic += inBuf.map { Float($0) / 32768 }
            out += outBuf.map { Float($0) / 32768 }
        }
        return (mic, out)
    }

    func testCancelsASyntheticEchoByMoreThan20dBAfterConvergence() throws {
        let c = try EchoCanceller(EchoCancelSettings(frameSize: frame, tailMilliseconds: 200))
        let far = farEnd(seconds: 8, seed: 1)
        let r = run(c, far: far, near: nil, delay: 2400)
        let start = 3 * 48000
        let erle = Levels.erleDB(mic: Array(r.mic[start...]), processed: Array(r.out[start...]), frame: frame, activeThresholdDB: -50)
        XCTAssertGreaterThan(erle.medianDB, 20, "ERLE after 3 s")
        XCTAssertGreaterThan(c.erleDB.load, 15, "the canceller's own estimate tracks it")
    }

    func testEchoDelayedBeyondTheTailIsCancelledOnceTheReferenceIsAligned() throws {
        let far = farEnd(seconds: 8, seed: 4)
        let delay = 12000  // 250 ms: longer than the 200 ms tail
        let unaligned = try EchoCanceller(EchoCancelSettings(frameSize: frame, tailMilliseconds: 200))
        let r0 = run(unaligned, far: far, near: nil, delay: delay)
        let aligned = try EchoCanceller(EchoCancelSettings(frameSize: frame, tailMilliseconds: 200))
        // Played position of far[x] is x + 960 (two primed frames first): the echo arrives delay - 960 later.
        aligned.requestEchoDelay(samples: delay - 960)
        let r1 = run(aligned, far: far, near: nil, delay: delay)
        let start = 3 * 48000
        let before = Levels.erleDB(mic: Array(r0.mic[start...]), processed: Array(r0.out[start...]), frame: frame, activeThresholdDB: -50)
        let after = Levels.erleDB(mic: Array(r1.mic[start...]), processed: Array(r1.out[start...]), frame: frame, activeThresholdDB: -50)
        XCTAssertLessThan(before.medianDB, 10, "a path beyond the tail is not cancelled")
        XCTAssertGreaterThan(after.medianDB, 20, "aligned, it is")
    }

    func testBypassPassesTheMicrophoneThroughUntouched() throws {
        let c = try EchoCanceller(EchoCancelSettings(frameSize: frame))
        c.bypass.set(true)
        let far = farEnd(seconds: 2, seed: 2)
        let r = run(c, far: far, near: nil, delay: 2400)
        XCTAssertEqual(r.mic, r.out)
    }

    func testResetForgetsTheEchoPath() throws {
        let c = try EchoCanceller(EchoCancelSettings(frameSize: frame))
        let far = farEnd(seconds: 5, seed: 3)
        _ = run(c, far: far, near: nil, delay: 2400)
        c.reset()
        XCTAssertEqual(c.resets.load, 1)
        // Right after a reset the first second is barely cancelled again.
        let r = run(c, far: Array(far.prefix(48000)), near: nil, delay: 2400)
        let erle = Levels.erleDB(mic: Array(r.mic.prefix(9600)), processed: Array(r.out.prefix(9600)), frame: frame, activeThresholdDB: -50)
        XCTAssertLessThan(erle.medianDB, 15)
    }
}
