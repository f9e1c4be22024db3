import SignalTools
import XCTest

/// The loopback analysis on crafted recordings: known positions in, known milliseconds out, and a
/// diagnosis instead of a number for a silent microphone, an unheard speaker and clipping.
final class LoopbackAnalysisTests: XCTestCase {
    let rate = 48000, frame = 480
    var chirp: [Int16] { Signals.toInt16(Signals.chirp(from: 100, to: 8000, duration: 0.5, sampleRate: rate, amplitude: 0.25)) }

    /// The chirp at a fractional `lag` in a 1.2 s recording, attenuated, over noise.
    private func recording(lag: Double, gain: Float = 0.3, noiseRMS: Float = 0.0005) -> [Int16] {
        let echo = Signals.chirp(from: 100, to: 8000, duration: 0.5, sampleRate: rate, amplitude: 0.25 * gain, delay: lag)
        var x = Signals.gaussianNoise(count: rate * 6 / 5, rms: noiseRMS, seed: 7)
        Signals.mix(echo, into: &x, at: 0)
        return Signals.toInt16(x)
    }

    private func timing(signal: Int = 50_000, captureAtWrite: Int = 49_040, recordingStart: Int = 48_800) -> LoopbackAnalysis.Timing {
        .init(signalPosition: signal, capturePositionAtWrite: captureAtWrite, recordingStartPosition: recordingStart, frameSize: frame, sampleRate: rate)
    }

    func testKnownPositionsGiveTheRoundTripAndItsPartsToAHundredthOfAMillisecond() throws {
        // Echo of the signal's first sample at capture position 48_800 + 1_734.6 = 50_534.6.
        let r = LoopbackAnalysis.analyse(signal: chirp, recording: recording(lag: 1_734.6), timing: timing())
        XCTAssertEqual(r.problems, [])
        XCTAssertEqual(r.warnings, [])
        let path = try XCTUnwrap(r.pathMs), buffer = try XCTUnwrap(r.playbackBufferMs), trip = try XCTUnwrap(r.roundTripMs)
        XCTAssertEqual(path, 534.6 / 48, accuracy: 0.01)
        XCTAssertEqual(buffer, 960.0 / 48, accuracy: 1e-9)
        XCTAssertEqual(trip, (50_534.6 - 49_040) / 48 + 10, accuracy: 0.01)
        XCTAssertGreaterThan(r.correlation, 0.95)
        XCTAssertEqual(r.echoLevelDb, Levels.rmsDB(Signals.toFloat(chirp)) + Levels.amplitudeDB(0.3), accuracy: 0.5)
        XCTAssertGreaterThan(try XCTUnwrap(r.snrDb), 30)
        XCTAssertEqual(r.curve.max { $0.value < $1.value }!.ms, path, accuracy: 0.05, "the plot peaks at the path delay")
    }

    func testAnInsertedDelayMovesThePathByExactlyThatDelay() throws {
        let base = LoopbackAnalysis.analyse(signal: chirp, recording: recording(lag: 1_000), timing: timing())
        let later = LoopbackAnalysis.analyse(signal: chirp, recording: recording(lag: 1_000 + 350.4), timing: timing())
        XCTAssertEqual(try XCTUnwrap(later.pathMs) - XCTUnwrap(base.pathMs), 350.4 / 48, accuracy: 0.01)
    }

    func testSilentMicrophoneIsDiagnosedNotMeasured() {
        let r = LoopbackAnalysis.analyse(signal: chirp, recording: [Int16](repeating: 0, count: rate), timing: timing())
        XCTAssertNil(r.roundTripMs)
        XCTAssertTrue(r.problems.contains { $0.contains("microphone is silent") }, "\(r.problems)")
    }

    func testSpeakerNotHeardIsDiagnosedNotMeasured() {
        let noise = Signals.toInt16(Signals.gaussianNoise(count: rate, rms: 0.05, seed: 3))
        let r = LoopbackAnalysis.analyse(signal: chirp, recording: noise, timing: timing())
        XCTAssertNil(r.roundTripMs)
        XCTAssertTrue(r.problems.contains { $0.contains("speaker is not heard") }, "\(r.problems)")
    }

    func testClippingIsAProblemEvenWhenTheChirpIsFound() {
        let loud = recording(lag: 2_000, gain: 8)
        let r = LoopbackAnalysis.analyse(signal: chirp, recording: loud, timing: timing())
        XCTAssertGreaterThan(r.clippedSamples, 100)
        XCTAssertTrue(r.problems.contains { $0.contains("clipped") && $0.contains("lower the speaker volume") }, "\(r.problems)")
    }

    func testStreamsOutOfStepKeepTheRoundTripAndWarnAboutTheSplit() throws {
        // The playback position lags the capture clock: a negative buffer, as after a silent starve.
        let r = LoopbackAnalysis.analyse(signal: chirp, recording: recording(lag: 1_500),
                                         timing: timing(signal: 48_000, captureAtWrite: 49_040))
        XCTAssertEqual(try XCTUnwrap(r.roundTripMs), (48_800 + 1_500 - 49_040) / 48.0 + 10, accuracy: 0.01)
        XCTAssertTrue(r.warnings.contains { $0.contains("out of step") }, "\(r.warnings)")
        XCTAssertEqual(r.problems, [])
    }
}
