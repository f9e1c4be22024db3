import SignalTools
import TestSupport
import XCTest

/// The measure behind the steady-delay test (scripts/quality.py): each half second of the clip is
/// found in the recording on its own, and the spread of those delays is the delay's movement.
final class QualityMeasureTests: XCTestCase {
    /// A lone half second that matches other words better than its own (seen once on the rig:
    /// +253 ms, the pieces around it within 1 ms) is not a move of the delay; a delay that really
    /// moves, and stays, is.
    func testALonePieceMatchedElsewhereIsNoMoveButARealStepIs() throws {
        let clip = try WAVAudio.read(path: try Speech.naturalNearEnd()).samples
        let rate = 48_000, piece = rate / 2, lead = rate * 400 / 1000, shift = rate * 250 / 1000
        // The loudest piece away from the ends.
        let pieces = clip.count / piece
        func energy(_ i: Int) -> Double { clip[(i * piece)..<((i + 1) * piece)].reduce(0) { $0 + Double($1) * Double($1) } }
        let i = (4..<(pieces - 4)).max { energy($0) < energy($1) }!
        let start = i * piece

        // Lone misfit: the piece's own place is silent, its words sit 250 ms later.
        var lone = [Int16](repeating: 0, count: clip.count + 2 * rate)
        for n in 0..<clip.count { lone[lead + n] = clip[n] }
        for n in 0..<piece { lone[lead + start + n] = 0 }
        for n in 0..<piece { lone[lead + start + shift + n] = clip[start + n] }
        // A real step: from the piece on, everything is 250 ms later.
        var step = [Int16](repeating: 0, count: clip.count + 2 * rate)
        for n in 0..<clip.count { step[lead + n + (n >= start ? shift : 0)] = clip[n] }

        let dir = NSTemporaryDirectory() + "quality-measure-\(getpid())"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try WAVAudio(sampleRate: rate, channels: 1, samples: clip).write(path: dir + "/clip.wav")
        try WAVAudio(sampleRate: rate, channels: 1, samples: lone).write(path: dir + "/lone.wav")
        try WAVAudio(sampleRate: rate, channels: 1, samples: step).write(path: dir + "/step.wav")
        let q = try Quality.measure([(reference: dir + "/clip.wav", recording: dir + "/lone.wav"),
                                     (reference: dir + "/clip.wav", recording: dir + "/step.wav")])
        let loneSpread = q[0].delayMaxMs - q[0].delayMinMs, stepSpread = q[1].delayMaxMs - q[1].delayMinMs
        print(String(format: "quality measure: piece %d; a lone misfit spreads the delays by %.2f ms, a real 250 ms step by %.2f ms",
                     i, loneSpread, stepSpread))
        XCTAssertLessThanOrEqual(loneSpread, 1, "a lone piece matched elsewhere moved the delay: \(q[0])")
        XCTAssertEqual(stepSpread, 250, accuracy: 1, "a real step of the delay is measured: \(q[1])")
    }
}
