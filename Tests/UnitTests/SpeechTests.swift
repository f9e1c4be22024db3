import Speech
import SignalTools
import XCTest

/// espeak-ng through its wrapper: each required language speaks; one text rendered again sounds
/// the same (espeak-ng varies its timing by a few per cent between renderings, so the level
/// envelopes are compared); a voice that does not exist is refused with espeak-ng's message.
final class SpeechTests: XCTestCase {
    private func envelope(_ x: [Int16]) -> [Float] {
        Levels.frameEnergies(x.map { Float($0) / 32768 }, frame: 480).map { Float($0.squareRoot()) }
    }

    func testTheSameTextSoundsTheSameWhateverCameBefore() throws {
        let cache = try SpeechCache(voice: SpeechVoice(name: "de"), sampleRate: 48000, peakDBFS: -9)
        let a1 = try cache.render("Nächster Patient bitte")
        _ = try cache.render("Bitte Material ins Labor bringen")
        let a2 = try cache.render("Nächster Patient bitte")
        XCTAssertEqual(Double(a1.count), Double(a2.count), accuracy: Double(a1.count) * 0.03)
        let d = Correlation.findDelay(reference: envelope(a1), in: envelope(a2), lags: -10...10)
        XCTAssertGreaterThan(d?.peak ?? 0, 0.9)
    }

    func testGermanFrenchItalianAndEnglishSpeakAtTheRequestedLevel() throws {
        for (voice, text) in [("de", "Nächster Patient"), ("fr", "Patient suivant"), ("it", "Prossimo paziente"), ("en", "Next patient")] {
            let cache = try SpeechCache(voice: SpeechVoice(name: voice), sampleRate: 48000, peakDBFS: -9)
            let clip = try cache.clip(text)
            XCTAssertFalse(clip.cached)
            XCTAssertGreaterThan(clip.samples.count, 48000 / 4, "\(voice): at least a quarter second of speech")
            XCTAssertEqual(Levels.peakDB(clip.samples.map { Float($0) / 32768 }), -9, accuracy: 0.1, voice)
            XCTAssertTrue(try cache.clip(text).cached, "\(voice): the second time from the cache")
        }
    }

    func testAnUnknownVoiceIsRefusedWithEspeakNGsMessage() {
        XCTAssertThrowsError(try SpeechSynthesizer(voice: SpeechVoice(name: "xx-nonexistent"))) { error in
            XCTAssertTrue("\(error)".contains("xx-nonexistent"), "\(error)")
        }
    }
}
