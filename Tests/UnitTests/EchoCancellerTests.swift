import Calls
import IntercomConfig
@testable import EchoCancel
import IntercomDaemon
import SignalTools
import SpeexDSP
import TestSupport
import XCTest

/// The canceller on a synthetic echo path (delay + gain + a little reverb), without devices.
final class EchoCancellerTests: XCTestCase {
    private let frame = 480

    /// Speech-like far end: noise shaped by a slowly varying envelope.
    private func farEnd(seconds: Double, seed: UInt64) -> [Int16] {
        var rng = SplitMix64(seed: seed)
        let n = Int(seconds * 48000)
        var out = [Int16](repeating: 0, count: n)
        var lp = 0.0
        for i in 0..<n {
            let envelope = 0.5 + 0.5 * sin(Double(i) / 48000 * 2 * .pi * 3)
            let white = Double(rng.next() % 20001) / 10000 - 1
            lp = 0.7 * lp + 0.3 * white
            out[i] = Int16(lp * 8000 * envelope)
        }
        return out
    }

    /// The adaptive filter alone: the gate and the residual suppressor would hide an unlearned path.
    private var linearFilterOnly: EchoCancelSettings {
        EchoCancelSettings(daemonConfig(frame: frame) {
            $0.echo.residualGate = false; $0.echo.echoSuppressDb = 0; $0.echo.echoSuppressActiveDb = 0
        })
    }

    /// Runs the canceller over `mic = echo(far) + near`, the reference queued like the engine does.
    /// With an estimator, it steps as often as its thread would; `afterFrame` sees each frame's index.
    private func run(_ c: EchoCanceller, far: [Int16], near: [Int16]?, delay: Int,
                     estimator: EchoDelayEstimator? = nil, ownSound: Bool = false,
                     afterFrame: ((Int) -> Void)? = nil) -> (mic: [Float], out: [Float]) {
        let stepFrames = Int(EchoDelayEstimator.stepSeconds * 48000) / frame
        var mic = [Float](), out = [Float]()
        var inBuf = [Int16](repeating: 0, count: frame), outBuf = [Int16](repeating: 0, count: frame)
        let silence = [Int16](repeating: 0, count: frame)
        c.played(silence); c.played(silence)  // primed playback, as the engine does
        for f in 0..<(far.count / frame) {
            for i in 0..<frame {
                let t = f * frame + i
                var echo = 0.0
                if t >= delay { echo += 0.6 * Double(far[t - delay]) }
                if t >= delay + 300 { echo += 0.2 * Double(far[t - delay - 300]) }
                inBuf[i] = Int16(clamping: Int(echo) + Int(near?[t] ?? 0))
            }
            c.process(capture: inBuf, output: &outBuf)
            c.played(Array(far[(f * frame)..<((f + 1) * frame)]), ownSound: ownSound)
            mic += inBuf.map { Float($0) / 32768 }
            out += outBuf.map { Float($0) / 32768 }
            if f % stepFrames == stepFrames - 1 { estimator?.step() }
            afterFrame?(f)
        }
        return (mic, out)
    }

    func testCancelsASyntheticEchoByMoreThan20dBAfterConvergence() throws {
        let c = try EchoCanceller(EchoCancelSettings(daemonConfig(frame: frame) { $0.echo.tailMs = 200 }))
        let far = farEnd(seconds: 8, seed: 1)
        let r = run(c, far: far, near: nil, delay: 2400)
        let start = 3 * 48000
        let erle = Levels.erleDB(mic: Array(r.mic[start...]), processed: Array(r.out[start...]), frame: frame, activeThresholdDB: -50)
        XCTAssertGreaterThan(erle.medianDB, 20, "ERLE after 3 s")
        XCTAssertGreaterThan(c.erleDB.load, 15, "the canceller's own estimate tracks it")
    }

    func testEchoDelayedBeyondTheTailIsCancelledOnceTheReferenceIsAligned() throws {
        let far = farEnd(seconds: 8, seed: 4)
        let delay = 12000  // 250 ms: longer than the 200 ms tail
        // Without the gate, which would hide the unaligned path.
        let unaligned = try EchoCanceller(EchoCancelSettings(daemonConfig(frame: frame) { $0.echo.tailMs = 200; $0.echo.residualGate = false }))
        let r0 = run(unaligned, far: far, near: nil, delay: delay)
        let aligned = try EchoCanceller(EchoCancelSettings(daemonConfig(frame: frame) { $0.echo.tailMs = 200 }))
        // Played position of far[x] is x + 960 (two primed frames first): the echo arrives delay - 960 later.
        aligned.requestEchoDelay(samples: delay - 960)
        let r1 = run(aligned, far: far, near: nil, delay: delay)
        let start = 3 * 48000
        let before = Levels.erleDB(mic: Array(r0.mic[start...]), processed: Array(r0.out[start...]), frame: frame, activeThresholdDB: -50)
        let after = Levels.erleDB(mic: Array(r1.mic[start...]), processed: Array(r1.out[start...]), frame: frame, activeThresholdDB: -50)
        XCTAssertLessThan(before.medianDB, 10, "a path beyond the tail is not cancelled")
        XCTAssertGreaterThan(after.medianDB, 20, "aligned, it is")
    }

