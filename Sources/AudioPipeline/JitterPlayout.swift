import Jitter

// Glue between the jitter buffer (which knows nothing of Opus or the mixer) and this module.

/// The jitter buffer decodes with Opus: FEC from the next packet, Opus's own loss concealment.
extension OpusDecoder: FrameDecoder {
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

    // `reset()` and `takeCarried(into:frameSize:)` are declared in Opus.swift.
}

/// A remote stream's jitter buffer is a mixer input, or its drift corrector is.
extension JitterBuffer: FrameSource {}
extension DriftCorrector: FrameSource {}
