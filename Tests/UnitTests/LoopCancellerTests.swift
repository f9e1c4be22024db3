import AudioPipeline
import CAllocCounter
import Codec
import IntercomConfig
import EchoCancel
import Foundation
import SignalTools
import TestSupport
import XCTest

/// The loop canceller (issue 17, point 3): its filter learns the echo of its reference under a
/// voice; in a closed loop through another terminal it learns the loop only with the sent packets
/// decoded again as its reference (BENCHMARKS.md, "Howling by structure"); with no loop it leaves
/// the voice untouched, which its filter alone would not.
final class LoopCancellerTests: XCTestCase {
    private let frame = 480

    /// Echo removed (dB) over the second half: `reference` 90 ms and 93.75 ms later (-6 dB, -14 dB)
    /// under `nearGain` × another voice.
    private func removedOpenLoop(nearGain: Float) throws -> Double {
        let phrases = try Speech.naturalPhraseSamples(peakDBFS: -12)
        let a = (phrases + phrases).joined().map { Float($0) }
        let b = (phrases.reversed() + phrases.reversed()).joined().map { Float($0) }
        // The filter alone: subtracted whether or not a loop shows.
        let loop = LoopCanceller(.init(sampleRate: 48_000, frameSize: frame, minimumDelayMilliseconds: 10, spanMilliseconds: 300, gated: false))
        func echo(_ n: Int) -> Float { (n >= 4320 ? 0.5 * a[n - 4320] : 0) + (n >= 4500 ? 0.2 * a[n - 4500] : 0) }
        var mic = [Int16](repeating: 0, count: frame), reference = mic
        var echoEnergy = 0.0, leftEnergy = 0.0
        let frames = a.count / frame - 10
        for t in 0..<frames {
            for i in 0..<frame {
                let n = t * frame + i
                mic[i] = Int16((echo(n) + nearGain * b[n]).rounded())
                reference[i] = Int16(a[n])
            }
            mic.withUnsafeMutableBufferPointer { loop.cancel($0.baseAddress!) }
            reference.withUnsafeBufferPointer { loop.sent($0.baseAddress!) }
            guard t > frames / 2 else { continue }
            for i in 0..<frame {
                let n = t * frame + i
                let left = Float(mic[i]) - nearGain * b[n]
                echoEnergy += Double(echo(n) * echo(n))
                leftEnergy += Double(left * left)
            }
        }
        return 10 * log10(echoEnergy / max(leftEnergy, 1))
    }

    func testLearnsTheEchoOfWhatWasSentAloneAndUnderAVoice() throws {
        let alone = try removedOpenLoop(nearGain: 0)
        let quietVoice = try removedOpenLoop(nearGain: 0.1)
        let voice = try removedOpenLoop(nearGain: 1)
        print(String(format: "loop canceller, open loop, natural speech: echo alone %.1f dB removed, under a voice 14 dB below it %.1f dB, under a voice 6 dB above it %.1f dB", alone, quietVoice, voice))
        XCTAssertGreaterThan(alone, 20, "an echo alone is learnt")
        XCTAssertGreaterThan(quietVoice, 10, "under a voice it is still learnt")
        XCTAssertGreaterThan(voice, 3, "a voice louder than the echo does not make the filter wander")
    }

    /// With no loop to remove, what the canceller takes from the talker: the voice's energy over
    /// the energy of what the canceller changed (dB), the reference fed as the daemon feeds it (the
    /// sent frames through Opus and decoded again, after the frame is handed on; the shortest loop
    /// two frames, as `LoopCanceller.Settings(config)` makes it).
    private func voiceKeptWithNoLoop(_ phrases: [[Int16]], gated: Bool) throws -> (keptDB: Double, engagements: Int) {
        let config = DaemonConfig()
        let loop = LoopCanceller(.init(sampleRate: 48_000, frameSize: frame, minimumDelayMilliseconds: 20, spanMilliseconds: 300, gated: gated))
        let encoder = try OpusEncoder(config), decoder = try OpusDecoder(sampleRate: 48_000)
        let voice = (phrases + phrases).joined().map { $0 }
        var mic = [Int16](repeating: 0, count: frame), decoded = mic
        var packet = [UInt8](repeating: 0, count: 1500)
        var voiceEnergy = 0.0, changedEnergy = 0.0
        for f in 0..<(voice.count / frame) {
            for i in 0..<frame { mic[i] = voice[f * frame + i] }
            mic.withUnsafeMutableBufferPointer { loop.cancel($0.baseAddress!) }
            let n = encoder.encode(mic, frameSize: frame, into: &packet, capacity: packet.count)
            XCTAssertEqual(decoder.decodeFrame(packet, length: n, into: &decoded, frameSize: frame), frame)
            decoded.withUnsafeBufferPointer { loop.sent($0.baseAddress!, index: f) }
            for i in 0..<frame {
                let v = Double(voice[f * frame + i]), d = Double(mic[i]) - v
                voiceEnergy += v * v
                changedEnergy += d * d
            }
        }
        return (10 * log10(voiceEnergy / max(changedEnergy, 1e-9)), loop.engagements.load)
    }

