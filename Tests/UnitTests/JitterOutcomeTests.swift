import IntercomConfig
import Frames
import IntercomDaemon
import Jitter
import TestSupport
import XCTest

/// Every step the jitter buffer's playout can take (`PlayoutOutcome`), each brought about by a
/// scenario of its own on a simulated clock, and the drift corrector's report of the delay steps.
final class JitterOutcomeTests: XCTestCase {
    func testWaitingThenPlayed() {
        let s = OutcomeSim()
        s.send(0..<20)
        let first = s.read(atMs: 7)
        XCTAssertEqual(first.last, .waiting)
        s.readEvery10ms(fromMs: 17, toMs: 150)
        XCTAssertEqual(s.last, .played)
        XCTAssertEqual(s.seen(.played), 13)
        XCTAssertEqual(s.buffer.statistics.played.load, 13)
    }

    func testADTXGapIsConcealedThenSilentThenPlayedAsGapSilenceAndAnEarlyReaderInsertsInTheGap() {
        let s = OutcomeSim()
        s.send(0..<10)
        s.send(seq: 10, frame: 20, arrivalMs: 205)  // the next talk spurt, after 100 ms of DTX
        s.send(seq: 11, frame: 21, arrivalMs: 215)
        s.readEvery10ms(fromMs: 7, toMs: 197)
        XCTAssertEqual(s.seen(.underrunConcealed), 6, "60 ms (underrun_conceal) concealed")
        XCTAssertEqual(s.seen(.underrunSilence), 2, "then silence until the packet comes")
        XCTAssertEqual(s.read(atMs: 207).last, .gapSilence)
        // A reader running ahead (again 1 ms later) finds the delay below target - frame/2: the gap
        // lends a frame of silence without consuming anything.
        let early = s.read(atMs: 208)
        XCTAssertEqual(early.last, .gapInserted)
        XCTAssertEqual(s.buffer.statistics.inserted.load, 1)
    }

    func testASlowReaderAboveTargetSkipsTwoFramesOfAGap() {
        let s = OutcomeSim(settings: OutcomeSim.settings(consumerStallMs: 1000))
        s.send(0..<10)
        s.send(seq: 10, frame: 20, arrivalMs: 205)
        s.readEvery10ms(fromMs: 7, toMs: 117)
        let late = s.read(atMs: 207)  // 90 ms without a read: the delay is 100 ms over a 20 ms target
        XCTAssertEqual(late.last, .gapDropped)
        XCTAssertEqual(s.buffer.statistics.dropped.load, 1)
    }

    func testAStreamThatStopsRebuffers() {
        let s = OutcomeSim()
        s.send(0..<10)
        s.readEvery10ms(fromMs: 7, toMs: 297)
        XCTAssertEqual(s.last, .rebuffered, "no packet for reset_gap (200 ms) after the last at 95 ms")
        XCTAssertEqual(s.read(atMs: 307).last, .waiting)
        XCTAssertEqual(s.buffer.statistics.rebuffers.load, 1)
        XCTAssertFalse(s.buffer.isPlaying)
    }

    func testTwoLossesAtFortyMillisecondsAreConcealedThenRecoveredFromFEC() {
        let s = OutcomeSim(settings: OutcomeSim.settings(minDelayMs: 40))
        s.send(0..<20)
        s.send(22..<40)
        s.readEvery10ms(fromMs: 7, toMs: 400)
        XCTAssertEqual(s.seen(.concealedLoss), 1, "frame 20: its successor is lost too")
        XCTAssertEqual(s.seen(.fecRecovered), 1, "frame 21: from packet 22's FEC")
        XCTAssertEqual(s.outputs.filter { $0 == .fec(21) }.count, 1)
    }