    /// A sound server whose monitor returns exactly what it rendered pairs the streams so that
    /// the echo can come at, or a little before, its nominal position: nothing causal can cancel
    /// it until the reference is read ahead of the capture position.
    func testEchoArrivingBeforeItsNominalPositionIsCancelledOnceTheReferenceReadsAhead() throws {
        let far = farEnd(seconds: 6, seed: 8)
        let delay = 720  // played position of far[x] is x + 960: the echo comes 240 samples early
        let settings = EchoCancelSettings(daemonConfig(frame: frame) { $0.echo.tailMs = 200; $0.echo.residualGate = false })
        let unaligned = try EchoCanceller(settings)
        let r0 = run(unaligned, far: far, near: nil, delay: delay)
        let aligned = try EchoCanceller(settings)
        aligned.requestEchoDelay(samples: delay - 960)
        let r1 = run(aligned, far: far, near: nil, delay: delay)
        let start = 3 * 48000
        let before = Levels.erleDB(mic: Array(r0.mic[start...]), processed: Array(r0.out[start...]), frame: frame, activeThresholdDB: -50)
        let after = Levels.erleDB(mic: Array(r1.mic[start...]), processed: Array(r1.out[start...]), frame: frame, activeThresholdDB: -50)
        XCTAssertLessThan(before.medianDB, 10, "an echo ahead of its reference is not cancelled")
        XCTAssertLessThan(aligned.referenceShift.load, 0, "the reference reads ahead")
        XCTAssertGreaterThan(after.medianDB, 20, "read ahead, it is")
        XCTAssertEqual(aligned.referenceMisses.load, 0, "never further ahead than what was played")
    }

    /// The estimator finds such an early echo too, and moves the reference ahead by itself.
    func testDelayEstimatorMeasuresAnEarlyEchoAndTheCancellerThenRemovesIt() throws {
        let far = farEnd(seconds: 8, seed: 9)
        let delay = 720
        let c = try EchoCanceller(EchoCancelSettings(daemonConfig(frame: frame) { $0.echo.tailMs = 200; $0.echo.residualGate = false }))
        let estimator = EchoDelayEstimator(canceller: c)
        var mic = [Float](), out = [Float]()
        var inBuf = [Int16](repeating: 0, count: frame), outBuf = [Int16](repeating: 0, count: frame)
        let silence = [Int16](repeating: 0, count: frame)
        c.played(silence); c.played(silence)
        for f in 0..<(far.count / frame) {
            // The echo of far[x] is in microphone sample x + delay; far[x] is played at x + 960.
            for i in 0..<frame {
                let t = f * frame + i
                inBuf[i] = t >= delay ? Int16(clamping: Int(0.6 * Double(far[t - delay]))) : 0
            }
            c.process(capture: inBuf, output: &outBuf)
            c.played(Array(far[(f * frame)..<((f + 1) * frame)]))
            mic += inBuf.map { Float($0) / 32768 }
            out += outBuf.map { Float($0) / 32768 }
            if f % 12 == 11 { estimator.step() }  // as its thread would, every 120 ms
        }
        XCTAssertEqual(Double(estimator.estimate.load), Double(delay - 960), accuracy: 12, "early by 5 ms")
        XCTAssertLessThan(c.referenceShift.load, 0)
        let erle = Levels.erleDB(mic: Array(mic[(5 * 48000)...]), processed: Array(out[(5 * 48000)...]), frame: frame, activeThresholdDB: -50)
        XCTAssertGreaterThan(erle.medianDB, 20)
    }

