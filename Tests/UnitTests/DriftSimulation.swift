import IntercomConfig
import Frames
import Impairment
import IntercomDaemon
import Jitter
import SignalTools
import XCTest

/// A sender whose clock runs `ppm` fast, through a seeded `ImpairmentModel`, into a `JitterBuffer`
/// read through a `DriftCorrector` once per simulated 10 ms period (receiver clock).
struct DriftSimulation {
    static let ms: UInt64 = 1_000_000
    var ppm: Double
    var drift = DriftSettings(.default)
    var jitter = JitterSettings(.default)
    var profile: ImpairmentProfile
    var frames: Int
    /// The audio thread wakes up to this late (uniform), so each reading jitters by as much.
    var wakeJitterMs: Double = 0
    /// From this cycle on the device asks for two frames every other period (a sound server, a
    /// queue topped up from another device's wake-ups): every even cycle's frame is read a period
    /// late, together with the next one.
    var pairedReadsFrom: Int? = nil
    /// Whether the reader tells the buffer how late such a frame is read (`PlayoutLead`), as the
    /// engine does.
    var tellsPlayoutLead = true
    /// Whether the sender's frame k is speech (loud) or a pause; nil: every frame is a pause.
    var talk: ((Int) -> Bool)? = nil
    /// Extra delay of the sender's frame k on the path, ms (a jitter burst).
    var extraDelayMs: (Int) -> Double = { _ in 0 }
    /// Frames of capture time the sender skipped before its frame k (a capture stall it jumps its
    /// timestamp over): frame k carries the timestamp of frame k + this.
    var timestampSkipFrames: (Int) -> Int = { _ in 0 }
    /// How much later than its cycle's moment the reader reads cycle c, ms, untold: the sound
    /// server's queue a period shorter, written a period later (the frame plays no later).
    var readShiftMs: (Int) -> Double = { _ in 0 }
    /// Cycles in which nobody reads (the audio thread starved, its device ran dry).
    var stalled: Range<Int> = 0..<0

    struct Result {
        /// Per cycle: the jitter buffer's current delay and target, the corrector's delay, smoothed
        /// error and drift estimate.
        var delayMs: [Double] = []
        var targetMs: [Double] = []
        var correctedDelayMs: [Double] = []
        /// Per cycle: when the sender sent the sample played at the end of the cycle, against when
        /// it was played, ms (an offset aside: valid where the buffer neither dropped nor inserted).
        var playedDelayMs: [Double] = []
        var errorMs: [Double] = []
        var driftPPM: [Double] = []
        /// Per cycle: whether the buffer was playing, and whether the frame played was loud.
        var playing: [Bool] = []
        var loud: [Bool] = []
        /// Cumulative `dropped` and `inserted` at the end of each cycle.
        var dropped: [Int] = []
        var inserted: [Int] = []
        var statistics: JitterStatistics
        var impairment: ImpairmentCounters

        static func median<S: Sequence>(_ values: S) -> Double where S.Element == Double {
            let s = values.sorted()
            return s[s.count / 2]
        }

        /// Cycles `first..<last` minutes.
        func minutes(_ first: Int, _ last: Int) -> Range<Int> { (first * Self.minute)..<min(delayMs.count, last * Self.minute) }

        /// Cycles per minute at 10 ms.
        static let minute = 6_000

        func events(_ cumulative: [Int], inMinute m: Int) -> Int {
            let end = min(cumulative.count, (m + 1) * Self.minute) - 1
            return cumulative[end] - (m == 0 ? 0 : cumulative[m * Self.minute - 1])
        }
    }

    /// Packets as (sequence, timestamp, arrival) sorted by arrival; the sender's frame k leaves at
    /// k·10 ms of its own clock, i.e. k·10 ms / (1 + ppm·1e-6) of ours.
    private func packets(start: UInt64) throws -> (packets: [TracePacket], counters: ImpairmentCounters) {
        var model = try ImpairmentModel(profile: profile)
        var out: [TracePacket] = []
        out.reserveCapacity(frames + frames / 50)
        let period = 10e6 / (1 + ppm * 1e-6)
        for k in 0..<(frames + 100) {
            let sent = start + UInt64((Double(k) * period + extraDelayMs(k) * 1e6).rounded())
            for arrival in model.sendTimes(arrivalNs: sent) {
                out.append(TracePacket(sequence: UInt16(truncatingIfNeeded: k), timestamp: UInt32(truncatingIfNeeded: (k + timestampSkipFrames(k)) * 480),
                                       arrival: arrival))
            }
        }
        // Stable: copies with equal arrival keep their order.
        let sorted = out.enumerated().sorted { ($0.element.arrival, $0.offset) < ($1.element.arrival, $1.offset) }.map(\.element)
        return (sorted, model.counters)
    }

    func run() throws -> Result {
        let start: UInt64 = 1_000_000_000
        let clock = TraceClock(start)
        let lead = PlayoutLead()
        let decoder = TagDecoder(talk: talk.map { talk in { talk(Int($0)) } })
        let buffer = JitterBuffer(settings: jitter, decoder: decoder, clock: { clock.now }, playoutLead: lead)
        let corrector = try DriftCorrector(buffer: buffer, settings: drift)
        let (trace, counters) = try packets(start: start)
        var next = 0
        let frame = UnsafeMutablePointer<Int16>.allocate(capacity: jitter.frameSize)
        defer { frame.deallocate() }
        var payload: UInt16 = 0
        var wake = SplitMix64(seed: 99)
        var r = Result(statistics: buffer.statistics, impairment: counters)
        for c in 0..<frames {
            clock.now = start + UInt64(c) * 10 * Self.ms + 7 * Self.ms + UInt64(wake.nextUnit() * wakeJitterMs * 1e6 + readShiftMs(c) * 1e6)
            if let from = pairedReadsFrom, c >= from, c % 2 == 0 {
                clock.now += 10 * Self.ms
                lead.store(nanos: tellsPlayoutLead ? -10 * Int64(Self.ms) : 0)
            } else {
                lead.store(nanos: 0)
            }
            while next < trace.count, trace[next].arrival <= clock.now {
                let p = trace[next]
                payload = p.sequence
                let ok = withUnsafeBytes(of: &payload) {
                    buffer.queue.push(payload: $0, sequence: p.sequence, timestamp: p.timestamp, marker: false, arrivalNanos: p.arrival)
                }
                precondition(ok)
                next += 1
            }
            if !stalled.contains(c) { corrector.readFrame(into: frame, count: jitter.frameSize) }
            r.delayMs.append(buffer.currentDelayMs)
            r.targetMs.append(buffer.targetDelayMs)
            r.correctedDelayMs.append(corrector.delayMs)
            let sentMs = Double(corrector.consumedSamples) / Double(jitter.sampleRate) * 1000 / (1 + ppm * 1e-6)
            r.playedDelayMs.append(Double(c + 1) * 10 - sentMs)
            r.errorMs.append(corrector.errorMs)
            r.driftPPM.append(corrector.driftPPM)
            r.playing.append(buffer.isPlaying)
            r.loud.append(frame[jitter.frameSize - 1] != 0)
            r.dropped.append(buffer.statistics.dropped.load)
            r.inserted.append(buffer.statistics.inserted.load)
        }
        return r
    }
}