    func testALossFECCameTooLateForIsLostCoveredAndTheRaisedTargetInsertsConcealment() {
        // 10 ms target, 8 ms transit: packet n+1 arrives a millisecond after frame n is due.
        let s = OutcomeSim(settings: OutcomeSim.settings(minDelayMs: 0), transitMs: 8)
        s.send(0..<20)
        s.send(21..<40)
        s.readEvery10ms(fromMs: 7, toMs: 217)
        XCTAssertEqual(s.last, .underrunConcealed, "frame 20 is due and nothing later has arrived")
        let next = s.read(atMs: 227)
        XCTAssertTrue(next.outcomes.contains(.lostCovered))
        XCTAssertEqual(s.buffer.statistics.fecMissed.load, 1)
        XCTAssertEqual(s.buffer.targetDelayMs, 20, accuracy: 0.01, "FEC look-ahead: two frames")
        XCTAssertEqual(next.last, .insertedConcealment, "the delay grows to the new target")
    }

    func testASequenceGapEndingInAMarkerIsATalkSpurtNotLoss() {
        let s = OutcomeSim()
        s.send(0..<20)
        s.send(seq: 23, frame: 23, arrivalMs: 235, marker: true)
        s.send(seq: 24, frame: 24, arrivalMs: 245)
        s.readEvery10ms(fromMs: 7, toMs: 300)
        XCTAssertEqual(s.seen(.talkSpurtStart), 1)
        XCTAssertEqual(s.buffer.statistics.lost.load, 0)
        XCTAssertEqual(s.seen(.concealedLoss) + s.seen(.fecRecovered), 0)
    }

    func testAStallsBacklogPastTargetIsLetGoAfterTheUnderrun() {
        let s = OutcomeSim()
        s.send(0..<20)
        for k in 20..<30 { s.send(seq: k, frame: k, arrivalMs: 305) }  // the network held them back
        s.send(30..<40)
        s.readEvery10ms(fromMs: 7, toMs: 400)
        XCTAssertGreaterThan(s.seen(.lateAfterUnderrun), 0)
        XCTAssertGreaterThan(s.buffer.statistics.late.load, 1, "the backlog's oldest packets go together")
        XCTAssertEqual(s.buffer.statistics.arrivalStalls.load, 1, "one packet came held back; the rest of the backlog came with it")
        XCTAssertEqual(s.buffer.statistics.readerHeldUp.load, 0, "the reader kept its pace")
    }

    func testAnExcessDropsPausesFirstAndSpeechAfterItsInterval() {
        let quiet = OutcomeSim(settings: OutcomeSim.settings(consumerStallMs: 1000))
        quiet.send(0..<200)
        quiet.readEvery10ms(fromMs: 7, toMs: 117)
        quiet.readEvery10ms(fromMs: 177, toMs: 1500)  // 60 ms without a read: 50 ms too much delay
        XCTAssertGreaterThan(quiet.seen(.droppedPause), 0, "the tag decoder's frames are pauses")
        XCTAssertGreaterThanOrEqual(quiet.buffer.statistics.droppedQuiet.load, quiet.seen(.droppedPause), "up to two a read")

        let loud = OutcomeSim(settings: OutcomeSim.settings(consumerStallMs: 1000), decoder: TagDecoder(loud: true))
        loud.send(0..<520)
        loud.readEvery10ms(fromMs: 7, toMs: 117)
        loud.readEvery10ms(fromMs: 177, toMs: 5000)
        XCTAssertEqual(loud.seen(.droppedPause), 0)
        XCTAssertGreaterThan(loud.seen(.droppedSpeech), 0)
        XCTAssertLessThanOrEqual(loud.buffer.currentDelayMs, 40, "72 ms at first: most of the excess is gone in 5 s")
    }

    func testAMissingFrameAboveTargetIsSkippedRatherThanConcealed() {
        let s = OutcomeSim(settings: OutcomeSim.settings(consumerStallMs: 1000, dropInSpeech: false))
        s.send(0..<15)
        s.send(16..<40)
        s.readEvery10ms(fromMs: 7, toMs: 117)
        s.readEvery10ms(fromMs: 177, toMs: 400)
        XCTAssertEqual(s.seen(.skippedMissing), 1)
        XCTAssertEqual(s.buffer.statistics.lost.load, 0)
    }

