import CSpeexDSP

// The only file that calls speexdsp: echo canceller, preprocessor, resampler, jitter buffer.
// speexdsp has no strerror; errors name the request that failed and its return code.

public struct SpeexError: Error, CustomStringConvertible, Equatable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// One speexdsp echo canceller, and speexdsp's preprocessor for noise suppression and AGC.
/// The preprocessor is not given the canceller's state: the residual echo is suppressed
/// without its frame of delay (EchoCancel's `ResidualEchoSuppressor`).
public final class SpeexEcho: @unchecked Sendable {
    // @unchecked: one owner thread at a time (the audio thread); the C state is not shared.
    private let echo: OpaquePointer
    private let pre: OpaquePointer
    /// False when noise suppression and AGC are off: the preprocessor is then not run at all, since
    /// even with nothing to do it reshapes the spectrum and returns the previous frame (10 ms late).
    public let preprocesses: Bool

    /// - Parameter noiseSuppressDB: maximum attenuation (negative); 0 turns denoising off.
    public init(frameSize: Int, tailSamples: Int, sampleRate: Int, noiseSuppressDB: Int, agc: Bool) throws {
        guard let echo = speex_echo_state_init(Int32(frameSize), Int32(tailSamples)) else {
            throw SpeexError("speex_echo_state_init failed for frame \(frameSize), tail \(tailSamples)")
        }
        guard let pre = speex_preprocess_state_init(Int32(frameSize), Int32(sampleRate)) else {
            speex_echo_state_destroy(echo)
            throw SpeexError("speex_preprocess_state_init failed for frame \(frameSize) at \(sampleRate) Hz")
        }
        self.echo = echo
        self.pre = pre
        preprocesses = noiseSuppressDB < 0 || agc
        // From here a throw runs deinit, which frees both states.
        // speexdsp assumes 8 kHz unless told; at 48 kHz that would cut the near-end voice's low band.
        var rate = Int32(sampleRate)
        try check(speex_echo_ctl(echo, SPEEX_ECHO_SET_SAMPLING_RATE, &rate), "SPEEX_ECHO_SET_SAMPLING_RATE \(rate)")
        var on: Int32 = noiseSuppressDB < 0 ? 1 : 0
        try preprocess(SPEEX_PREPROCESS_SET_DENOISE, &on, "SET_DENOISE")
        var noise = Int32(noiseSuppressDB)
        try preprocess(SPEEX_PREPROCESS_SET_NOISE_SUPPRESS, &noise, "SET_NOISE_SUPPRESS \(noise)")
        var agcOn: Int32 = agc ? 1 : 0
        try preprocess(SPEEX_PREPROCESS_SET_AGC, &agcOn, "SET_AGC")
        var off: Int32 = 0
        try preprocess(SPEEX_PREPROCESS_SET_DEREVERB, &off, "SET_DEREVERB")
    }

    deinit {
        speex_preprocess_state_destroy(pre)
        speex_echo_state_destroy(echo)
    }

    /// Removes the echo of `reference` from `capture`. speexdsp first runs `capture` through its
    /// DC notch, so `output` is the notched microphone minus the echo estimate (`dcNotchRadius`).
    @inline(__always)
    public func cancelEcho(capture: UnsafePointer<Int16>, reference: UnsafePointer<Int16>, output: UnsafeMutablePointer<Int16>) {
        speex_echo_cancellation(echo, capture, reference, output)
    }

    /// Runs the preprocessor on `frame` in place when it has anything to do (`preprocesses`).
    /// It returns the previous frame: a frame (10 ms) of delay.
    @inline(__always)
    public func preprocess(_ frame: UnsafeMutablePointer<Int16>) {
        if preprocesses { _ = speex_preprocess_run(pre, frame) }
    }

    /// The DC notch speexdsp's canceller applies to the microphone before anything else
    /// (mdf.c, `filter_dc_notch16`): y = r·(1 − 2z⁻¹ + z⁻²) / (1 − 2r·z⁻¹ + (r² + 0.7(1 − r)²)·z⁻²),
    /// its radius chosen by the sampling rate as speexdsp chooses it. At 48 kHz a second-order
    /// high-pass near 70 Hz, so anyone who wants the unfiltered voice must know it.
    public static func dcNotchRadius(sampleRate: Int) -> Float {
        sampleRate < 12_000 ? 0.9 : sampleRate < 24_000 ? 0.982 : 0.992
    }

    /// Forgets the learned echo path (after an xrun the alignment is lost).
    public func reset() { speex_echo_state_reset(echo) }

    private func check(_ rc: Int32, _ what: String) throws {
        if rc != 0 { throw SpeexError("speexdsp rejected \(what) (code \(rc))") }
    }

    private func preprocess(_ request: Int32, _ value: UnsafeMutableRawPointer, _ what: String) throws {
        try check(speex_preprocess_ctl(pre, request, value), what)
    }
}

/// A mono speexdsp resampler whose ratio can be trimmed in small steps while it runs
/// (clock-drift correction). `process` and `setRatio` do not allocate once created.
public final class SpeexResampler: @unchecked Sendable {
    // @unchecked: one owner thread at a time; the C state is not shared.
    private let state: OpaquePointer
    public let rate: Int

    /// - Parameter quality: 0 (fastest) ... 10 (best); 3 is speexdsp's VoIP default.
    public init(rate: Int, quality: Int = 3) throws {
        var err: Int32 = 0
        guard let s = speex_resampler_init(1, UInt32(rate), UInt32(rate), Int32(quality), &err), err == 0 else {
            throw SpeexError("speex_resampler_init at \(rate) Hz, quality \(quality): \(String(cString: speex_resampler_strerror(err)))")
        }
        state = s
        self.rate = rate
        _ = speex_resampler_skip_zeros(s)
    }

