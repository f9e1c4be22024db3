import Foundation
import SignalTools
import XCTest

final class SignalToolsTests: XCTestCase {
    private var directory = ""

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "signaltools-\(getpid())-\(UInt32.random(in: .min ... .max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
    }

    // MARK: WAV

    func testWAVRoundTripKeepsSamplesAndLeavesNoTempFile() throws {
        let samples: [Int16] = [0, 1, -1, .max, .min, 12345, -12345, 7]
        let audio = WAVAudio(sampleRate: 44100, channels: 2, samples: samples)
        let path = directory + "/round.wav"
        try audio.write(path: path)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: path)).count, 44 + samples.count * 2)
        XCTAssertEqual(try WAVAudio.read(path: path), audio)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: directory), ["round.wav"])

        // Overwriting replaces the whole file.
        let shorter = WAVAudio(sampleRate: 8000, channels: 1, samples: [5, -5, 3])
        try shorter.write(path: path)
        XCTAssertEqual(try WAVAudio.read(path: path), shorter)
    }

    func testWAVReaderSkipsUnknownAndOddChunks() throws {
        // fmt with an 18-byte body (cbSize), an odd LIST chunk and odd junk before data.
        var file = RIFFBuilder()
        file.chunk("LIST", [1, 2, 3]) // odd: followed by a pad byte
        file.chunk("fmt ", fmtBody(tag: 1, channels: 1, rate: 16000, bits: 16) + [0, 0])
        file.chunk("junk", [9, 9, 9, 9, 9])
        file.chunk("data", le16([100, -200, 300]))
        file.chunk("LIST", [7]) // trailing chunk after data
        let path = try file.write(to: directory + "/chunks.wav")
        let audio = try WAVAudio.read(path: path)
        XCTAssertEqual(audio.sampleRate, 16000)
        XCTAssertEqual(audio.channels, 1)
        XCTAssertEqual(audio.samples, [100, -200, 300])
    }

    func testWAVReaderConverts24BitAndFloat() throws {
        var pcm24 = RIFFBuilder()
        pcm24.chunk("fmt ", fmtBody(tag: 1, channels: 2, rate: 48000, bits: 24))
        // 0x123456 -> 0x1234 (+0x56 rounds down), 0x7FFFFF -> clamps to max,
        // -1 (0xFFFFFF) -> 0, 0x800000 -> min.
        pcm24.chunk("data", [0x56, 0x34, 0x12, 0xFF, 0xFF, 0x7F, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x80])
        let a = try WAVAudio.read(path: try pcm24.write(to: directory + "/24.wav"))
        XCTAssertEqual(a.channels, 2)
        XCTAssertEqual(a.samples, [0x1234, .max, 0, .min])

        var float = RIFFBuilder()
        float.chunk("fmt ", fmtBody(tag: 3, channels: 1, rate: 48000, bits: 32))
        let values: [Float] = [0.5, -0.25, 1.5, -1.0]
        float.chunk("data", values.flatMap { f in withUnsafeBytes(of: f.bitPattern.littleEndian) { Array($0) } })
        let b = try WAVAudio.read(path: try float.write(to: directory + "/f.wav"))
        XCTAssertEqual(b.samples, [16384, -8192, .max, .min])
    }

    func testWAVErrorsNameFileAndProblem() throws {
        let path = directory + "/text.wav"
        try Data("hello, not a wave file".utf8).write(to: URL(fileURLWithPath: path))
        XCTAssertThrowsError(try WAVAudio.read(path: path)) { error in
            let e = error as? WAVError
            XCTAssertEqual(e?.kind, .notWAV)
            XCTAssertTrue(String(describing: error).contains(path))
        }
        XCTAssertThrowsError(try WAVAudio.read(path: directory + "/missing.wav")) { error in
            XCTAssertEqual((error as? WAVError)?.kind, .io)
        }
        var noData = RIFFBuilder()
        noData.chunk("fmt ", fmtBody(tag: 1, channels: 1, rate: 8000, bits: 16))
        XCTAssertThrowsError(try WAVAudio.read(path: try noData.write(to: directory + "/nodata.wav"))) { error in
            XCTAssertEqual((error as? WAVError)?.kind, .malformed)
        }
        var alaw = RIFFBuilder()
        alaw.chunk("fmt ", fmtBody(tag: 6, channels: 1, rate: 8000, bits: 8))
        alaw.chunk("data", [1, 2])
        XCTAssertThrowsError(try WAVAudio.read(path: try alaw.write(to: directory + "/alaw.wav"))) { error in
            XCTAssertEqual((error as? WAVError)?.kind, .unsupportedFormat)
        }
    }

    func testStreamWriterPatchesSizesAndReadsBack() throws {
        let path = directory + "/stream.wav"
        let all = (0..<3000).map { Int16(truncatingIfNeeded: $0 &* 37) }
        let writer = try WAVStreamWriter(path: path, sampleRate: 48000, channels: 2)
        try writer.append(Array(all[0..<1000]))
        // Before close the provisional header still lets the data be read.
        XCTAssertEqual(try WAVAudio.read(path: path).samples, Array(all[0..<1000]))
        try writer.append(Array(all[1000..<3000]))
        try writer.close()
        try writer.close() // idempotent
        XCTAssertThrowsError(try writer.append([1, 2])) { XCTAssertEqual(($0 as? WAVError)?.kind, .closed) }

        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        XCTAssertEqual(bytes.count, 44 + 6000)
        XCTAssertEqual(readLE32(bytes, 4), UInt32(bytes.count - 8))
        XCTAssertEqual(readLE32(bytes, 40), 6000)
        let audio = try WAVAudio.read(path: path)
        XCTAssertEqual(audio.channels, 2)
        XCTAssertEqual(audio.samples, all)
    }

    func testMonoAndFloats() {
        let audio = WAVAudio(sampleRate: 8000, channels: 2, samples: [100, 300, -100, -300, .min, .min, 1, 2])
        XCTAssertEqual(audio.mono().samples, [200, -200, .min, 2])
        XCTAssertEqual(audio.mono().channels, 1)
        XCTAssertEqual(WAVAudio(sampleRate: 8000, channels: 1, samples: [.min, 16384]).floats(), [-1, 0.5])
        let all = (Int(Int16.min)...Int(Int16.max)).map { Int16($0) }
        XCTAssertEqual(Signals.toInt16(Signals.toFloat(all)), all)
    }

    // MARK: FFT

    func testFFTMatchesNaiveDFTAndInverts() {
        var rng = SplitMix64(seed: 42)
        for size in [1, 2, 4, 8, 16, 256] {
            let xr = (0..<size).map { _ in rng.nextUnit() * 2 - 1 }
            let xi = (0..<size).map { _ in rng.nextUnit() * 2 - 1 }
            var re = xr, im = xi
            let plan = FFTPlan(size: size)
            plan.forward(re: &re, im: &im)
            var maxError = 0.0
            for k in 0..<size {
                var sr = 0.0, si = 0.0
                for j in 0..<size {
                    let angle = -2 * Double.pi * Double(j * k % size) / Double(size)
                    sr += xr[j] * cos(angle) - xi[j] * sin(angle)
                    si += xr[j] * sin(angle) + xi[j] * cos(angle)
                }
                maxError = max(maxError, abs(re[k] - sr), abs(im[k] - si))
            }
            XCTAssertLessThan(maxError, 1e-10, "size \(size)")
            plan.inverse(re: &re, im: &im)
            let roundTrip = zip(re + im, xr + xi).map { abs($0 - $1) }.max() ?? 0
            XCTAssertLessThan(roundTrip, 1e-12, "size \(size)")
        }
    }

    // MARK: Delay

    func testFindDelayLocatesChirpInNoise() throws {
        let rate = 48000
        let chirp = Signals.chirp(from: 200, to: 8000, duration: 0.25, sampleRate: rate)
        var signal = Signals.gaussianNoise(count: rate, rms: 0.2, seed: 7)
        Signals.mix(chirp, into: &signal, at: 1234, gain: 0.5)
        let estimate = try XCTUnwrap(Correlation.findDelay(reference: chirp, in: signal, maxLag: 4800))
        XCTAssertEqual(estimate.lagSamples, 1234)
        XCTAssertEqual(estimate.fractionalLag, 1234, accuracy: 0.1)
        XCTAssertFalse(estimate.inverted)
        // Chirp RMS ~0.18 after the gain against noise RMS 0.2: about 0.66, far above chance.
        XCTAssertGreaterThan(estimate.peak, 0.25)
        XCTAssertLessThan(estimate.peak, 0.8)

        // The aligned slice is the chirp plus noise, so it correlates like the peak says.
        let aligned = Signals.align(signal, lag: estimate.lagSamples, length: chirp.count)
        XCTAssertEqual(Correlation.normalizedCorrelation(chirp, aligned), estimate.peak, accuracy: 1e-9)

        // Outside the searched range it must not be found.
        let limited = try XCTUnwrap(Correlation.findDelay(reference: chirp, in: signal, maxLag: 1000))
        XCTAssertLessThanOrEqual(limited.lagSamples, 1000)
        XCTAssertLessThan(limited.peak, 0.2)
    }

    func testFindDelayFractionalAndInverted() throws {
        let rate = 48000
        let reference = Signals.chirp(from: 100, to: 10000, duration: 0.2, sampleRate: rate)
        for delay in [321.37, 321.5, 322.8] {
            let delayed = Signals.chirp(from: 100, to: 10000, duration: 0.2, sampleRate: rate, delay: delay)
            let e = try XCTUnwrap(Correlation.findDelay(reference: reference, in: delayed, maxLag: 1000))
            XCTAssertEqual(e.fractionalLag, delay, accuracy: 0.1, "\(e)")
            XCTAssertEqual(Double(e.lagSamples), delay, accuracy: 0.5)
            XCTAssertGreaterThan(e.peak, 0.9)
        }
        let flipped = Signals.chirp(from: 100, to: 10000, duration: 0.2, sampleRate: rate, delay: 50).map { -$0 }
        let e = try XCTUnwrap(Correlation.findDelay(reference: reference, in: flipped, maxLag: 100))
        XCTAssertEqual(e.lagSamples, 50)
        XCTAssertTrue(e.inverted)
    }

    func testFindDelayNegativeLagAndSilence() throws {
        let noise = Signals.whiteNoise(count: 4000, amplitude: 0.5, seed: 3)
        // The signal starts 300 samples into the reference: the reference began earlier.
        let signal = Array(noise[300...])
        XCTAssertEqual(Correlation.findDelay(reference: noise, in: signal, lags: -1000...1000)?.lagSamples, -300)
        XCTAssertEqual(Correlation.findDelay(reference: noise, in: noise, maxLag: 10)?.peak ?? 0, 1, accuracy: 1e-12)

        XCTAssertNil(Correlation.findDelay(reference: Signals.silence(count: 1000), in: noise, maxLag: 100))
        XCTAssertNil(Correlation.findDelay(reference: noise, in: Signals.silence(count: 5000), maxLag: 100))
        XCTAssertNil(Correlation.findDelay(reference: noise, in: [], maxLag: 100))
    }

    func testNormalizedCorrelation() {
        let a: [Float] = [1, 2, 3, -1]
        XCTAssertEqual(Correlation.normalizedCorrelation(a, a.map { $0 * 3 }), 1, accuracy: 1e-12)
        XCTAssertEqual(Correlation.normalizedCorrelation(a, a.map { -$0 }), -1, accuracy: 1e-12)
        XCTAssertEqual(Correlation.normalizedCorrelation([1, 0], [0, 1]), 0)
        XCTAssertEqual(Correlation.normalizedCorrelation(a, [0, 0, 0, 0]), 0)
    }

    // MARK: Levels

    func testLevels() {
        let sine = Signals.sine(frequency: 1000, duration: 1, sampleRate: 48000, amplitude: 1)
        XCTAssertEqual(Levels.rmsDB(sine), -3.0103, accuracy: 0.001)
        XCTAssertEqual(Levels.rms([3, -3, 3, -3]), 3, accuracy: 1e-12)
        XCTAssertEqual(Levels.peak([0.1, -0.7, 0.5]), 0.7)
        XCTAssertEqual(Levels.rmsDB(Signals.silence(count: 10)), -200)
        XCTAssertEqual(Levels.clippedSampleCount([0, .max, .min, 32766, .max]), 3)
        XCTAssertEqual(Levels.frameEnergies([1, 1, 2, 2, 5], frame: 2), [1, 4])
    }

    func testERLEOnAttenuatedMicIgnoringQuietFrames() {
        let frame = 480
        var mic = Signals.gaussianNoise(count: 48000, rms: 0.3, seed: 11)
        for i in 24000..<36000 { mic[i] *= 1e-4 } // 25 quiet frames, far below the threshold
        let processed = mic.map { $0 * 0.01 }
        let erle = Levels.erleDB(mic: mic, processed: processed, frame: frame, activeThresholdDB: -40)
        XCTAssertEqual(erle.frames, 100 - 25)
        XCTAssertEqual(erle.medianDB, 40, accuracy: 0.01)
        XCTAssertEqual(erle.meanDB, 40, accuracy: 0.01)

        // Cancelling only the second half: median sits between, mean follows energy.
        var half = mic
        for i in 0..<24000 { half[i] *= 0.1 } // 20 dB on the first 50 frames
        let mixed = Levels.erleDB(mic: mic, processed: half, frame: frame, activeThresholdDB: -40)
        XCTAssertEqual(mixed.medianDB, 20, accuracy: 0.01) // 50 frames at 20 dB, 25 at 0 dB
        XCTAssertLessThan(mixed.meanDB, 5) // the 0 dB frames carry a third of the energy

        XCTAssertEqual(Levels.erleDB(mic: Signals.silence(count: 4800), processed: mic, frame: frame,
                                     activeThresholdDB: -60).frames, 0)
    }

    func testRetainedDB() {
        let reference = Signals.gaussianNoise(count: 48000, rms: 0.1, seed: 5)
        let retained = Levels.retainedDB(reference: reference, processed: reference.map { $0 * 0.5 },
                                         frame: 480, activeThresholdDB: -50)
        XCTAssertEqual(retained, -6.0206, accuracy: 0.001)
        XCTAssertEqual(Levels.retainedDB(reference: reference, processed: reference, frame: 480,
                                         activeThresholdDB: -50), 0, accuracy: 1e-9)
        XCTAssertTrue(Levels.retainedDB(reference: reference, processed: reference, frame: 480,
                                        activeThresholdDB: 0).isNaN)
    }

    // MARK: Signals

    func testGeneratorsAreDeterministicAndInRange() {
        var rng = SplitMix64(seed: 0)
        XCTAssertEqual(rng.next(), 0xE220_A839_7B1D_CDAF) // published SplitMix64 reference value
        XCTAssertEqual(Signals.whiteNoise(count: 100, amplitude: 0.5, seed: 9),
                       Signals.whiteNoise(count: 100, amplitude: 0.5, seed: 9))
        XCTAssertNotEqual(Signals.whiteNoise(count: 100, amplitude: 0.5, seed: 9),
                          Signals.whiteNoise(count: 100, amplitude: 0.5, seed: 10))
        XCTAssertLessThanOrEqual(Levels.peak(Signals.whiteNoise(count: 10000, amplitude: 0.5, seed: 1)), 0.5)
        XCTAssertEqual(Levels.rms(Signals.gaussianNoise(count: 100_000, rms: 0.2, seed: 2)), 0.2, accuracy: 0.002)

        let chirp = Signals.chirp(from: 100, to: 1000, duration: 0.1, sampleRate: 8000, amplitude: 0.8, sweep: .linear)
        XCTAssertEqual(chirp.count, 800)
        XCTAssertEqual(chirp.first, 0) // faded in
        XCTAssertLessThanOrEqual(Levels.peak(chirp), 0.8)
        XCTAssertGreaterThan(Levels.peak(chirp), 0.7)
        XCTAssertEqual(Signals.chirp(from: 100, to: 1000, duration: 0.1, sampleRate: 8000, delay: 2.5).count, 803)

        XCTAssertEqual(Signals.align([1, 2, 3, 4], lag: 2, length: 3), [3, 4, 0])
        XCTAssertEqual(Signals.align([1, 2, 3, 4], lag: -1, length: 3), [0, 1, 2])
    }

    // MARK: Helpers

    private func fmtBody(tag: UInt16, channels: UInt16, rate: UInt32, bits: UInt16) -> [UInt8] {
        let block = channels * bits / 8
        return le16([Int16(bitPattern: tag), Int16(bitPattern: channels)]) + le32(rate) + le32(rate * UInt32(block))
            + le16([Int16(bitPattern: block), Int16(bitPattern: bits)])
    }

    private func le16(_ values: [Int16]) -> [UInt8] {
        values.flatMap { v in [UInt8(truncatingIfNeeded: v), UInt8(truncatingIfNeeded: v >> 8)] }
    }

    private func le32(_ v: UInt32) -> [UInt8] {
        (0..<4).map { UInt8(truncatingIfNeeded: v >> (8 * $0)) }
    }

    private func readLE32(_ b: [UInt8], _ o: Int) -> UInt32 {
        (0..<4).reduce(0) { $0 | UInt32(b[o + $1]) << (8 * $1) }
    }
}

/// Assembles a RIFF/WAVE file chunk by chunk, padding odd chunks as the format requires.
private struct RIFFBuilder {
    var body: [UInt8] = Array("WAVE".utf8)

    mutating func chunk(_ id: String, _ data: [UInt8]) {
        body += Array(id.utf8)
        body += (0..<4).map { UInt8(truncatingIfNeeded: data.count >> (8 * $0)) }
        body += data
        if data.count % 2 == 1 { body.append(0) }
    }

    func write(to path: String) throws -> String {
        let size = (0..<4).map { UInt8(truncatingIfNeeded: body.count >> (8 * $0)) }
        try Data(Array("RIFF".utf8) + size + body).write(to: URL(fileURLWithPath: path))
        return path
    }
}