    func testAPacketLongerThanAFramePlaysItsCarriedFrame() {
        let s = OutcomeSim(decoder: TagDecoder(framesPerPacket: 2))
        for k in 0..<20 { s.send(seq: k, frame: 2 * k, arrivalMs: UInt64(20 * k + 5)) }
        s.readEvery10ms(fromMs: 7, toMs: 400)
        XCTAssertEqual(s.seen(.carried), s.seen(.played))
        XCTAssertGreaterThan(s.seen(.carried), 15)
    }

    func testAReaderBackFromAStallAboveTargetCutsBack() {
        let s = OutcomeSim()
        s.send(0..<40)
        s.readEvery10ms(fromMs: 7, toMs: 117)
        let back = s.read(atMs: 227)  // 110 ms without a read (consumer_stall 80 ms)
        XCTAssertTrue(back.outcomes.contains(.cutBack))
        XCTAssertEqual(s.buffer.statistics.consumerStalls.load, 1)
        XCTAssertEqual(s.buffer.statistics.readerHeldUp.load, 1)
        XCTAssertEqual(s.buffer.statistics.arrivalStalls.load, 0, "the packets came in time")
        XCTAssertLessThanOrEqual(s.buffer.currentDelayMs, 20 + 0.01)
    }

    /// The scenarios above, together, bring about every outcome there is.
    func testEveryOutcomeHasAScenario() {
        OutcomeSim.seenAnywhere = []
        testWaitingThenPlayed()
        testADTXGapIsConcealedThenSilentThenPlayedAsGapSilenceAndAnEarlyReaderInsertsInTheGap()
        testASlowReaderAboveTargetSkipsTwoFramesOfAGap()
        testAStreamThatStopsRebuffers()
        testTwoLossesAtFortyMillisecondsAreConcealedThenRecoveredFromFEC()
        testALossFECCameTooLateForIsLostCoveredAndTheRaisedTargetInsertsConcealment()
        testASequenceGapEndingInAMarkerIsATalkSpurtNotLoss()
        testAStallsBacklogPastTargetIsLetGoAfterTheUnderrun()
        testAnExcessDropsPausesFirstAndSpeechAfterItsInterval()
        testAMissingFrameAboveTargetIsSkippedRatherThanConcealed()
        testAPacketLongerThanAFramePlaysItsCarriedFrame()
        testAReaderBackFromAStallAboveTargetCutsBack()
        let missing = PlayoutOutcome.allCases.filter { !OutcomeSim.seenAnywhere.contains($0) }
        XCTAssertEqual(missing, [], "outcomes no scenario brings about")
    }

    /// The drift corrector is told each delay step instead of inferring it: an insert is +frame,
    /// a drop -frame, a frame played in turn 0.
    func testThePullReportStatesTheDelayStepsOfEachRead() {
        let s = OutcomeSim()
        s.send(0..<10)
        s.send(seq: 10, frame: 20, arrivalMs: 205)
        s.send(seq: 11, frame: 21, arrivalMs: 215)
        var frame = [Int16](repeating: 0, count: 480)
        func pull(atMs ms: UInt64) -> PlayoutReport {
            s.deliver(untilMs: ms)
            return frame.withUnsafeMutableBufferPointer { s.buffer.pull(into: $0.baseAddress!, count: 480) }
        }
        var reports: [PlayoutReport] = []
        for t in stride(from: 7, through: 207, by: 10) { reports.append(pull(atMs: UInt64(t))) }
        XCTAssertFalse(reports[0].playing)
        XCTAssertTrue(reports.allSatisfy { $0.stepSamples == 0 }, "in turn, concealed or in the gap: no step")
        let inserted = pull(atMs: 208)
        XCTAssertEqual(inserted.stepSamples, 480)
        XCTAssertFalse(inserted.audible)
        XCTAssertEqual(inserted.targetMs, 20, accuracy: 0.01)
        XCTAssertEqual(inserted.delayMs, s.buffer.currentDelayMs)
    }
}

