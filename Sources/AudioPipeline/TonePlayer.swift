import Frames
import RealTime
import Synchronization

/// A mixer input that plays one of a fixed set of sounds at a time: the ring channel (chime,
/// ringback) or the cue channel (an event's tone). A control thread asks for a sound, once or
/// looped, at a gain, or for silence; the audio thread picks the newest request up at the next
/// frame. The sounds are copied in at `init`; the audio thread only reads them and one atomic
/// request, so playing never allocates or locks. Being mixed like any far end, a tone is also
/// in the echo reference: it is not sent back. `replace` swaps the whole set while it plays
/// (a reload): the audio thread takes the new set at its next frame and hands the old one back
/// to be freed by the thread that replaces, never on the audio thread.
public final class TonePlayer: FrameSource, @unchecked Sendable {
    // @unchecked: `bank`, `current`, `position` and `seen` belong to the audio thread, `posted` to
    // the thread that asks (the calls side, under its engine lock); they meet only in `request`.
    // `offered` and `retired` carry whole sets between the replacing thread and the audio thread.
    private typealias Bank = UnsafeMutablePointer<UnsafeMutableBufferPointer<Int16>>
    private var bank: Bank
    /// A set waiting for the audio thread (its address, 0 = none).
    private let offered = Atomic<Int>(0)
    /// The set the audio thread let go, to be freed (0 = none). Only the audio thread makes it
    /// non-zero, and only when it is zero, so one slot is enough.
    private let retired = Atomic<Int>(0)
    /// Sets the audio thread has taken (read by tests: that a new set was taken mid-tone).
    public let replaced = Counter()
    public let soundCount: Int
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
    /// What the audio thread plays: the request it took last, and whether a sound is under way.
    private let taken = Counter()
    private let sounding = Flag(false)

    public init(sounds: [[Int16]]) {
        precondition(!sounds.isEmpty && sounds.count < 0x7FFF, "a tone player holds 1...32766 sounds")
        soundCount = sounds.count
        bank = Self.makeBank(sounds)
    }

    deinit {
        Self.free(bank, count: soundCount)
        Self.free(offered.load(ordering: .acquiring), count: soundCount)
        Self.free(retired.load(ordering: .acquiring), count: soundCount)
    }

    /// Swaps in a new set of as many sounds (a reload): what plays goes on from the same place in
    /// the new sound, or ends if that is shorter. One thread at a time (not the audio thread).
    public func replace(sounds: [[Int16]]) {
        precondition(sounds.count == soundCount, "a replacement holds \(soundCount) sounds")
        let new = Self.makeBank(sounds)
        Self.free(retired.exchange(0, ordering: .acquiring), count: soundCount)
        // A set offered before and not yet taken is never seen by the audio thread.
        Self.free(offered.exchange(Int(bitPattern: new), ordering: .acquiringAndReleasing), count: soundCount)
    }

    private static func makeBank(_ sounds: [[Int16]]) -> Bank {
        let bank = Bank.allocate(capacity: sounds.count)
        for (i, s) in sounds.enumerated() {
            let copy = UnsafeMutableBufferPointer<Int16>.allocate(capacity: max(1, s.count))
            _ = copy.initialize(from: s.isEmpty ? [0] : s)
            (bank + i).initialize(to: copy)
        }
        return bank
    }

    private static func free(_ address: Int, count: Int) {
        if let bank = Bank(bitPattern: address) { free(bank, count: count) }
    }

    private static func free(_ bank: Bank, count: Int) {
        for i in 0..<count { bank[i].deallocate() }
        bank.deallocate()
    }

    /// Plays sound `index` from its start (replacing what plays), looped or once, at `gain`
    /// (0...1). One thread at a time.
    public func play(_ index: Int, loop: Bool = false, gain: Double = 1) {
        precondition((0..<soundCount).contains(index), "no sound \(index)")
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

    /// A sound plays, or one was asked for and not yet taken (any thread).
    public var isSounding: Bool { sounding.isSet || request.load != taken.load }

    public func readFrame(into buffer: UnsafeMutablePointer<Int16>, count: Int) -> Bool {
        let playing = fill(buffer, count: count)
        if playing != sounding.isSet { sounding.set(playing) }
        return playing
    }

    private func fill(_ buffer: UnsafeMutablePointer<Int16>, count: Int) -> Bool {
        if retired.load(ordering: .acquiring) == 0,
           let new = Bank(bitPattern: offered.exchange(0, ordering: .acquiringAndReleasing)) {
            retired.store(Int(bitPattern: bank), ordering: .releasing)
            bank = new
            replaced.increment()
        }
        let r = request.load
        if r != seen {
            seen = r
            current = (r & 0x7FFF) - 1
            loop = r & (1 << 15) != 0
            gain = Int32((r >> 16) & 0xFFFF)
            position = 0
            taken.store(r)
        }
        guard current >= 0 else { return false }
        let sound = bank[current]
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