    /// A starved client, modelled as the sound server sees it: the speaker drains the playback
    /// buffer and then plays silence while the microphone keeps recording. The backlog puts
    /// capture ahead of what was played, the references go missing and the canceller re-pairs
    /// the streams. The echo must then follow its reference, or nothing cancels it.
    func testRealignmentAfterAStallPairsTheStreamsSoTheEchoFollowsItsReferenceAndIsCancelled() throws {
        let c = try EchoCanceller(EchoCancelSettings(daemonConfig(frame: frame) { $0.echo.tailMs = 200; $0.echo.residualGate = false }))
        let far = farEnd(seconds: 10, seed: 11)
        let bufferFrames = 3, acousticDelay = 240
        let stall = 300..<315  // cycles (10 ms each): 150 ms without the audio thread
        var queue = [Int16](), emitted = [Int16](), backlog = [[Int16]]()
        var nextFar = 0
        var mic = [Float](), out = [Float]()
        var outBuf = [Int16](repeating: 0, count: frame)
        var missesAfterRealign: Int?
        let silence = [Int16](repeating: 0, count: frame)
        for _ in 0..<2 { queue += silence; c.played(silence) }  // primed, as the engine does
        for cycle in 0..<(far.count / frame - 20) {
            // The device: one frame leaves the speaker (silence when the buffer ran dry) and the
            // microphone records its echo.
            let heard = queue.count >= frame ? Array(queue.prefix(frame)) : silence
            queue.removeFirst(min(frame, queue.count))
            emitted += heard
            let base = emitted.count - frame
            backlog.append((0..<frame).map { i in
                let t = base + i - acousticDelay
                return t >= 0 ? Int16(clamping: Int(0.6 * Double(emitted[t]))) : 0
            })
            if stall.contains(cycle) { continue }
            // The audio thread, in the engine's order: read all capture, fill playback, re-pair.
            for captured in backlog {
                c.process(capture: captured, output: &outBuf)
                mic += captured.map { Float($0) / 32768 }
                out += outBuf.map { Float($0) / 32768 }
            }
            backlog.removeAll()
            while queue.count < bufferFrames * frame {
                let next = Array(far[nextFar..<(nextFar + frame)])
                nextFar += frame
                queue += next
                c.played(next)
            }
            c.realignIfOutOfStep()
            if missesAfterRealign == nil, c.realignments.load > 0 { missesAfterRealign = c.referenceMisses.load }
        }
        XCTAssertEqual(c.realignments.load, 1, "the stall put capture ahead of playback once")
        XCTAssertEqual(c.referenceMisses.load, missesAfterRealign, "no reference missing after the re-pairing")
        let start = (stall.upperBound + 300) * frame  // 3 s to converge again
        let erle = Levels.erleDB(mic: Array(mic[start...]), processed: Array(out[start...]), frame: frame, activeThresholdDB: -50)
        XCTAssertGreaterThan(erle.medianDB, 20, "the echo is cancelled again after the stall")
    }

    func testBypassPassesTheMicrophoneThroughUntouched() throws {
        let c = try EchoCanceller(EchoCancelSettings(daemonConfig(frame: frame)))
        c.bypass.set(true)
        let far = farEnd(seconds: 2, seed: 2)
        let r = run(c, far: far, near: nil, delay: 2400)
        XCTAssertEqual(r.mic, r.out)
    }

    /// speexdsp's preprocessor returns the previous frame; with nothing for it to do (no noise
    /// suppression, no AGC: the defaults) it is not run, and a sound leaves in the frame it came in.
    /// The residual echo suppressor works on the frame it is given.
    func testThePreprocessorIsSkippedWhenItHasNothingToDoAndThenAddsNoFrameOfDelay() throws {
        func firstLoudFrame(_ change: @escaping (inout DaemonConfig) -> Void) throws -> Int? {
            let canceller = try EchoCanceller(EchoCancelSettings(daemonConfig(frame: 480, change)))
            let silence = [Int16](repeating: 0, count: 480)
            let tone = (0..<480).map { Int16(8000 * sin(2 * Double.pi * 1000 * Double($0) / 48000)) }
            var out = [Int16](repeating: 0, count: 480)
            for f in 0..<8 {
                canceller.played(silence)
                canceller.process(capture: f >= 3 ? tone : silence, output: &out)
                if out.map({ abs(Int($0)) }).max()! > 2000 { return f }
            }
            return nil
        }
        XCTAssertEqual(try firstLoudFrame { _ in }, 3, "the defaults: the tone leaves in the frame it arrived")
        XCTAssertEqual(try firstLoudFrame { $0.echo.noiseSuppressDb = -15 }, 4,
                       "with noise suppression the preprocessor returns it one frame (10 ms) later")
    }

    /// speexdsp high-passes the microphone (its DC notch) before it cancels; the canceller hands
    /// on the microphone itself minus only the echo estimate, so with no far end a person in the
    /// room leaves sample for sample as they came in, low voice included.
    func testWithTheFarEndSilentTheNearEndLeavesUnfiltered() throws {
        // The defaults: the residual echo suppressor and the gate run, and find nothing to do.
        let c = try EchoCanceller(EchoCancelSettings(daemonConfig(frame: frame)))
        XCTAssertFalse(c.delaysAFrame, "the defaults do not run speexdsp's preprocessor")
        let speech = try Speech.naturalPhraseSamples().prefix(3).joined()
        let near = Array(speech) + [Int16](repeating: 0, count: frame - speech.count % frame)
        let r = run(c, far: [Int16](repeating: 0, count: near.count), near: near, delay: 2400)
        let worst = zip(r.mic, r.out).map { abs(Double($0 - $1)) * 32768 }.max() ?? .infinity
        XCTAssertEqual(worst, 0, "largest difference in LSB")
        // What speexdsp alone hands on for the same microphone: its notch reshapes the voice.
        let speex = try SpeexEcho(frameSize: frame, tailSamples: 9600, sampleRate: 48000, noiseSuppressDB: 0, agc: false)
        let silence = [Int16](repeating: 0, count: frame)
        var out = [Int16](repeating: 0, count: frame), notchedWorst = 0
        for f in 0..<(near.count / frame) {
            let mic = Array(near[(f * frame)..<((f + 1) * frame)])
            speex.cancelEcho(capture: mic, reference: silence, output: &out)
            notchedWorst = max(notchedWorst, zip(mic, out).map { abs(Int($0) - Int($1)) }.max()!)
        }
        XCTAssertGreaterThan(notchedWorst, 100, "speexdsp's own output, largest difference in LSB")
    }

