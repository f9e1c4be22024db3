import CSpeexDSP
import Frames
import Jitter
import Posix
import RealTime
import SpeexDSP

/// What one jitter buffer did with one trace, by frame index.
struct PlayoutRecord {
    /// Hand-out time of each frame played from its own packet (0: never).
    var playedAt: [UInt64]
    /// Frames handed out in total, and those that were not a packet's own audio (concealed/silent).
    var ticks = 0
    var elapsedNs: UInt64 = 0

    init(frames: Int) { playedAt = [UInt64](repeating: 0, count: frames) }
}

/// Both buffers see the same ticks: every 10 ms at `phaseNs` after the sender's, packets delivered
/// when they have arrived, then one frame taken. Payloads are the frame index (4 bytes); decoding is a copy of it,
/// for both buffers, so the figures are the buffers' own.
protocol TracePlayer: AnyObject {
    func deliver(_ packet: BenchPacket)
    /// The index of the frame played at `now` from its own packet, or nil.
    func next(now: UInt64) -> Int?
}

extension TracePlayer {
    func play(_ trace: JitterTrace, phaseNs: UInt64, tailFrames: Int = 50) -> PlayoutRecord {
        var record = PlayoutRecord(frames: trace.frames)
        var i = 0
        let t0 = MonotonicClock.nanoseconds()
        for c in 0..<(trace.frames + tailFrames) {
            let now = JitterTrace.sentNs(c) + phaseNs
            while i < trace.packets.count, trace.packets[i].arrivalNs <= now {
                deliver(trace.packets[i])
                i += 1
            }
            if let k = next(now: now), k >= 0, k < trace.frames, record.playedAt[k] == 0 { record.playedAt[k] = now }
            record.ticks += 1
        }
        record.elapsedNs = MonotonicClock.nanoseconds() - t0
        return record
    }
}

/// Writes the payload's frame index into samples 1-2 of a frame marked 1 (decoded) in sample 0.
final class IndexDecoder: FrameDecoder {
    func decode(_ payload: UnsafeRawBufferPointer, into output: UnsafeMutablePointer<Int16>, frameSize: Int) -> Int {
        output.update(repeating: 0, count: frameSize)
        let k = payload.loadUnaligned(as: UInt32.self)
        output[0] = 1
        output[1] = Int16(truncatingIfNeeded: k & 0xFFFF)
        output[2] = Int16(truncatingIfNeeded: k >> 16)
        return frameSize
    }

    func decodeFEC(from next: UnsafeRawBufferPointer, into output: UnsafeMutablePointer<Int16>, frameSize: Int) -> Int {
        conceal(into: output, frameSize: frameSize)
    }

    func conceal(into output: UnsafeMutablePointer<Int16>, frameSize: Int) -> Int {
        output.update(repeating: 0, count: frameSize)
        output[0] = 2
        return frameSize
    }

    func reset() {}
}

/// intercomd's `JitterBuffer` with the given settings.
final class OurPlayer: TracePlayer {
    final class Clock: @unchecked Sendable { var now: UInt64 = 0 }
    let clock = Clock()
    let buffer: JitterBuffer
    var frame = [Int16](repeating: 0, count: 480)

    init(settings: JitterSettings) {
        let c = clock
        buffer = JitterBuffer(settings: settings, decoder: IndexDecoder(), clock: { c.now })
    }

    func deliver(_ p: BenchPacket) {
        var k = UInt32(p.index)
        _ = withUnsafeBytes(of: &k) {
            buffer.queue.push(payload: $0, sequence: UInt16(truncatingIfNeeded: p.index), timestamp: UInt32(truncatingIfNeeded: p.index * 480),
                              marker: p.index == 0, arrivalNanos: p.arrivalNs)
        }
    }

    func next(now: UInt64) -> Int? {
        clock.now = now
        _ = frame.withUnsafeMutableBufferPointer { buffer.readFrame(into: $0.baseAddress!, count: 480) }
        guard frame[0] == 1 else { return nil }
        return Int(UInt16(bitPattern: frame[1])) | Int(UInt16(bitPattern: frame[2])) << 16
    }
}

/// speexdsp's jitter buffer driven the way its own `speex_jitter_get` does: get one frame (decode
/// it, or conceal on MISSING/INSERTION), then tick.
final class SpeexPlayer: TracePlayer {
    let buffer: SpeexJitterBuffer
    let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 64, alignment: 8)

    init(maxLateRatePercent: Int32? = nil) throws {
        buffer = try SpeexJitterBuffer(step: 480)
        if let rate = maxLateRatePercent { try buffer.set(JITTER_BUFFER_SET_MAX_LATE_RATE, rate) }
    }

    deinit { scratch.deallocate() }

    func deliver(_ p: BenchPacket) {
        scratch.storeBytes(of: UInt32(p.index), as: UInt32.self)
        buffer.put(timestamp: UInt32(truncatingIfNeeded: p.index * 480), span: 480, sequence: UInt16(truncatingIfNeeded: p.index),
                   payload: UnsafeMutableRawBufferPointer(rebasing: scratch[0..<4]))
    }

    func next(now: UInt64) -> Int? {
        defer { buffer.tick() }
        guard case let .ok(_, length) = buffer.get(into: scratch, desiredSpan: 480), length == 4 else { return nil }
        return Int(scratch.load(as: UInt32.self))
    }
}