/// A jitter buffer on a simulated clock, with packets delivered by arrival time and each read's
/// outcomes recorded.
private final class OutcomeSim {
    nonisolated(unsafe) static var seenAnywhere = Set<PlayoutOutcome>()
    private final class Clock: @unchecked Sendable { var now: UInt64 = 0 }
    private static let ms: UInt64 = 1_000_000
    private static let origin: UInt64 = 1_000_000_000

    let buffer: JitterBuffer
    private let clock = Clock()
    private let transitMs: UInt64
    private var pending: [(seq: UInt16, ts: UInt32, marker: Bool, arrival: UInt64)] = []
    private var frame = [Int16](repeating: 0, count: 480)
    private(set) var outputs: [TraceOutput] = []
    private var tally: [PlayoutOutcome: Int] = [:]
    private(set) var last = PlayoutOutcome.waiting

    static func settings(minDelayMs: Double = 20, consumerStallMs: Double = 80, dropInSpeech: Bool = true) -> JitterSettings {
        // The scenarios' timings are worked out for a 20 ms floor unless they say otherwise.
        var s = JitterSettings(daemonConfig { $0.jitter.minDelayMs = minDelayMs })
        s.consumerStallMs = consumerStallMs
        s.dropInSpeech = dropInSpeech
        return s
    }

    init(settings: JitterSettings = OutcomeSim.settings(), transitMs: UInt64 = 5, decoder: FrameDecoder = TagDecoder()) {
        let c = clock
        self.transitMs = transitMs
        buffer = JitterBuffer(settings: settings, decoder: decoder, clock: { c.now })
    }

    /// Packets k in `range`: sequence k, frame k, sent at k·10 ms.
    func send(_ range: Range<Int>) {
        for k in range { send(seq: k, frame: k, arrivalMs: UInt64(k * 10) + transitMs) }
    }

    func send(seq: Int, frame: Int, arrivalMs: UInt64, marker: Bool = false) {
        pending.append((UInt16(seq), UInt32(90_000 + frame * 480), marker, Self.origin + arrivalMs * Self.ms))
        pending.sort { $0.arrival < $1.arrival }
    }

    func deliver(untilMs ms: UInt64) {
        clock.now = Self.origin + ms * Self.ms
        while let p = pending.first, p.arrival <= clock.now {
            pending.removeFirst()
            var seq = p.seq
            let ok = withUnsafeBytes(of: &seq) {
                buffer.queue.push(payload: $0, sequence: p.seq, timestamp: p.ts, marker: p.marker, arrivalNanos: p.arrival)
            }
            precondition(ok)
        }
    }

    @discardableResult
    func read(atMs ms: UInt64) -> (outcomes: PlayoutOutcomes, last: PlayoutOutcome) {
        deliver(untilMs: ms)
        let audible = frame.withUnsafeMutableBufferPointer { buffer.readFrame(into: $0.baseAddress!, count: 480) }
        switch frame[0] {
        case 0: outputs.append(.silence)
        case TagDecoder.decoded: outputs.append(.decoded(UInt16(bitPattern: frame[1])))
        case TagDecoder.fec: outputs.append(.fec(UInt16(bitPattern: frame[1])))
        default: outputs.append(.concealed)
        }
        XCTAssertEqual(audible, frame[0] != 0 || frame[1] != 0 || frame[2] != 0)
        last = buffer.lastOutcome
        XCTAssertTrue(last.producesFrame)
        XCTAssertTrue(buffer.outcomes.contains(last))
        for o in PlayoutOutcome.allCases where buffer.outcomes.contains(o) {
            tally[o, default: 0] += 1
            Self.seenAnywhere.insert(o)
        }
        return (buffer.outcomes, last)
    }

    func readEvery10ms(fromMs: UInt64, toMs: UInt64) {
        for t in stride(from: fromMs, through: toMs, by: 10) { read(atMs: t) }
    }

    /// Reads in which `outcome` happened.
    func seen(_ outcome: PlayoutOutcome) -> Int { tally[outcome] ?? 0 }
}