    /// The streams restart (an xrun, a device opened again) with the same echo path: what the
    /// filter learnt is kept, so the first frames after the restart are cancelled as before it,
    /// where a fresh filter has learnt nothing yet.
    func testARestartKeepsWhatTheFilterLearnt() throws {
        let settings = linearFilterOnly
        let far = farEnd(seconds: 5, seed: 3)
        let c = try EchoCanceller(settings)
        _ = run(c, far: far, near: nil, delay: 2400)
        c.reset()
        XCTAssertEqual(c.resets.load, 1)
        let kept = run(c, far: Array(far.prefix(48000)), near: nil, delay: 2400)
        let fresh = run(try EchoCanceller(settings), far: Array(far.prefix(48000)), near: nil, delay: 2400)
        let span = 2400..<19200  // from the echo's arrival to 0.4 s
        let keptERLE = Levels.erleDB(mic: Array(kept.mic[span]), processed: Array(kept.out[span]), frame: frame, activeThresholdDB: -50)
        let freshERLE = Levels.erleDB(mic: Array(fresh.mic[span]), processed: Array(fresh.out[span]), frame: frame, activeThresholdDB: -50)
        XCTAssertGreaterThan(keptERLE.medianDB, 20, "cancelled from the first frames after the restart")
        XCTAssertLessThan(freshERLE.medianDB, 15, "a fresh filter has not learnt the path in that time")
    }

    /// The streams restart and the echo comes back 70 ms later than before (a USB card, a sound
    /// server that reopened with another latency). The filter must not adapt at the wrong place
    /// until the estimator has measured the new delay: held, it is intact when the reference moves,
    /// and cancels as before within 2 s, where adapting on would unlearn the path.
    func testARestartThatMovedTheEchoPathCancelsAsBeforeOnceTheDelayIsMeasured() throws {
        let settings = linearFilterOnly
        let far = farEnd(seconds: 12, seed: 21)
        let c = try EchoCanceller(settings)
        let estimator = EchoDelayEstimator(canceller: c)
        let before = run(c, far: Array(far.prefix(5 * 48000)), near: nil, delay: 2400, estimator: estimator)
        XCTAssertNotEqual(estimator.estimate.load, EchoDelayEstimator.none, "the delay was measured before the restart")
        XCTAssertGreaterThan(c.erleDB.load, EchoCanceller.workingERLEDB, "and the filter had the path")
        let settled = Levels.erleDB(mic: Array(before.mic[(3 * 48000)...]), processed: Array(before.out[(3 * 48000)...]),
                                    frame: frame, activeThresholdDB: -50)
        c.reset()
        var movedAt: Int?
        let after = run(c, far: Array(far.suffix(7 * 48000)), near: nil, delay: 2400 + 3360, estimator: estimator) { f in
            if movedAt == nil, c.referenceMoves.load > 0 { movedAt = f }
        }
        XCTAssertEqual(c.referenceMoves.load, 1, "the reference moved with the measured delay")
        // The estimator searches a new pairing from its first half second (a window and 100 ms).
        print("echo path moved by a restart: the reference moved at frame \(movedAt ?? -1)")
        XCTAssertLessThanOrEqual(movedAt ?? .max, 48000 / frame, "moved within a second of the restart (frame \(movedAt ?? -1))")
        let third = 2 * 48000..<3 * 48000
        let thirdSecond = Levels.erleDB(mic: Array(after.mic[third]), processed: Array(after.out[third]), frame: frame, activeThresholdDB: -50)
        XCTAssertGreaterThan(thirdSecond.medianDB, settled.medianDB - 3,
                             "2-3 s after the restart as before it (\(settled.medianDB) dB)")
    }

    /// The same restart with the path unchanged: the filter goes on cancelling from the first
    /// frames, not held for a measurement.
    func testARestartThatKeptTheEchoPathIsNotHeld() throws {
        let settings = linearFilterOnly
        let far = farEnd(seconds: 7, seed: 22)
        let c = try EchoCanceller(settings)
        let estimator = EchoDelayEstimator(canceller: c)
        _ = run(c, far: Array(far.prefix(5 * 48000)), near: nil, delay: 2400, estimator: estimator)
        c.reset()
        let after = run(c, far: Array(far.suffix(2 * 48000)), near: nil, delay: 2400, estimator: estimator)
        let span = 2400..<48000
        let erle = Levels.erleDB(mic: Array(after.mic[span]), processed: Array(after.out[span]), frame: frame, activeThresholdDB: -50)
        XCTAssertGreaterThan(erle.medianDB, 20, "cancelled through the first second after the restart")
        XCTAssertEqual(c.referenceMoves.load, 0)
    }

