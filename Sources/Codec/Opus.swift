import COpus
import Frames

// The only file that calls libopus.

public struct OpusError: Error, CustomStringConvertible, Equatable {
    public let operation: String
    public let code: Int32
    /// libopus's own text for `code` (opus_strerror).
    public let message: String

    init(_ operation: String, _ code: Int32) {
        self.operation = operation
        self.code = code
        message = String(cString: opus_strerror(code))
    }

    public var description: String { "opus: \(operation) failed: \(message) (\(code))" }
}

public enum OpusApplication: Sendable {
    /// Speech with in-band FEC and DTX available (6.5 ms look-ahead).
    case voip
    /// 2.5 ms look-ahead, CELT only: no FEC, no DTX.
    case restrictedLowDelay

    var value: Int32 { self == .voip ? OPUS_APPLICATION_VOIP : OPUS_APPLICATION_RESTRICTED_LOWDELAY }
}

/// A mono Opus encoder. `encode` does not allocate and may run on the audio thread.
public final class OpusEncoder: @unchecked Sendable {
    // @unchecked: one owner thread at a time; the C state is not shared.
    private let state: OpaquePointer
    public let sampleRate: Int
    /// Discontinuous transmission: silent frames encode to 1-2 bytes that need not be sent.
    public let dtx: Bool

    /// Every value is the configuration's (`[opus]`, `audio.sample_rate`); their defaults live in its schema.
    public init(sampleRate: Int, application: OpusApplication, bitrate: Int,
                complexity: Int, fec: Bool, expectedLossPercent: Int, dtx: Bool) throws {
        var err: Int32 = 0
        guard let s = opus_encoder_create(Int32(sampleRate), 1, application.value, &err), err == OPUS_OK else {
            throw OpusError("create encoder at \(sampleRate) Hz", err)
        }
        state = s
        self.sampleRate = sampleRate
        self.dtx = dtx && application == .voip
        // From here a throw runs deinit, which frees the state.
        try check(copus_set_bitrate(s, Int32(bitrate)), "set bitrate \(bitrate)")
        try check(copus_set_complexity(s, Int32(complexity)), "set complexity \(complexity)")
        try check(copus_set_signal_voice(s), "set signal voice")
        if application == .voip {
            try check(copus_set_inband_fec(s, fec ? 1 : 0), "set in-band FEC")
            try check(copus_set_packet_loss_perc(s, Int32(expectedLossPercent)), "set expected loss \(expectedLossPercent) %")
            try check(copus_set_dtx(s, dtx ? 1 : 0), "set DTX")
        }
    }

    deinit { opus_encoder_destroy(state) }

    /// Samples the encoder delays its output by (its look-ahead).
    public var lookahead: Int {
        var v: Int32 = 0
        return copus_get_lookahead(state, &v) == OPUS_OK ? Int(v) : 0
    }

    /// Encodes one frame (2.5-60 ms of samples); returns the packet length or a negative Opus error code.
    @inline(__always)
    public func encode(_ pcm: UnsafePointer<Int16>, frameSize: Int, into packet: UnsafeMutablePointer<UInt8>, capacity: Int) -> Int {
        Int(opus_encode(state, pcm, Int32(frameSize), packet, Int32(capacity)))
    }

    private func check(_ rc: Int32, _ what: String) throws {
        if rc != OPUS_OK { throw OpusError(what, rc) }
    }
}

/// A mono Opus decoder, the jitter buffer's `FrameDecoder`: FEC from the next packet, Opus's own
/// loss concealment. Nothing here allocates; it runs on the audio thread.
public final class OpusDecoder: FrameDecoder, @unchecked Sendable {
    // @unchecked: one owner thread at a time; the C state is not shared.
    private let state: OpaquePointer
    /// A packet may hold more than the caller's frame (a peer sending 20 ms packets to a 10 ms
    /// terminal; RFC 7587 allows 2.5-120 ms): the rest waits here for `takeCarried`.
    private let carry: UnsafeMutablePointer<Int16>
    private var carryStart = 0, carryEnd = 0
    /// The longest Opus packet: 120 ms at 48 kHz.
    public static let maxPacketSamples = 5760

