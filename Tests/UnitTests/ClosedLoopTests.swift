import IntercomConfig
import EchoCancel
import SignalTools
import TestSupport
import XCTest

/// Why the loop through another terminal needs its own kind of canceller (BENCHMARKS.md, "Howling
/// by structure"): speexdsp's canceller, given what a terminal sent as its reference, learns an
/// echo of the sent voice when nobody in the room talks, but not when the person talks, and in a
/// loop the person is there whenever the echo is (the echo is the voice, 90 ms later).
final class ClosedLoopTests: XCTestCase {
    private let frame = 480, delay = 4320

    /// Echo removed (dB) over the second half of natural speech: `voice` + `gain` × the voice `delay` earlier.
    private func removed(gain: Float, voiceInMicrophone: Bool) throws -> Double {
        let speech = try Speech.naturalPhraseSamples(peakDBFS: -20).joined().map { Float($0) }
        let c = try EchoCanceller(EchoCancelSettings(sampleRate: 48_000, frameSize: frame, tailMilliseconds: 200, noiseSuppressDB: 0,
                                                     echoSuppressDB: 0, echoSuppressActiveDB: 0, agc: false, residualGate: false))
        var mic = [Int16](repeating: 0, count: frame), out = mic, reference = mic
        var echoEnergy = 0.0, leftEnergy = 0.0
        let frames = speech.count / frame - 10
        for t in 0..<frames {
            for i in 0..<frame {
                let n = t * frame + i
                let echo = n >= delay ? gain * speech[n - delay] : 0
                mic[i] = Int16((voiceInMicrophone ? speech[n] + echo : echo).rounded())
                reference[i] = Int16(speech[n])
            }
            c.played(reference)  // played before it is captured, as on a device
            c.process(capture: mic, output: &out)
            guard t > frames / 2 else { continue }
            for i in 0..<frame {
                let n = t * frame + i
                let echo = n >= delay ? gain * speech[n - delay] : 0
                let left = Float(out[i]) - (voiceInMicrophone ? speech[n] : 0)
                echoEnergy += Double(echo * echo)
                leftEnergy += Double(left * left)
            }
        }
        return 10 * log10(echoEnergy / max(leftEnergy, 1))
    }

    func testSpeexdspLearnsTheSentVoicesEchoOnlyWhileNobodyTalks() throws {
        let alone = try removed(gain: 0.5, voiceInMicrophone: false)
        let underTheVoice = try removed(gain: 0.5, voiceInMicrophone: true)
        print(String(format: "speexdsp, the sent voice as reference: echo alone %.1f dB removed, under the voice (6 dB down) %.1f dB", alone, underTheVoice))
        XCTAssertGreaterThan(alone, 10, "an echo alone is learnt")
        XCTAssertLessThan(underTheVoice, 3, "under the voice it is not: speexdsp takes the voice for double talk")
    }
}