    /// A filter still learning has not shown where it learnt the echo, so a jump of the measured
    /// delay aligns the reference afresh instead of moving it by the jump; after the jump it
    /// converges like a new filter.
    func testAFilterThatNeverConvergedIsAlignedAfreshWhenTheDelayJumps() throws {
        let settings = linearFilterOnly
        let far = farEnd(seconds: 5, seed: 23)
        let c = try EchoCanceller(settings)
        c.requestEchoDelay(samples: 2400 - 960)
        _ = run(c, far: Array(far.prefix(4800)), near: nil, delay: 2400)  // 0.1 s: still learning
        XCTAssertLessThan(c.erleDB.load, EchoCanceller.workingERLEDB)
        // 300 ms later, beyond the filter (the second run primes playback again: 960 more).
        let jumped = 2400 + 14_400 - 1920
        c.requestEchoDelay(samples: jumped)
        let after = run(c, far: Array(far.suffix(4 * 48000)), near: nil, delay: 2400 + 14_400)
        XCTAssertEqual(c.referenceMoves.load, 0, "not moved as a filter that had the path")
        XCTAssertEqual(c.referenceShift.load, jumped - 240, "aligned with the safety margin")
        let erle = Levels.erleDB(mic: Array(after.mic[(2 * 48000)...]), processed: Array(after.out[(2 * 48000)...]),
                                 frame: frame, activeThresholdDB: -50)
        XCTAssertGreaterThan(erle.medianDB, 20)
    }

    /// A filter that cancels well has the path: a measured jump of the delay while it does is a
    /// wrong estimate (seen on the rig seconds after a stall), and moving the reference would
    /// throw away what it learnt.
    func testAWorkingFilterIgnoresAWrongDelayEstimate() throws {
        let settings = linearFilterOnly
        let far = farEnd(seconds: 6, seed: 12)
        let c = try EchoCanceller(settings)
        c.requestEchoDelay(samples: 2400 - 960)  // measured: within the filter, nothing moves
        _ = run(c, far: Array(far.prefix(4 * 48000)), near: nil, delay: 2400)
        XCTAssertGreaterThan(c.erleDB.load, EchoCanceller.workingERLEDB, "converged")
        c.reset()  // the harness starts its positions anew; the path stays as it was
        c.requestEchoDelay(samples: 2400 - 960 + 4800)  // a wrong 100 ms jump
        let after = run(c, far: Array(far.suffix(2 * 48000)), near: nil, delay: 2400)
        XCTAssertEqual(c.referenceMoves.load, 0, "the reference stays")
        XCTAssertEqual(c.referenceShift.load, 0)
        let erle = Levels.erleDB(mic: after.mic, processed: after.out, frame: frame, activeThresholdDB: -50)
        XCTAssertGreaterThan(erle.medianDB, 20, "and the echo is still cancelled")
    }

    /// The gate's reason to exist: right after a reset speexdsp has learned nothing, so the echo
    /// goes out nearly whole. Measured with the residual suppressor off, so the gate is seen alone.
    func testResidualGateMutesTheEchoWhileTheCancellerIsStillLearning() throws {
        let far = farEnd(seconds: 1, seed: 5)
        func firstHalfSecondERLE(gate: Bool) throws -> (erle: Double, gated: Int) {
            let c = try EchoCanceller(EchoCancelSettings(daemonConfig(frame: frame) {
                $0.echo.residualGate = gate; $0.echo.echoSuppressDb = 0; $0.echo.echoSuppressActiveDb = 0
            }))
            let r = run(c, far: far, near: nil, delay: 2400)
            let span = 4800..<24000  // from the echo's arrival to 0.5 s
            let erle = Levels.erleDB(mic: Array(r.mic[span]), processed: Array(r.out[span]), frame: frame, activeThresholdDB: -50)
            return (erle.medianDB, c.gatedFrames.load)
        }
        let open = try firstHalfSecondERLE(gate: false)
        let gated = try firstHalfSecondERLE(gate: true)
        XCTAssertLessThan(open.erle, 15, "speexdsp alone while learning")
        XCTAssertGreaterThan(gated.erle, open.erle + 20, "the gate adds its 30 dB while the canceller learns")
        XCTAssertEqual(open.gated, 0)
        XCTAssertGreaterThan(gated.gated, 30)
    }

