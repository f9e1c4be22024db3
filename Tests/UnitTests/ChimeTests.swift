import Foundation
import SignalTools
import XCTest

final class ChimeTests: XCTestCase {
    private var directory = ""

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "chime-\(getpid())-\(UInt32.random(in: .min ... .max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
    }

    private let settings = ChimeSettings()

    /// The largest step a tone at the chime's peak level can take between two samples: that of
    /// its highest partial (the second tone's octave). A click is a step beyond it.
    private var steepestStep: Double {
        let peak = pow(10, settings.peakDBFS / 20) * 32768
        let highest = settings.firstHz * settings.interval * 2
        return peak * 2 * sin(Double.pi * highest / Double(settings.sampleRate))
    }

    /// Why the edges of `x` would click, or nil: it must start and end on silence (within one
    /// quantisation step) and no step inside the fade-in and fade-out may exceed `steepestStep`.
    private func clickProblem(_ x: [Int16]) -> String? {
        let rate = Double(settings.sampleRate)
        let edges = [0..<Int(settings.attack * rate), (x.count - Int(settings.release * rate))..<x.count]
        for end in [x.first!, x.last!] where abs(Int(end)) > 1 {
            return "edge sample \(end) is not silence"
        }
        for range in edges {
            for i in range.dropFirst() {
                let step = Double(abs(Int(x[i]) - Int(x[i - 1])))
                if step > steepestStep { return "step of \(step) at sample \(i) (bound \(steepestStep))" }
            }
        }
        return nil
    }

    /// Power of one frequency in `x` (Goertzel), relative units.
    private func power(_ x: ArraySlice<Int16>, hz: Double) -> Double {
        let w = 2 * Double.pi * hz / Double(settings.sampleRate)
        var (s1, s2) = (0.0, 0.0)
        for v in x {
            let s = Double(v) + 2 * cos(w) * s1 - s2
            (s2, s1) = (s1, s)
        }
        return s1 * s1 + s2 * s2 - 2 * cos(w) * s1 * s2
    }

    func testGeneratedChimeHasItsLengthAndPeakLevel() {
        let chime = Chime.generate(settings)
        XCTAssertEqual(chime.count, Signals.sampleCount(duration: settings.duration, sampleRate: settings.sampleRate))
        XCTAssertEqual(Levels.peakDB(Signals.toFloat(chime)), settings.peakDBFS, accuracy: 0.01)
        XCTAssertEqual(Levels.clippedSampleCount(chime), 0)
        let quieter = ChimeSettings(duration: 0.4, peakDBFS: -20)
        let short = Chime.generate(quieter)
        XCTAssertEqual(short.count, Signals.sampleCount(duration: quieter.duration, sampleRate: quieter.sampleRate))
        XCTAssertEqual(Levels.peakDB(Signals.toFloat(short)), quieter.peakDBFS, accuracy: 0.01)
    }

    func testGeneratedChimeStartsAndEndsWithoutClicks() {
        let chime = Chime.generate(settings)
        XCTAssertNil(clickProblem(chime))
        // The check catches a chime cut off mid-tone (at its loudest sample) or started mid-tone.
        let loudest = chime.indices.max { abs(Int(chime[$0])) < abs(Int(chime[$1])) }!
        XCTAssertNotNil(clickProblem(Array(chime[...loudest])))
        XCTAssertNotNil(clickProblem(Array(chime[loudest...])))
        // And a jump inside the fade-in, e.g. a tone switched on at full level.
        var gated = chime
        let rate = Double(settings.sampleRate)
        for i in 1..<Int(settings.attack * rate) { gated[i] = chime[i + Int(settings.attack * rate)] }
        XCTAssertNotNil(clickProblem(gated))
    }

    func testTwoTonesAFifthApartTheSecondEnteringLater() {
        let chime = Chime.generate(settings)
        let rate = Double(settings.sampleRate)
        let (low, high) = (settings.firstHz, settings.firstHz * settings.interval)
        let split = Int(settings.secondStart * rate)
        let before = chime[0..<split]
        let after = chime[(split + Int(settings.attack * rate))...]
        XCTAssertGreaterThan(power(before, hz: low), 100 * power(before, hz: high), "only the first tone at first")
        XCTAssertGreaterThan(power(after, hz: high), power(after, hz: low), "then the second tone leads")
        XCTAssertEqual(settings.interval, 3.0 / 2.0, "a perfect fifth")
    }

    func testWAVChimeIsLoadedAndStereoMixedDownToMono() throws {
        let path = directory + "/bell.wav"
        let mono = WAVAudio(sampleRate: settings.sampleRate, channels: 1, samples: Chime.generate(ChimeSettings(firstHz: 440)))
        try mono.write(path: path)
        XCTAssertEqual(try Chime.load(path: path, sampleRate: settings.sampleRate), mono.samples)

        let left = Chime.generate(settings)
        let stereo = WAVAudio(sampleRate: settings.sampleRate, channels: 2,
                              samples: left.flatMap { [$0, $0 / 2] })
        try stereo.write(path: path)
        let loaded = try Chime.load(path: path, sampleRate: settings.sampleRate)
        XCTAssertEqual(loaded.count, left.count)
        XCTAssertEqual(loaded, stereo.mono().samples)
        XCTAssertNotEqual(loaded, left, "both channels count")
    }

    func testWAVChimeThatCannotBePlayedIsRefusedNamingTheFile() throws {
        let path = directory + "/cd-rate.wav"
        let otherRate = settings.sampleRate * 147 / 160 // 44.1 kHz
        try WAVAudio(sampleRate: otherRate, channels: 1, samples: [0, 1, 2]).write(path: path)
        XCTAssertThrowsError(try Chime.load(path: path, sampleRate: settings.sampleRate)) { error in
            let e = error as? WAVError
            XCTAssertEqual(e?.path, path)
            XCTAssertEqual(e?.kind, .unsupportedFormat)
            XCTAssertTrue("\(error)".contains("\(otherRate) Hz") && "\(error)".contains(path), "\(error)")
        }

        let empty = directory + "/empty.wav"
        try WAVAudio(sampleRate: settings.sampleRate, channels: 1, samples: []).write(path: empty)
        XCTAssertThrowsError(try Chime.load(path: empty)) { XCTAssertEqual(($0 as? WAVError)?.path, empty) }

        let text = directory + "/notes.wav"
        try Data("not audio".utf8).write(to: URL(fileURLWithPath: text))
        XCTAssertThrowsError(try Chime.load(path: text)) { XCTAssertEqual(($0 as? WAVError)?.kind, .notWAV) }

        let missing = directory + "/missing.wav"
        XCTAssertThrowsError(try Chime.load(path: missing)) {
            XCTAssertTrue("\($0)".contains(missing) && "\($0)".contains(String(cString: strerror(ENOENT))), "\($0)")
        }
    }
}
