import IntercomConfig
import Frames
import IntercomDaemon
import Jitter
import XCTest

// Test doubles and a simulated-clock driver for the jitter buffer tests that replay packet traces.

/// A test decoder, not Opus: writes recognisable frames (sample 0 = kind, sample 1 = the sequence
/// number carried in the payload's first two bytes) and counts resets.
final class TagDecoder: FrameDecoder {
    static let decoded: Int16 = 1, fec: Int16 = 2, concealed: Int16 = 3
    private(set) var resets = 0
    /// Loud: frames are speech (a constant level near full scale) instead of pauses.
    private let loud: Bool
    /// Frames per packet: more than one leaves the rest for `takeCarried`.
    private let framesPerPacket: Int
    private var carried = 0
    private var carriedSequence: Int16 = 0

    /// Speech and pauses by sequence number (true: loud), instead of `loud` for every frame;
    /// concealment sounds like the frame decoded last.
    private let talk: ((UInt16) -> Bool)?
    private var lastLoud = false

    /// Whether a packet (by sequence number) carries FEC for the one before it; nil: every one.
    private let carriesFECFrom: ((UInt16) -> Bool)?

    init(loud: Bool = false, framesPerPacket: Int = 1, talk: ((UInt16) -> Bool)? = nil, carriesFECFrom: ((UInt16) -> Bool)? = nil) {
        self.loud = loud
        self.framesPerPacket = framesPerPacket
        self.talk = talk
        self.carriesFECFrom = carriesFECFrom
    }

    private func tag(_ output: UnsafeMutablePointer<Int16>, _ kind: Int16, _ sequence: Int16, frameSize: Int) {
        if kind != Self.concealed, let talk { lastLoud = talk(UInt16(bitPattern: sequence)) }
        output.update(repeating: (talk == nil ? loud : lastLoud) ? 16_000 : 0, count: frameSize)
        output[0] = kind
        output[1] = sequence
    }

    func decode(_ payload: UnsafeRawBufferPointer, into output: UnsafeMutablePointer<Int16>, frameSize: Int) -> Int {
        let sequence = Int16(bitPattern: payload.loadUnaligned(as: UInt16.self))
        tag(output, Self.decoded, sequence, frameSize: frameSize)
        carried = framesPerPacket - 1
        carriedSequence = sequence
        return frameSize * framesPerPacket
    }

    func decodeFEC(from next: UnsafeRawBufferPointer, into output: UnsafeMutablePointer<Int16>, frameSize: Int) -> Int {
        guard carriesFEC(next) else { return -1 }
        tag(output, Self.fec, Int16(bitPattern: next.loadUnaligned(as: UInt16.self) &- 1), frameSize: frameSize)
        return frameSize
    }

    /// Every packet carries FEC for the one before it, unless `carriesFECFrom` says otherwise.
    func carriesFEC(_ next: UnsafeRawBufferPointer) -> Bool {
        carriesFECFrom?(next.loadUnaligned(as: UInt16.self)) ?? true
    }

    func conceal(into output: UnsafeMutablePointer<Int16>, frameSize: Int) -> Int {
        tag(output, Self.concealed, 0, frameSize: frameSize)
        return frameSize
    }

    func takeCarried(into output: UnsafeMutablePointer<Int16>, frameSize: Int) -> Int {
        guard carried > 0 else { return 0 }
        carried -= 1
        tag(output, Self.decoded, carriedSequence, frameSize: frameSize)
        return frameSize
    }

    func reset() { resets += 1; carried = 0 }
}

final class TraceClock: @unchecked Sendable {
    var now: UInt64
    init(_ now: UInt64) { self.now = now }
}

struct TracePacket {
    var sequence: UInt16
    var timestamp: UInt32
    var marker = false
    var arrival: UInt64
}

enum TraceOutput: Equatable {
    case silence, decoded(UInt16), fec(UInt16), concealed

    static func decodedSequences(_ outputs: [TraceOutput]) -> [UInt16] {
        outputs.compactMap { if case let .decoded(s) = $0 { s } else { nil } }
    }
}

/// Delivers packets by arrival time and reads one 10 ms frame per cycle at start + cycle·10 ms + 7 ms.
final class TraceHarness {
    static let ms: UInt64 = 1_000_000
    let clock: TraceClock
    let decoder = TagDecoder()
    let buffer: JitterBuffer
    let start: UInt64
    private var pending: [TracePacket] = []
    private var next = 0
    private(set) var cycle = 0
    private var frame = [Int16](repeating: 0, count: 480)

    init(settings: JitterSettings = JitterSettings(.default), start: UInt64 = 1_000_000_000) {
        let c = TraceClock(start)
        clock = c
        self.start = start
        buffer = JitterBuffer(settings: settings, decoder: decoder, clock: { c.now })
    }

    var stats: JitterStatistics { buffer.statistics }
    /// Where the next cycle's period begins.
    var nextCycleStart: UInt64 { start + UInt64(cycle) * 10 * Self.ms }

    /// Packets to deliver when the clock passes their arrival (any order).
    func deliver(_ packets: [TracePacket]) {
        pending.append(contentsOf: packets)
        pending[next...].sort { $0.arrival < $1.arrival }
    }

    /// Forgets packets not delivered yet.
    func discardPending() {
        pending.removeAll()
        next = 0
    }

    /// Pushes packets into the queue at once, whatever their arrival time.
    func pushNow(_ packets: [TracePacket]) {
        for p in packets { push(p) }
    }

    private func push(_ p: TracePacket) {
        var seq = p.sequence
        let ok = withUnsafeBytes(of: &seq) {
            buffer.queue.push(payload: $0, sequence: p.sequence, timestamp: p.timestamp, marker: p.marker, arrivalNanos: p.arrival)
        }
        precondition(ok, "queue full at cycle \(cycle)")
    }

    @discardableResult
    func step() -> TraceOutput {
        clock.now = nextCycleStart + 7 * Self.ms
        cycle += 1
        while next < pending.count, pending[next].arrival <= clock.now {
            push(pending[next])
            next += 1
        }
        let audible = frame.withUnsafeMutableBufferPointer { buffer.readFrame(into: $0.baseAddress!, count: 480) }
        switch frame[0] {
        case 0:
            XCTAssertFalse(audible)
            return .silence
        case TagDecoder.decoded: return .decoded(UInt16(bitPattern: frame[1]))
        case TagDecoder.fec: return .fec(UInt16(bitPattern: frame[1]))
        default: return .concealed
        }
    }

    func run(_ cycles: Int) -> [TraceOutput] { (0..<cycles).map { _ in step() } }

    struct Counters: Equatable { var rebuffers, late, overflow, lostOrConcealed: Int }

    func counters() -> Counters {
        Counters(rebuffers: stats.rebuffers.load, late: stats.late.load, overflow: stats.overflow.load,
                 lostOrConcealed: stats.lost.load + stats.underruns.load + stats.inserted.load)
    }
}