    /// Once the canceller has converged, what it leaves is far below a person in the room: double
    /// talk passes the gate (near-end energy within 1 dB of the ungated canceller's).
    func testDoubleTalkPassesTheGateOnceTheCancellerHasConverged() throws {
        let far = farEnd(seconds: 9, seed: 6)
        let talkFrom = 6 * 48000
        let near = farEnd(seconds: 3, seed: 7)
        let nearAt = [Int16](repeating: 0, count: talkFrom) + near
        func doubleTalkOutput(gate: Bool) throws -> [Float] {
            let c = try EchoCanceller(EchoCancelSettings(daemonConfig(frame: frame) { $0.echo.residualGate = gate }))
            return Array(run(c, far: far, near: nearAt, delay: 2400).out[talkFrom...])
        }
        let open = try doubleTalkOutput(gate: false)
        let gated = try doubleTalkOutput(gate: true)
        let energy = { (x: [Float]) in x.reduce(0.0) { $0 + Double($1 * $1) } }
        let keptDB = 10 * log10(energy(gated) / energy(open))
        XCTAssertGreaterThan(keptDB, -1, "near-end energy kept in double talk")
        XCTAssertGreaterThan(Correlation.normalizedCorrelation(gated, open), 0.95)
    }

    /// When an echo ends and the room is silent, so is what is sent. The un-notching inverse
    /// (`NearEndRestore`) kept ringing with the filter's low-frequency error and let it out as
    /// the blend returned to the restored microphone, a tail after the echo ended: here -64 dBFS,
    /// and -44 dBFS after a sequence of tones. What is left is the filter's own tail, 7 LSB.
    func testSilenceAfterAnEchoStaysSilent() throws {
        let far = farEnd(seconds: 2, seed: 31) + [Int16](repeating: 0, count: 96000)
        let r = run(try EchoCanceller(EchoCancelSettings(daemonConfig(frame: frame))), far: far, near: nil, delay: 2400)
        let after = (96000 + 2400 + 300 + 480)..<r.out.count  // the echo and its reverb over
        let loudest = 20 * log10(max(Double(r.out[after].map { abs($0) }.max() ?? 0), 1e-9))
        print(String(format: "silence after an echo: loudest sent %.1f dBFS", loudest))
        XCTAssertLessThan(loudest, -70)
    }

    /// A terminal's event tones are pure notes. The filter learns a frequency only while it is
    /// played, and adapting elsewhere disturbs it, so a note can come back nearly whole; the gate
    /// took that for someone talking, and the far end heard this room's tones (the rig caught a
    /// caller's "participant_left" at a callee). Every cue, the ringback and the chime, at the
    /// idle level and then in reverse order at the in-call level, each 0.7 s after the last:
    /// each is sent at least 40 dB below its echo. Told the same sounds are a far end's, the
    /// gate leaves them to the filter, and some do leak: the sequence is a real test. A voice in
    /// the room over the in-call tones goes out as it does with no tones (within 1.5 dB; the gate's usual
    /// double talk over notes this loud costs 0.8 dB of it).
    func testTheTerminalsOwnTonesDoNotReachTheFarEnd() throws {
        var far: [Int16] = []
        var spans: [(name: String, range: Range<Int>)] = []
        let sounds = [("ringback", Tones.render([(hz: 425, ms: 1000)])), ("chime", Chime.generate())]
            + Cue.allCases.map { cue in (cue.rawValue, Tones.render(cue.notes.map { (hz: $0.hz, ms: Double($0.ms)) })) }
        for (name, samples) in sounds + sounds.reversed().map({ ($0.0, $0.1.map { $0 / 4 }) }) {
            spans.append((name, far.count..<(far.count + samples.count + 4800)))
            far += samples + [Int16](repeating: 0, count: 33600)
        }
        far += [Int16](repeating: 0, count: frame - far.count % frame)
        let delay = 2400
        let peak = { (x: ArraySlice<Float>) in 20 * log10(max(Double(x.map { abs($0) }.max() ?? 0), 1e-9)) }
        func worstLeak(ownSound: Bool) throws -> (name: String, removedDB: Double) {
            let r = run(try EchoCanceller(EchoCancelSettings(daemonConfig(frame: frame))), far: far, near: nil, delay: delay,
                        ownSound: ownSound)
            var worst = (name: "", removedDB: Double.infinity)
            for (name, range) in spans {
                let span = (range.lowerBound + delay)..<min(range.upperBound + delay, r.mic.count)
                let removed = peak(r.mic[span]) - peak(r.out[span])
                if removed < worst.removedDB { worst = (name, removed) }
            }
            print(String(format: "own tones (%@): the worst, %@, sent %.1f dB below its echo",
                         ownSound ? "own sound" : "as a far end's", worst.name, worst.removedDB))
            return worst
        }
        let own = try worstLeak(ownSound: true)
        XCTAssertGreaterThan(own.removedDB, 40, "\(own.name) reached the far end")
        XCTAssertLessThan(try worstLeak(ownSound: false).removedDB, 20, "the filter alone lets some notes through")

        // Someone talks through the in-call cues from "busy" on.
        let talk = spans.last { $0.name == Cue.busy.rawValue }!.range.lowerBound + delay
        let voice = farEnd(seconds: 3, seed: 21).map { $0 / 2 }
        let near = [Int16](repeating: 0, count: talk) + voice + [Int16](repeating: 0, count: far.count - talk - voice.count)
        func voiceSent(over far: [Int16]) throws -> [Double] {
            let c = try EchoCanceller(EchoCancelSettings(daemonConfig(frame: frame)))
            return run(c, far: far, near: near, delay: delay, ownSound: true).out[talk..<(talk + voice.count)].map(Double.init)
        }
        // The voice's share of what was sent over the tones: its projection on the voice as sent alone.
        let alone = try voiceSent(over: [Int16](repeating: 0, count: far.count))
        let overTones = try voiceSent(over: far)
        let dot = { (a: [Double], b: [Double]) in zip(a, b).reduce(0.0) { $0 + $1.0 * $1.1 } }
        let keptDB = 20 * log10(max(dot(overTones, alone) / dot(alone, alone), 1e-9))
        print(String(format: "own tones: a voice over them kept %.2f dB", keptDB))
        XCTAssertGreaterThan(keptDB, -1.5, "the voice in the room over the tones")
    }

