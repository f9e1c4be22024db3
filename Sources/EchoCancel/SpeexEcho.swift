import CSpeexDSP

// The only file that calls speexdsp's echo and preprocess APIs.

/// Owns one speexdsp echo canceller with the preprocessor attached
/// (residual echo suppression, noise suppression, optional AGC).
final class SpeexEcho {
    private let echo: OpaquePointer
    private let pre: OpaquePointer

    init(_ s: EchoCancelSettings) throws {
        guard let echo = speex_echo_state_init(Int32(s.frameSize), Int32(s.tailSamples)) else {
            throw EchoCancelError(description: "speex_echo_state_init failed for frame \(s.frameSize), tail \(s.tailSamples)")
        }
        guard let pre = speex_preprocess_state_init(Int32(s.frameSize), Int32(s.sampleRate)) else {
            speex_echo_state_destroy(echo)
            throw EchoCancelError(description: "speex_preprocess_state_init failed for frame \(s.frameSize) at \(s.sampleRate) Hz")
        }
        self.echo = echo
        self.pre = pre
        // From here a throw runs deinit, which frees both states.
        do {  // (a block only to keep the settings together)
            // speexdsp assumes 8 kHz unless told; at 48 kHz that would cut the near-end voice's low band.
            var rate = Int32(s.sampleRate)
            try check(speex_echo_ctl(echo, SPEEX_ECHO_SET_SAMPLING_RATE, &rate), "SPEEX_ECHO_SET_SAMPLING_RATE \(rate)")
            var on: Int32 = s.noiseSuppressDB < 0 ? 1 : 0
            try preprocess(SPEEX_PREPROCESS_SET_DENOISE, &on, "SET_DENOISE")
            var noise = Int32(s.noiseSuppressDB)
            try preprocess(SPEEX_PREPROCESS_SET_NOISE_SUPPRESS, &noise, "SET_NOISE_SUPPRESS \(noise)")
            var agc: Int32 = s.agc ? 1 : 0
            try preprocess(SPEEX_PREPROCESS_SET_AGC, &agc, "SET_AGC")
            var off: Int32 = 0
            try preprocess(SPEEX_PREPROCESS_SET_DEREVERB, &off, "SET_DEREVERB")
            try preprocess(SPEEX_PREPROCESS_SET_ECHO_STATE, UnsafeMutableRawPointer(echo), "SET_ECHO_STATE")
            var sup = Int32(s.echoSuppressDB)
            try preprocess(SPEEX_PREPROCESS_SET_ECHO_SUPPRESS, &sup, "SET_ECHO_SUPPRESS \(sup)")
            var active = Int32(s.echoSuppressActiveDB)
            try preprocess(SPEEX_PREPROCESS_SET_ECHO_SUPPRESS_ACTIVE, &active, "SET_ECHO_SUPPRESS_ACTIVE \(active)")
        }
    }

    deinit {
        speex_preprocess_state_destroy(pre)
        speex_echo_state_destroy(echo)
    }

    /// Removes the echo of `reference` from `capture` and runs the preprocessor on the result.
    @inline(__always)
    func cancel(capture: UnsafePointer<Int16>, reference: UnsafePointer<Int16>, output: UnsafeMutablePointer<Int16>) {
        speex_echo_cancellation(echo, capture, reference, output)
        _ = speex_preprocess_run(pre, output)
    }

    /// Preprocessor only (echo canceller bypassed): keeps noise suppression consistent.
    @inline(__always)
    func preprocessOnly(_ samples: UnsafeMutablePointer<Int16>) {
        _ = speex_preprocess_run(pre, samples)
    }

    /// Forgets the learned echo path (after an xrun the alignment is lost).
    func reset() { speex_echo_state_reset(echo) }

    private func check(_ rc: Int32, _ what: String) throws {
        if rc != 0 { throw EchoCancelError(description: "speexdsp rejected \(what) (code \(rc))") }
    }

    private func preprocess(_ request: Int32, _ value: UnsafeMutableRawPointer, _ what: String) throws {
        try check(speex_preprocess_ctl(pre, request, value), what)
    }
}