    func testWithNoLoopTheVoicePassesUntouched() throws {
        let natural = try Speech.naturalPhraseSamples(peakDBFS: -6)
        let synthetic = [try WAVAudio.read(path: try Speech.nearEnd()).samples]
        for (name, phrases) in [("natural", natural), ("synthetic", synthetic)] {
            let filter = try voiceKeptWithNoLoop(phrases, gated: false), gated = try voiceKeptWithNoLoop(phrases, gated: true)
            print(String(format: "loop canceller, no loop, %@ speech: the filter alone subtracted would change the voice %.1f dB below it; as the daemon runs it, %d engagements, %@", name, filter.keptDB,
                         gated.engagements, gated.keptDB > 100 ? "the voice untouched" : String(format: "changed %.1f dB below it", gated.keptDB)))
            XCTAssertLessThan(filter.keptDB, 20, "\(name): the filter alone learns the voice (the test can fail)")
            XCTAssertEqual(gated.engagements, 0, "\(name): no loop shows")
            XCTAssertGreaterThan(gated.keptDB, 100, "\(name): the voice passes untouched")
        }
    }

    /// One terminal's loop (A's microphone hears B's speaker, B hears nothing), loop gain about ×2:
    /// someone speaks for 6 s, then the room is quiet. No howl guard.
    private func oneLoop(_ reference: TwoTerminalRoom.LoopReference) throws -> [Double] {
        var options = TwoTerminalRoom.Options()
        options.loopReference = reference
        options.micGainDB = 3
        options.speakerGainDB = 3
        options.crossGainDB = [0, nil]
        options.deaf = [1]
        let phrases = try Speech.naturalPhraseSamples(peakDBFS: -18)
        let speech = (0..<3).flatMap { _ in (phrases[0] + phrases[3]).map { Float($0) } }
        let room = try TwoTerminalRoom(options)
        let sent = room.run(talkers: [speech, []], seconds: 12)
        return Levels.frameRMSDB(sent[0], frame: 48_000)
    }

    func testInALoopTheSentPacketsDecodedAgainAreTheReferenceThatWorks() throws {
        let none = try oneLoop(.none), beforeCodec = try oneLoop(.beforeCodec), decoded = try oneLoop(.decoded)
        func trace(_ l: [Double]) -> String { l.map { String(format: "%.0f", $0) }.joined(separator: " ") }
        print("a loop at about ×2, what A sends per second (dBFS): no loop canceller: \(trace(none)); reference before the codec: \(trace(beforeCodec)); reference decoded again: \(trace(decoded))")
        let loudestNone = none.max()!, loudestBefore = beforeCodec.max()!, loudestDecoded = decoded.max()!
        XCTAssertGreaterThan(loudestNone, -6, "without the loop canceller the loop howls (the test can fail)")
        XCTAssertGreaterThan(beforeCodec.last!, loudestBefore - 6, "with the frames before the encoder as the reference the loop is not learnt: it keeps howling")
        XCTAssertLessThan(decoded.last!, loudestDecoded - 10, "with the packets decoded again the loop is learnt and dies down")
    }

    /// `cancel` and `sent`, as the audio thread would call them, do not allocate.
    func testCancellingDoesNotAllocate() throws {
        try XCTSkipUnless(alloc_counter_is_active() == 1, "malloc is not routed through the counter")
        let loop = LoopCanceller(.init(sampleRate: 48_000, frameSize: frame, minimumDelayMilliseconds: 10, spanMilliseconds: 300))
        let speech = try Speech.naturalPhraseSamples(peakDBFS: -12).joined().map { $0 }
        final class Box: @unchecked Sendable { var count: UInt64 = 99 }
        let box = Box()
        let thread = Thread {
            var mic = [Int16](repeating: 0, count: 480), reference = [Int16](repeating: 0, count: 480)
            AllocationCounter.trackCurrentThread()
            let before = AllocationCounter.count
            mic.withUnsafeMutableBufferPointer { m in
                reference.withUnsafeMutableBufferPointer { r in
                    for t in 0..<200 {
                        for i in 0..<480 {
                            r[i] = speech[(t * 480 + i) % speech.count]
                            m[i] = speech[(t * 480 + i + 7000) % speech.count] / 2
                        }
                        loop.cancel(m.baseAddress!)
                        loop.sent(r.baseAddress!)
                    }
                }
            }
            box.count = AllocationCounter.count - before
        }
        AllocationCounter.arm()
        thread.start()
        while !thread.isFinished { usleep(1000) }
        AllocationCounter.disarm()
        XCTAssertEqual(box.count, 0, "allocations in the loop canceller: \(AllocationCounter.callers)")
    }
}