    /// The gate alone, after a canceller that has converged on a far end's voice (60 dB removed):
    /// the terminal plays a note of 1230 Hz, then one of 840 Hz that the filter has never heard,
    /// and the echo path has moved a frame earlier, so the new note's echo comes back whole a
    /// frame before its reference. The gate takes the notes of the reference's next frame too, so
    /// that echo is the notes' and not someone in the room; and a frame that is the notes' echo is
    /// muted to nothing (the 60 dB for other echo leave such a note at -76 dBFS, which the rig
    /// caught at a callee). Told the next frame is not the terminal's own, the same frame opens
    /// the gate: the measure can fail.
    func testTheGateMutesTheEchoOfANewNoteThatComesBeforeItsReference() {
        func loudestSent(upcomingIsOwn: Bool) -> Int {
            var gate = EchoGate(frameSize: frame, sampleRate: 48000, tailSamples: 4800)
            let noise = farEnd(seconds: 9, seed: 5)
            let tone = { (hz: Double, f: Int) in (0..<self.frame).map { i in
                Int16(10_000 * sin(2 * .pi * hz * Double(f * self.frame + i) / 48000)) } }
            var out = [Int16](repeating: 0, count: frame)
            func step(_ reference: [Int16], _ own: Bool, _ upcoming: [Int16], _ upcomingOwn: Bool, echo: [Int16]) -> Int {
                out = echo
                gate.process(reference: reference, ownSound: own, upcoming: upcoming, upcomingOwnSound: upcomingOwn, output: &out)
                return out.map { abs(Int($0)) }.max()!
            }
            for f in 0..<800 {  // the far end talks; the canceller removes 60 dB
                let r = Array(noise[(f * frame)..<((f + 1) * frame)]), u = Array(noise[((f + 1) * frame)..<((f + 2) * frame)])
                _ = step(r, false, u, false, echo: r.map { $0 / 1000 })
            }
            var loudest = 0
            for f in 0..<10 {  // the first note, learnt
                loudest = max(loudest, step(tone(1230, f), true, tone(1230, f + 1), true, echo: tone(1230, f).map { $0 / 1000 }))
            }
            // The second note's echo a frame early, whole; then on time, still whole.
            loudest = max(loudest, step(tone(1230, 10), true, tone(840, 11), upcomingIsOwn, echo: tone(840, 11).map { $0 / 2 }))
            for f in 11..<20 {
                loudest = max(loudest, step(tone(840, f), true, tone(840, f + 1), true, echo: tone(840, f + 1).map { $0 / 2 }))
            }
            return loudest
        }
        let own = loudestSent(upcomingIsOwn: true), untold = loudestSent(upcomingIsOwn: false)
        print("a new note's echo a frame before its reference: the loudest sample sent \(own) (the next frame not taken as own sound: \(untold))")
        XCTAssertLessThanOrEqual(own, 1, "the echo of the terminal's own notes reached the far end")
        XCTAssertGreaterThan(untold, 1000, "not knowing the next frame's notes, the gate should have opened")
    }