    public init(sampleRate: Int) throws {
        var err: Int32 = 0
        guard let s = opus_decoder_create(Int32(sampleRate), 1, &err), err == OPUS_OK else {
            throw OpusError("create decoder at \(sampleRate) Hz", err)
        }
        state = s
        carry = .allocate(capacity: Self.maxPacketSamples)
        carry.initialize(repeating: 0, count: Self.maxPacketSamples)
    }

    deinit {
        opus_decoder_destroy(state)
        carry.deallocate()
    }

    /// Decodes a whole packet of any length: the first `frameSize` samples go to `pcm`, the rest
    /// is kept for `takeCarried`. Returns the packet's samples (may exceed `frameSize`) or a
    /// negative Opus error code. Does not allocate.
    public func decodeFrame(_ packet: UnsafePointer<UInt8>?, length: Int, into pcm: UnsafeMutablePointer<Int16>,
                            frameSize: Int) -> Int {
        carryStart = 0
        carryEnd = 0
        let n = Int(opus_decode(state, packet, Int32(length), carry, Int32(Self.maxPacketSamples), 0))
        guard n > 0 else { return n }
        pcm.update(from: carry, count: min(n, frameSize))
        if n > frameSize {
            carryStart = frameSize
            carryEnd = n
        }
        return n
    }

    /// Up to `frameSize` samples left over from the last packet; returns how many (0: none).
    public func takeCarried(into pcm: UnsafeMutablePointer<Int16>, frameSize: Int) -> Int {
        let n = min(frameSize, carryEnd - carryStart)
        guard n > 0 else { return 0 }
        pcm.update(from: carry + carryStart, count: n)
        carryStart += n
        return n
    }

    /// Decodes a packet (nil: conceal a lost one; `fec`: recover the previous frame from this packet's
    /// redundancy). Returns samples decoded or a negative Opus error code.
    @inline(__always)
    public func decode(_ packet: UnsafePointer<UInt8>?, length: Int, into pcm: UnsafeMutablePointer<Int16>,
                       frameSize: Int, fec: Bool = false) -> Int {
        Int(opus_decode(state, packet, Int32(length), pcm, Int32(frameSize), fec ? 1 : 0))
    }

    // FrameDecoder

    public func decode(_ payload: UnsafeRawBufferPointer, into output: UnsafeMutablePointer<Int16>, frameSize: Int) -> Int {
        decodeFrame(payload.baseAddress?.assumingMemoryBound(to: UInt8.self), length: payload.count, into: output, frameSize: frameSize)
    }

    /// -1 when the next packet carries no FEC data: Opus would conceal and call it success.
    public func decodeFEC(from next: UnsafeRawBufferPointer, into output: UnsafeMutablePointer<Int16>, frameSize: Int) -> Int {
        guard carriesFEC(next) else { return -1 }
        return decode(next.baseAddress?.assumingMemoryBound(to: UInt8.self), length: next.count, into: output, frameSize: frameSize, fec: true)
    }

    public func carriesFEC(_ next: UnsafeRawBufferPointer) -> Bool { OpusPacket.carriesFEC(next) }

    public func conceal(into output: UnsafeMutablePointer<Int16>, frameSize: Int) -> Int {
        decode(nil, length: 0, into: output, frameSize: frameSize)
    }

    /// Forgets the decoder's history (OPUS_RESET_STATE): a new stream in a reused slot. Does not allocate.
    public func reset() {
        _ = copus_decoder_reset(state)
        carryStart = 0
        carryEnd = 0
    }

    /// Text for a negative code returned by `encode`/`decode`.
    public static func errorText(_ code: Int) -> String { String(cString: opus_strerror(Int32(code))) }
}
