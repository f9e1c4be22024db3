import AudioPipeline
import IntercomConfig
import EchoCancel
import Frames
import IntercomDaemon
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

    func testTheTerminalsOwnTonesAreHeardWithTheSpeakerMuted() {
        let tone = MixerInput(source: ring(700), isOwnSound: true)
        let mixer = Mixer(inputs: [MixerInput(source: ring(1234)), tone], frameSize: 4)
        mixer.speakerMuted.set(true)
        mixer.speakerGain.store(2)
        var out = [Int16](repeating: 9, count: 4)
        mixer.mix(into: &out)
        XCTAssertEqual(out, [1400, 1400, 1400, 1400], "the far end silenced, the tone at the speaker's volume")
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
        let far = ring(1234, frames: 2)
        let mixer = Mixer(inputs: [MixerInput(source: far)], frameSize: 4)
        mixer.speakerMuted.set(true)
        var out = [Int16](repeating: 9, count: 4)
        mixer.mix(into: &out)
        XCTAssertEqual(out, [0, 0, 0, 0])
        XCTAssertEqual(far.availableToRead, 4, "a muted stream is still read, so it does not pile up")

        let microphone = MicrophoneGain(frameSize: 4)
        var mic: [Int16] = [100, -100, 20000, -200]
        microphone.gain.store(2)
        microphone.process(&mic)
        XCTAssertEqual(mic, [200, -200, 32767, -400])
        XCTAssertEqual(microphone.clippedSamples.load, 1)
        microphone.muted.set(true)
        microphone.process(&mic)
        XCTAssertEqual(mic, [0, 0, 0, 0])
    }

    func testTheMicrophoneChainRunsCancellerGainAndHowlGuardInOrder() throws {
        // With the canceller bypassed, the chain's output is the gain's: mute must silence it
        // even though the canceller passed the frame through.
        let canceller = try EchoCanceller(EchoCancelSettings(.default))
        canceller.bypass.set(true)
        let chain = MicrophoneChain(canceller: canceller, gain: MicrophoneGain(frameSize: 480), howlGuard: HowlGuard(frameSize: 480, sampleRate: 48000))
        let captured = [Int16](repeating: 1000, count: 480)
        var out = [Int16](repeating: 0, count: 480)
        chain.process(captured: captured, into: &out)
        XCTAssertEqual(out, captured, "bypassed canceller, unity gain, a quiet frame: unchanged")
        chain.gain.muted.set(true)
        chain.process(captured: captured, into: &out)
        XCTAssertEqual(out, [Int16](repeating: 0, count: 480))
        // A frame near full scale is limited by the howl guard after the gain, to its ceiling's peak.
        chain.gain.muted.set(false)
        chain.process(captured: [Int16](repeating: 30000, count: 480), into: &out)
        let ceiling = 32767 * pow(10, HowlGuard.Settings().ceilingDBFS / 20)
        XCTAssertLessThanOrEqual(Double(out.map { abs(Int($0)) }.max() ?? 0), ceiling + 1)
        XCTAssertGreaterThan(Double(out.map { abs(Int($0)) }.max() ?? 0), ceiling - 2, "limited, not muted")
    }
}