    /// The gate alone, after a canceller that leaves 30 dB of a far end's voice: the word ends, and
    /// for the next 150 ms the filter's misadjustment rings on over its tail, 30 dB under the word,
    /// while the reference is silent. That ringing is still the word's echo: the gate holds it
    /// against the loudest reference frame the filter still holds, and it stays shut (against a
    /// peak decaying 30 dB over the tail, frames 6 to 15 of it went out as someone in the room).
    /// Someone who starts talking in the room right after the word, 10 dB under it, is let through.
    func testTheFiltersRingingAfterAWordStaysShutAndATalkerAfterItPasses() {
        let noise = farEnd(seconds: 9, seed: 8), words = 800
        let silence = [Int16](repeating: 0, count: frame)
        let residual = { (x: [Int16]) in x.map { Int16(Double($0) * 0.0316) } }  // 30 dB under
        /// Passes `output` through the gate; returns it.
        func step(_ gate: inout EchoGate, _ reference: [Int16], _ upcoming: [Int16], _ output: [Int16]) -> [Int16] {
            var out = output
            gate.process(reference: reference, ownSound: false, upcoming: upcoming, upcomingOwnSound: false, output: &out)
            return out
        }
        func afterAWord() -> EchoGate {
            var gate = EchoGate(frameSize: frame, sampleRate: 48000, tailSamples: 9600)
            for f in 0..<words {
                let r = Array(noise[(f * frame)..<((f + 1) * frame)])
                let u = f + 1 < words ? Array(noise[((f + 1) * frame)..<((f + 2) * frame)]) : silence
                _ = step(&gate, r, u, residual(r))
            }
            return gate
        }
        var gate = afterAWord()
        let ring = residual(Array(noise[(words * frame)..<((words + 1) * frame)]))
        let ringPeak = ring.map { abs(Int($0)) }.max()!
        let rang = (0..<15).map { _ in step(&gate, silence, silence, ring).map { abs(Int($0)) }.max()! }
        print("the filter's ringing after a word (peak \(ringPeak)): the loudest sample sent per frame \(rang)")
        XCTAssertLessThanOrEqual(rang.max()!, ringPeak / 100, "the filter's ringing went out")

        gate = afterAWord()
        let talker = farEnd(seconds: 1, seed: 9).map { Int16(Double($0) * 0.316) }
        var kept = 0.0, total = 0.0
        for f in 0..<15 {
            let t = Array(talker[(f * frame)..<((f + 1) * frame)])
            for (a, b) in zip(step(&gate, silence, silence, t), t) { kept += Double(a) * Double(b); total += Double(b) * Double(b) }
        }
        let keptDB = 10 * log10(max(kept / total, 1e-12))
        print(String(format: "a talker right after the word, 10 dB under it: %.2f dB kept", keptDB))
        XCTAssertGreaterThan(keptDB, -1, "the talker after the word was shut out")
    }

    // MARK: Residual echo suppression

    /// The bands add up to the signal they were split from, so a gain of 1 everywhere changes nothing.
    func testTheBandSplitAddsUpToItsInput() throws {
        let split = BandSplit(edgesHz: ResidualEchoSuppressor.edgesHz, sampleRate: 48000)
        var worst = 0.0
        for x in farEnd(seconds: 0.5, seed: 11) {
            var sum = 0.0, bands = 0
            split.split(Double(x)) { _, v in sum += v; bands += 1 }
            XCTAssertEqual(bands, ResidualEchoSuppressor.edgesHz.count + 1)
            worst = max(worst, abs(sum - Double(x)))
        }
        XCTAssertLessThan(worst, 1e-9)
    }

    /// Echo only, once the filter has converged: the suppressor removes what the filter leaves.
    /// Double talk: the person in the room keeps their level within 1 dB and their waveform.
    func testResidualSuppressionDeepensTheCancellationAndKeepsDoubleTalk() throws {
        let far = farEnd(seconds: 9, seed: 6)
        let talkFrom = 6 * 48000
        let nearAt = [Int16](repeating: 0, count: talkFrom) + farEnd(seconds: 3, seed: 7)
        func output(suppress: Bool, near: [Int16]?) throws -> (mic: [Float], out: [Float]) {
            let c = try EchoCanceller(EchoCancelSettings(daemonConfig(frame: frame) {
                $0.echo.residualGate = false
                if !suppress { $0.echo.echoSuppressDb = 0; $0.echo.echoSuppressActiveDb = 0 }
            }))
            return run(c, far: far, near: near, delay: 2400)
        }
        let echoSpan = (3 * 48000)..<talkFrom
        let filterOnly = try output(suppress: false, near: nil), suppressed = try output(suppress: true, near: nil)
        let erle = { (r: (mic: [Float], out: [Float])) in
            Levels.erleDB(mic: Array(r.mic[echoSpan]), processed: Array(r.out[echoSpan]), frame: self.frame, activeThresholdDB: -50).medianDB
        }
        XCTAssertGreaterThan(erle(suppressed), erle(filterOnly) + 10, "the suppressor adds at least 10 dB to the filter's \(erle(filterOnly)) dB")

        // Double talk, the near end louder than the echo: compared with the clean near end.
        let clean = Array(nearAt[talkFrom...]).map { Float($0) / 32768 }
        let talk = try output(suppress: true, near: nearAt), plain = try output(suppress: false, near: nearAt)
        let kept = Levels.retainedDB(reference: clean, processed: Array(talk.out[talkFrom...]), frame: frame, activeThresholdDB: -40)
        XCTAssertGreaterThan(kept, -1, "near-end level kept in double talk")
        let withSuppression = Correlation.normalizedCorrelation(clean, Array(talk.out[talkFrom...]))
        let without = Correlation.normalizedCorrelation(clean, Array(plain.out[talkFrom...]))
        XCTAssertGreaterThanOrEqual(withSuppression, without - 0.01, "the near end is as recognisable as without suppression")
    }
}

