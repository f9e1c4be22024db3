import Codec
import RealTime

/// What this terminal sent, decoded again as the far end decodes it, for the loop canceller on the
/// audio thread (`LoopCanceller`: Opus keeps the sound, not the waveform, so the frames before the
/// encoder do not reveal the loop). The network thread hands back exactly one frame per microphone
/// frame it took (silence for one not sent), so the audio thread can tell which captured frame
/// each belongs to. Network thread only; allocation-free after `init`.
public final class SentDecoder: @unchecked Sendable {
    // @unchecked: the decoder and the frame are the network thread's; `ring` is SPSC.
    private let decoder: OpusDecoder
    private let ring: SampleRing
    private let frame: UnsafeMutablePointer<Int16>
    private let frameSize: Int
    /// Frames the audio thread had not taken yet when the ring was full. Never expected: the ring
    /// holds more than the microphone ring, so the network thread cannot get that far ahead; a
    /// drop would pair each later frame with the captured frame before its own.
    public let dropped = Counter()

    /// Unset: nothing is decoded, silence is handed back (the loop canceller is off).
    private let active: Flag

    /// `ring`: the audio thread's end is `MicrophoneChain.sentBack`; `active`: the loop canceller's `enabled`.
    public init(sampleRate: Int, frameSize: Int, ring: SampleRing, active: Flag) throws {
        decoder = try OpusDecoder(sampleRate: sampleRate)
        self.active = active
        self.ring = ring
        self.frameSize = frameSize
        frame = .allocate(capacity: frameSize)
        frame.initialize(repeating: 0, count: frameSize)
    }

    deinit { frame.deallocate() }

    /// The packet just sent for the microphone frame.
    public func sent(_ payload: UnsafePointer<UInt8>, length: Int) {
        if !active.isSet || decoder.decodeFrame(payload, length: length, into: frame, frameSize: frameSize) < frameSize {
            frame.update(repeating: 0, count: frameSize)
        }
        handBack()
    }

    /// Nothing was sent for the microphone frame (no peers, DTX, an error).
    public func notSent() {
        frame.update(repeating: 0, count: frameSize)
        handBack()
    }

    private func handBack() {
        if !ring.write(frame, count: frameSize) { dropped.increment() }
    }
}
