import AudioPipeline
import RealTime
import XCTest

final class MixerTests: XCTestCase {
    private func ring(_ value: Int16, frames: Int = 1, size: Int = 4) -> SampleRing {
        let r = SampleRing(minimumCapacity: size * frames)
        for _ in 0..<frames { r.write([Int16](repeating: value, count: size), count: size) }
        return r
    }

    func testSumsStreamsWithPerStreamGain() {
        let mixer = Mixer(inputs: [MixerInput(source: ring(1000)), MixerInput(source: ring(-300), gain: 0.5)], frameSize: 4)
        var out = [Int16](repeating: 0, count: 4)
        mixer.mix(into: &out)
        XCTAssertEqual(out, [850, 850, 850, 850])
    }

    func testSaturatesInsteadOfWrappingAndCountsClipping() {
        let mixer = Mixer(inputs: [MixerInput(source: ring(30000)), MixerInput(source: ring(30000))], frameSize: 4)
        var out = [Int16](repeating: 0, count: 4)
        mixer.mix(into: &out)
        XCTAssertEqual(out, [32767, 32767, 32767, 32767])
        XCTAssertEqual(mixer.clippedSamples.load, 4)
        let negative = Mixer(inputs: [MixerInput(source: ring(-30000)), MixerInput(source: ring(-30000))], frameSize: 4)
        negative.mix(into: &out)
        XCTAssertEqual(out, [-32768, -32768, -32768, -32768])
    }

    func testEmptyInputCountsUnderrunAndMixesSilence() {
        let empty = MixerInput(source: SampleRing(minimumCapacity: 4))
        let mixer = Mixer(inputs: [empty, MixerInput(source: ring(5))], frameSize: 4)
        var out = [Int16](repeating: 9, count: 4)
        mixer.mix(into: &out)
        XCTAssertEqual(out, [5, 5, 5, 5])
        XCTAssertEqual(empty.underruns.load, 1)
    }

    func testSpeakerMutePlaysSilenceAndMicMuteSendsSilence() {
        let mixer = Mixer(inputs: [MixerInput(source: ring(1234))], frameSize: 4)
        mixer.speakerMuted.set(true)
        var out = [Int16](repeating: 9, count: 4)
        mixer.mix(into: &out)
        XCTAssertEqual(out, [0, 0, 0, 0])

        var mic: [Int16] = [100, -100, 200, -200]
        mixer.micGain.store(2)
        mixer.applyMicrophone(&mic)
        XCTAssertEqual(mic, [200, -200, 400, -400])
        mixer.micMuted.set(true)
        mixer.applyMicrophone(&mic)
        XCTAssertEqual(mic, [0, 0, 0, 0])
    }
}
