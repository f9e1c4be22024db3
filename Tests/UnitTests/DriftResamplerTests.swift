import Jitter
import SpeexDSP
import XCTest

/// The drift corrector's resampler at its settings' quality and at the largest trim either way: a
/// tone through it comes out clean and at its level across the band speech uses. This is what lets
/// the filter be short (its half-length is delay every frame pays): what it adds stays far under
/// Opus's own coding noise.
final class DriftResamplerTests: XCTestCase {
    /// Distortion (everything but the tone at its resampled frequency) relative to the tone, dB,
    /// and the tone's gain, dB, for a -6 dBFS tone of `hz` through `quality` at `ppm`.
    static func measure(hz: Double, ppm: Double, quality: Int) throws -> (distortionDB: Double, gainDB: Double) {
        let rate = 48_000, count = 96_000, amplitude = 16_384.0
        let resampler = try SpeexResampler(rate: rate, quality: quality)
        let steps = Int((ppm / DriftCorrector.ratioStepPPM).rounded())
        let denominator = DriftCorrector.ratioDenominator
        XCTAssertEqual(resampler.setRatio(numerator: UInt32(denominator + steps), denominator: UInt32(denominator)), 0)
        let input = (0..<count).map { Int16((amplitude * sin(2 * .pi * hz * Double($0) / Double(rate))).rounded()) }
        var output = [Int16](repeating: 0, count: 2 * count)
        let produced = input.withUnsafeBufferPointer { i in
            output.withUnsafeMutableBufferPointer { resampler.process(i.baseAddress!, inputCount: count, into: $0.baseAddress!, outputCapacity: 2 * count).produced }
        }
        // Each output sample consumes 1 + trim input samples: the tone comes out that much higher.
        let w = 2 * .pi * hz / Double(rate) * (1 + Double(steps) * DriftCorrector.ratioStepPPM * 1e-6)
        let range = 4_000..<(produced - 4_000)
        var cc = 0.0, ss = 0.0, cs = 0.0, yc = 0.0, ys = 0.0
        for n in range {
            let c = cos(w * Double(n)), s = sin(w * Double(n)), y = Double(output[n])
            cc += c * c; ss += s * s; cs += c * s; yc += y * c; ys += y * s
        }
        let det = cc * ss - cs * cs, a = (yc * ss - ys * cs) / det, b = (ys * cc - yc * cs) / det
        var error = 0.0, tone = 0.0
        for n in range {
            let fit = a * cos(w * Double(n)) + b * sin(w * Double(n))
            error += (Double(output[n]) - fit) * (Double(output[n]) - fit)
            tone += fit * fit
        }
        return (10 * log10(error / tone), 10 * log10(tone / Double(range.count) / (amplitude * amplitude / 2)))
    }

    func testTheResamplerIsCleanAndFlatThroughTheSpeechBandAtTheLargestTrim() throws {
        let settings = DriftSettings(enabled: true)
        for ppm in [settings.maxTrimPPM, -settings.maxTrimPPM] {
            for hz in [200.0, 1_000, 3_000, 6_000, 8_000, 12_000, 16_000] {
                let m = try Self.measure(hz: hz, ppm: ppm, quality: settings.resamplerQuality)
                if hz <= 12_000 {
                    XCTAssertLessThan(m.distortionDB, -68, "\(hz) Hz at \(ppm) ppm: distortion")
                }
                XCTAssertLessThan(abs(m.gainDB), 0.3, "\(hz) Hz at \(ppm) ppm: gain")
                print(String(format: "resampler q%d, %+.0f ppm, %5.0f Hz: distortion %.1f dB, gain %+.2f dB",
                             settings.resamplerQuality, ppm, hz, m.distortionDB, m.gainDB))
            }
        }
        // The bar can fail: the shortest filter does not meet it.
        let shortest = try Self.measure(hz: 12_000, ppm: settings.maxTrimPPM, quality: 0)
        XCTAssertGreaterThan(shortest.distortionDB, -68, "quality 0 at 12 kHz: \(shortest)")
    }
}
