// The vocabulary the frame path speaks: what the audio thread pulls a frame from, what a jitter
// buffer decodes with, and a stream's place in the mix. Everything here runs on the audio thread:
// it must not allocate, lock, log or block.

import RealTime
import Synchronization

/// Something the audio thread pulls one frame of 16-bit mono samples from.
/// Must not allocate, lock or block: it runs on the audio thread.
public protocol FrameSource: AnyObject, Sendable {
    /// Fills `count` samples and returns true, or returns false (the caller plays silence).
    func readFrame(into buffer: UnsafeMutablePointer<Int16>, count: Int) -> Bool
}

extension SampleRing: FrameSource {
    @inline(__always)
    public func readFrame(into buffer: UnsafeMutablePointer<Int16>, count: Int) -> Bool {
        read(into: buffer, count: count)
    }
}

/// The audio decoder a `JitterBuffer` drives (the Opus wrapper conforms elsewhere).
///
/// Every method runs on the audio thread: it must not allocate, lock, log or block.
/// Each writes `frameSize` mono 16-bit samples into `output` and returns the number of samples
/// written; a negative value is an error (the jitter buffer then plays silence for that frame).
/// `decode` may return more than `frameSize` for a packet longer than a frame: it then writes the
/// first frame and keeps the rest for `takeCarried`.
public protocol FrameDecoder: AnyObject {
    /// Decodes one packet's payload.
    func decode(_ payload: UnsafeRawBufferPointer, into output: UnsafeMutablePointer<Int16>, frameSize: Int) -> Int
    /// Recovers the frame *before* `next` from `next`'s in-band forward error correction data;
    /// negative if `next` carries none (the buffer then conceals and counts a loss).
    func decodeFEC(from next: UnsafeRawBufferPointer, into output: UnsafeMutablePointer<Int16>, frameSize: Int) -> Int
    /// Whether `next` carries FEC data for the frame before it (without decoding anything).
    func carriesFEC(_ next: UnsafeRawBufferPointer) -> Bool
    /// Packet loss concealment: synthesises a plausible frame when no data is available.
    func conceal(into output: UnsafeMutablePointer<Int16>, frameSize: Int) -> Int
    /// Forgets all history, as if newly created (a new stream reuses the slot). Called by
    /// `JitterBuffer.reset()`, i.e. while no other method of the decoder runs.
    func reset()
    /// The rest of the last decoded packet when it held more than one frame (`decode` returned more
    /// than `frameSize`): up to `frameSize` samples; returns how many, 0 when nothing is left.
    func takeCarried(into output: UnsafeMutablePointer<Int16>, frameSize: Int) -> Int
}

extension FrameDecoder {
    /// Decoders without forward error correction never carry any.
    public func carriesFEC(_ next: UnsafeRawBufferPointer) -> Bool { false }

    /// Decoders whose packets are always one frame carry nothing over.
    public func takeCarried(into output: UnsafeMutablePointer<Int16>, frameSize: Int) -> Int { 0 }
}

/// One incoming stream's place in the mix.
public final class MixerInput: Sendable {
    public let source: any FrameSource
    /// Linear gain, changed at run time by control threads.
    public let gain: Gauge
    /// Frames this input had nothing for (silence was mixed instead).
    public let underruns = Counter()
    /// nil: always mixed (a fixed input). Otherwise the slot is mixed only while a control thread
    /// has activated it; streams come and go at run time without a lock (see `SlotHandOff`).
    public let handOff: SlotHandOff?
    /// The terminal's own sound (tones, announcements), not a far end. Muting the speaker does
    /// not silence it: a box without a screen must still say that a call rings or a mute key was
    /// pressed. And the echo canceller is told when it fills a frame: its notes, however loud
    /// their echo, are not someone talking.
    public let isOwnSound: Bool

    public init(source: any FrameSource, gain: Double = 1, handOff: SlotHandOff? = nil, isOwnSound: Bool = false) {
        self.source = source
        self.gain = Gauge(gain)
        self.handOff = handOff
        self.isOwnSound = isOwnSound
    }
}

/// How much sooner or later than its nominal moment the frame being mixed now will reach the
/// speaker, ns: the playback half writes when the device has room, and that wake-up is not the
/// device's clock (a late wake-up, a sound server that asks for two periods at once, a queue topped
/// up from capture's wake-ups). The engine stores it before each mix; the stream sources read
/// their clock through it, so that the delay they measure and steer is the delay heard.
/// Written and read on the audio thread; an atomic only to be `Sendable`.
public final class PlayoutLead: Sendable {
    private let value = Atomic<Int64>(0)
    public init() {}
    @inline(__always) public func store(nanos: Int64) { value.store(nanos, ordering: .relaxed) }
    @inline(__always) public var nanos: Int64 { value.load(ordering: .relaxed) }
}