    deinit { speex_resampler_destroy(state) }

    /// Input samples consumed per output sample = `numerator / denominator`
    /// (e.g. 65_543 / 65_536 consumes about 100 ppm faster). Keep denominators small (2^16): speexdsp
    /// rescales its phase by new/old denominator in 32 bits, and denominators near 10^6 overflow,
    /// leave the state half-updated and make the next `process` read out of bounds.
    /// Returns speexdsp's code (0 = success).
    @discardableResult
    public func setRatio(numerator: UInt32, denominator: UInt32) -> Int32 {
        speex_resampler_set_rate_frac(state, numerator, denominator, UInt32(rate), UInt32(rate))
    }

    /// Resamples up to `inputCount` samples into at most `outputCapacity`; returns (consumed, produced).
    @inline(__always)
    public func process(_ input: UnsafePointer<Int16>, inputCount: Int, into output: UnsafeMutablePointer<Int16>,
                        outputCapacity: Int) -> (consumed: Int, produced: Int) {
        var inLen = UInt32(inputCount), outLen = UInt32(outputCapacity)
        _ = speex_resampler_process_int(state, 0, input, &inLen, output, &outLen)
        return (Int(inLen), Int(outLen))
    }

    /// Samples of delay the filter adds at the input side.
    public var inputLatency: Int { Int(speex_resampler_get_input_latency(state)) }

    /// Clears the filter's history (a new stream).
    public func reset() { _ = speex_resampler_reset_mem(state) }

    /// A whole clip from one rate to another (not for the audio thread: it allocates).
    public static func convert(_ samples: [Int16], from inputRate: Int, to outputRate: Int, quality: Int = 8) throws -> [Int16] {
        guard inputRate != outputRate, !samples.isEmpty else { return samples }
        var err: Int32 = 0
        guard let s = speex_resampler_init(1, UInt32(inputRate), UInt32(outputRate), Int32(quality), &err), err == 0 else {
            throw SpeexError("speex_resampler_init \(inputRate) → \(outputRate) Hz: \(String(cString: speex_resampler_strerror(err)))")
        }
        defer { speex_resampler_destroy(s) }
        // The filter's delay is fed with zeros at the end so that the clip's last samples come out.
        let latency = Int(speex_resampler_get_input_latency(s))
        let input = samples + [Int16](repeating: 0, count: latency)
        var output = [Int16](repeating: 0, count: input.count * outputRate / inputRate + 64)
        var inLen = UInt32(input.count), outLen = UInt32(output.count)
        _ = speex_resampler_skip_zeros(s)
        _ = speex_resampler_process_int(s, 0, input, &inLen, &output, &outLen)
        output.removeLast(output.count - Int(outLen))
        return output
    }
}

/// speexdsp's own adaptive jitter buffer (`speex_jitter.h`), wrapped only so that the benchmark can
/// compare ours with it on the same traces. Not used on the audio path: `put` copies each packet
/// into a fresh heap allocation, which the audio thread must not do.
public final class SpeexJitterBuffer: @unchecked Sendable {
    private let state: OpaquePointer
    /// Timestamp units per `tick` (one frame).
    public let step: Int

    public init(step: Int) throws {
        guard let s = jitter_buffer_init(Int32(step)) else { throw SpeexError("jitter_buffer_init(\(step)) failed") }
        state = s
        self.step = step
    }

    deinit { jitter_buffer_destroy(state) }

    /// Sets a speexdsp control value (`JITTER_BUFFER_SET_*`).
    public func set(_ request: Int32, _ value: Int32) throws {
        var v = value
        if jitter_buffer_ctl(state, request, &v) != 0 { throw SpeexError("jitter_buffer_ctl \(request) = \(value) rejected") }
    }

    /// Gets a speexdsp control value (`JITTER_BUFFER_GET_*`).
    public func get(_ request: Int32) -> Int32 {
        var v: Int32 = 0
        _ = jitter_buffer_ctl(state, request, &v)
        return v
    }

    /// Stores a packet (timestamp and span in `step` units' clock, here samples).
    public func put(timestamp: UInt32, span: UInt32, sequence: UInt16, payload: UnsafeMutableRawBufferPointer) {
        var p = JitterBufferPacket()
        p.data = payload.baseAddress?.assumingMemoryBound(to: CChar.self)
        p.len = UInt32(payload.count)
        p.timestamp = timestamp
        p.span = span
        p.sequence = sequence
        p.user_data = 0
        jitter_buffer_put(state, &p)
    }

    public enum GetResult: Equatable { case ok(timestamp: UInt32, length: Int), missing, insertion }

    /// Asks for the packet due now (`desiredSpan` samples); copies its payload into `into`.
    public func get(into buffer: UnsafeMutableRawBufferPointer, desiredSpan: Int32) -> GetResult {
        var p = JitterBufferPacket()
        p.data = buffer.baseAddress?.assumingMemoryBound(to: CChar.self)
        p.len = UInt32(buffer.count)
        var offset: Int32 = 0
        let rc = jitter_buffer_get(state, &p, desiredSpan, &offset)
        switch rc {
        case JITTER_BUFFER_OK: return .ok(timestamp: p.timestamp, length: Int(p.len))
        case JITTER_BUFFER_INSERTION: return .insertion
        default: return .missing
        }
    }

    /// Advances the buffer's clock by one step (after each played frame).
    public func tick() { jitter_buffer_tick(state) }

    /// The playout point: the timestamp of the next frame `get` returns (`jitter_buffer_get_pointer_timestamp`).
    public var pointerTimestamp: UInt32 { UInt32(bitPattern: jitter_buffer_get_pointer_timestamp(state)) }
}
