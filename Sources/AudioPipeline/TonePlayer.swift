import Frames
import RealTime

/// A mixer input that plays one of a fixed set of sounds at a time: the ring channel (chime,
/// ringback) or the cue channel (an event's tone). A control thread asks for a sound, once or
/// looped, at a gain, or for silence; the audio thread picks the newest request up at the next
/// frame. The sounds are copied in at `init`; the audio thread only reads them and one atomic
/// request, so playing never allocates or locks. Being mixed like any far end, a tone is also
/// in the echo reference: it is not sent back.
public final class TonePlayer: FrameSource, @unchecked Sendable {
    // @unchecked: `current`, `position` and `seen` belong to the audio thread, `posted` to the
    // thread that asks (the calls side, under its engine lock); they meet only in `request`.
    private let sounds: UnsafeMutableBufferPointer<UnsafeMutableBufferPointer<Int16>>
    /// The newest request: sequence << 32 | gain (Q15, 16 bits) << 16 | loop << 15 | sound + 1
    /// (0 = silence). One writer and one word, so requests in quick succession keep their order.
    private let request = Counter()
    private var posted = 0
    private var seen = 0
    private var current = -1
    private var position = 0
    private var loop = false
    private var gain: Int32 = 32767
    /// Sounds started (for the statistics and tests).
    public let started = Counter()

    public init(sounds: [[Int16]]) {
        precondition(!sounds.isEmpty && sounds.count < 0x7FFF, "a tone player holds 1...32766 sounds")
        self.sounds = .allocate(capacity: sounds.count)
        for (i, s) in sounds.enumerated() {
            let copy = UnsafeMutableBufferPointer<Int16>.allocate(capacity: max(1, s.count))
            _ = copy.initialize(from: s.isEmpty ? [0] : s)
            self.sounds[i] = copy
        }
    }

    deinit {
        for s in sounds { s.deallocate() }
        sounds.deallocate()
    }

    public var soundCount: Int { sounds.count }

    /// Plays sound `index` from its start (replacing what plays), looped or once, at `gain`
    /// (0...1). One thread at a time.
    public func play(_ index: Int, loop: Bool = false, gain: Double = 1) {
        precondition(sounds.indices.contains(index), "no sound \(index)")
        let q15 = Int(max(0, min(1, gain)) * 32767)
        posted += 1
        request.store(posted << 32 | q15 << 16 | (loop ? 1 << 15 : 0) | (index + 1))
        started.increment()
    }

    /// Silence from the next frame on (the same thread as `play`).
    public func stop() {
        posted += 1
        request.store(posted << 32)
    }

    public func readFrame(into buffer: UnsafeMutablePointer<Int16>, count: Int) -> Bool {
        let r = request.load
        if r != seen {
            seen = r
            current = (r & 0x7FFF) - 1
            loop = r & (1 << 15) != 0
            gain = Int32((r >> 16) & 0xFFFF)
            position = 0
        }
        guard current >= 0 else { return false }
        let sound = sounds[current]
        var filled = 0
        while filled < count {
            if position >= sound.count {
                guard loop else { break }
                position = 0
            }
            let n = min(count - filled, sound.count - position)
            if gain >= 32767 {
                (buffer + filled).update(from: sound.baseAddress! + position, count: n)
            } else {
                for i in 0..<n { buffer[filled + i] = Int16((Int32(sound[position + i]) * gain) >> 15) }
            }
            filled += n
            position += n
        }
        if filled == 0 {
            current = -1
            return false
        }
        if filled < count { (buffer + filled).update(repeating: 0, count: count - filled) }
        return true
    }
}
