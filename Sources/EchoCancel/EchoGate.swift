import Glibc
import SignalTools

// The last word on a cleaned frame while the far end plays: what the canceller and the
// suppressor left is muted unless someone in the room is talking.

/// Mutes the residual echo that the adaptive filter has not (yet) removed, while the far end talks.
///
/// speexdsp's residual echo suppressor scales with the filter's own echo estimate, so it does
/// nothing while the filter is still learning: for the first half second or so after a reset, or
/// after the far end's first words in a room that was quiet, the echo goes out almost untouched.
/// In a group call that is the caller's microphone repeating one callee to all the others.
///
/// The gate learns what the canceller leaves: `residual`, the cleaned output relative to the far
/// end's peak level over the canceller's tail (`TailPeak`), tracked in dB over frames taken as
/// echo only (quickly up to the louder ones, slowly down). It starts high (nothing learned: all of
/// the echo may come back) and follows
/// the canceller down as it converges. A frame clearly louder than that (`nearEndMarginDB`) carries
/// near-end speech and opens the gate for `hangoverFrames`; the others are attenuated by
/// `attenuationDB` while the far end is active: deep, because until the canceller has converged
/// they are the echo itself, as loud as the far end's voice in the room.
/// A converged canceller leaves a low residual, so double talk passes; an unconverged one leaves a
/// high one, so the gate behaves like a half-duplex speakerphone until it has learned.
/// Allocation-free; the audio thread only.
struct EchoGate {
    struct Settings: Equatable {
        /// Residual assumed after a reset, relative to the far end's level: louder echo than
        /// speaker level, for a speaker close to a sensitive microphone.
        var startResidualDB = 12.0
        var nearEndMarginDB = 10.0
        /// How fast the learned residual follows the canceller: down as it converges, up slowly
        /// when the room changes.
        var fallDBPerSecond = 10.0
        var riseDBPerSecond = 100.0
        var attenuationDB = 60.0
        /// For a frame that is the echo of the terminal's own notes (`TonalEcho`): nobody in the
        /// room is in it, and while the canceller holds or has not learnt a note, it is the echo
        /// itself, up to -10 dBFS: 60 dB under that is still a tone at the far end.
        var toneAttenuationDB = 100.0
        var hangoverFrames = 5
        /// The far end counts as active above this level (dBFS, its peak over the tail).
        var farFloorDBFS = -55.0
    }

    private let settings: Settings
    private let frame: Int
    private let secondsPerFrame: Double
    private let farFloor: Double      // power, Int16 units squared
    private let closedGain: Double
    private let toneClosedGain: Double
    private let tailPeak: TailPeak
    private let tones: TonalEcho
    private var residualDB: Double
    private var hangover = 0
    private var gain = 1.0

    init(frameSize: Int, sampleRate: Int, tailSamples: Int, settings: Settings = Settings()) {
        self.settings = settings
        frame = frameSize
        secondsPerFrame = Double(frameSize) / Double(sampleRate)
        tailPeak = TailPeak(frames: max(tailSamples, frameSize) / frameSize)
        farFloor = 32768.0 * 32768.0 * pow(10, settings.farFloorDBFS / 10)
        closedGain = pow(10, -settings.attenuationDB / 20)
        toneClosedGain = pow(10, -settings.toneAttenuationDB / 20)
        residualDB = settings.startResidualDB
        tones = TonalEcho(frameSize: frameSize, floorPower: farFloor, holdFrames: max(tailSamples, frameSize) / frameSize)
    }

    /// Gates `output` (the canceller's cleaned frame) in place, given the reference it was cleaned
    /// against and the reference's next frame (silence if not played yet), each with whether it
    /// was mostly the terminal's own sound. Returns true if the frame was attenuated.
    @discardableResult
    mutating func process(reference: UnsafePointer<Int16>, ownSound: Bool, upcoming: UnsafePointer<Int16>,
                          upcomingOwnSound: Bool, output: UnsafeMutablePointer<Int16>) -> Bool {
        let referencePower = Self.power(reference, frame)
        let farPeak = max(tailPeak.push(referencePower), Self.power(upcoming, frame))
        // The next frame's notes too: an echo path that moved earlier brings a note's echo before
        // its reference, and a new note unknown to the filter comes back nearly whole.
        tones.listen(to: reference, ownSound: ownSound, upcoming: upcoming, upcomingOwnSound: upcomingOwnSound)
        var target = 1.0
        var echoOfNotes = false
        if farPeak > farFloor {
            // What is at the notes being played is their echo, however loud: only the rest can
            // be someone in the room, and only the rest is what the filter leaves of a voice.
            let atNotes = tones.shareAtNotes(UnsafePointer(output))
            let outputPower = Self.power(UnsafePointer(output), frame)
            let ratioDB = 10 * log10(max(outputPower * (1 - atNotes), 1e-3) / farPeak)
            let nearEnd = atNotes < TonalEcho.echoShare && ratioDB > residualDB + settings.nearEndMarginDB
            if atNotes >= TonalEcho.echoShare {
                hangover = 0  // the notes' echo outweighs whatever else is there: close now
                echoOfNotes = true
            } else if nearEnd {
                hangover = settings.hangoverFrames
            }
            if !nearEnd, referencePower > farPeak * 0.1 {
                // Echo only, while the far end is talking now (not in its decay): learn.
                let step = ratioDB - residualDB
                residualDB += max(-settings.fallDBPerSecond * secondsPerFrame, min(settings.riseDBPerSecond * secondsPerFrame, step))
            }
            if hangover > 0 {
                hangover -= 1
            } else {
                target = echoOfNotes ? toneClosedGain : closedGain
            }
        } else {
            hangover = 0
        }
        applyRamp(to: target, output)
        return target < 1
    }

    /// Forgets what was learned (the canceller forgot the path).
    mutating func reset() {
        residualDB = settings.startResidualDB
        tailPeak.forget()
        hangover = 0
        tones.forget()
    }

    /// Moves the gain to `target` across the frame: no step, no click.
    private mutating func applyRamp(to target: Double, _ output: UnsafeMutablePointer<Int16>) {
        if gain == 1, target == 1 { return }
        let step = (target - gain) / Double(frame)
        for i in 0..<frame {
            gain += step
            output[i] = Int16((Double(output[i]) * gain).rounded())
        }
        gain = target
    }

    private static func power(_ x: UnsafePointer<Int16>, _ n: Int) -> Double {
        var sum = 0.0
        for i in 0..<n { sum += Double(x[i]) * Double(x[i]) }
        return sum / Double(n)
    }
}

/// The loudest reference frame over the canceller's tail: what its filter still convolves, so
/// what the filter's misadjustment can ring with once a word has ended. Against a peak that decays
/// as a room's echo does, that ringing (the reference 60 dB down, the output still 40 dB under the
/// word) read as someone in the room and went back to the talker's terminal; on the rig, both ways,
/// the talker's voice then scored PESQ-WB 3.6-4.3 at the far end instead of 4.45-4.47.
/// Allocation-free after `init`.
final class TailPeak {
    private let powers: UnsafeMutablePointer<Double>
    private let count: Int
    private var next = 0

    init(frames: Int) {
        count = max(1, frames)
        powers = .allocate(capacity: count)
        powers.initialize(repeating: 0, count: count)
    }

    deinit { powers.deallocate() }

    /// Takes the newest frame's power; returns the largest of the last `frames`.
    func push(_ power: Double) -> Double {
        powers[next] = power
        next = next + 1 == count ? 0 : next + 1
        var peak = 0.0
        for i in 0..<count where powers[i] > peak { peak = powers[i] }
        return peak
    }

    func forget() {
        powers.update(repeating: 0, count: count)
    }
}

/// Tells the echo of the terminal's own tones from a person in the room, for the gate.
///
/// The adaptive filter learns a frequency only while the speaker plays it, and adapting at other
/// frequencies disturbs what it learnt there. A terminal's event tones are pure notes, so a note
/// comes back nearly whole when its frequency is new to the filter or was learnt a while ago
/// (offline: 9-60 dB less removed than for a note just heard). That echo is far louder than the
/// residual the gate learnt, so to the gate it looked like someone talking, and the far end heard
/// this room's tones (the rig caught a caller's "participant_left" at a callee).
/// A person does not sound like the very notes the speaker is playing. So while the reference is
/// the terminal's own sound (the mixer says so) and tonal (a few notes hold most of its power),
/// its notes are listened for over the canceller's tail: the power at them in an output frame is
/// their echo, whatever its level, and the gate judges only the rest. A far end's voice is never
/// taken apart this way. Written here: a 512-point spectrum of a few frames is all it needs.
/// Allocation-free after `init`; the audio thread only.
final class TonalEcho {
    /// Notes taken from one frame at most (the chime has four partials).
    static let notesPerFrame = 4
    /// Picking notes stops once they hold this share of the frame's power; the frame is tonal
    /// if they hold `tonalShare`.
    static let enoughShare = 0.95
    static let tonalShare = 0.7
    /// An output frame with this share at the notes is their echo, whatever the rest.
    static let echoShare = 0.5
    /// Notes listened for at once: a frame's, and the ones before still decaying.
    static let slots = 8
    /// Bins either side of a note's peak that hold its power: a Hann window's main lobe.
    static let lobe = 2

    private let frame: Int
    private let half: Int
    private let plan: FFTPlan
    private let floorEnergy: Double
    private let holdFrames: Int
    private let window: UnsafeMutablePointer<Double>
    private let re: UnsafeMutablePointer<Double>
    private let im: UnsafeMutablePointer<Double>
    private let power: UnsafeMutablePointer<Double>
    /// Per bin: whether a note's lobe covers it (scratch while listening, then while judging).
    private let covered: UnsafeMutablePointer<Bool>
    private let picked: UnsafeMutablePointer<Int>
    /// Per slot: the note's centre bin and the frames it is still listened for (0: empty).
    private let bins: UnsafeMutablePointer<Int>
    private let holds: UnsafeMutablePointer<Int>

    /// - Parameters: `floorPower`: mean square (Int16 units) below which a reference is silence;
    ///   `holdFrames`: how long a note's echo may outlast it (the canceller's tail).
    init(frameSize: Int, floorPower: Double, holdFrames: Int) {
        frame = frameSize
        let size = FFTPlan.nextPowerOfTwo(frameSize)
        half = size / 2
        plan = FFTPlan(size: size)
        floorEnergy = floorPower * Double(frameSize)
        self.holdFrames = holdFrames
        window = .allocate(capacity: frameSize)
        for i in 0..<frameSize { window[i] = 0.5 - 0.5 * cos(2 * Double.pi * (Double(i) + 0.5) / Double(frameSize)) }
        re = .allocate(capacity: size)
        im = .allocate(capacity: size)
        power = .allocate(capacity: half)
        power.initialize(repeating: 0, count: half)
        covered = .allocate(capacity: half)
        covered.initialize(repeating: false, count: half)
        picked = .allocate(capacity: Self.notesPerFrame)
        picked.initialize(repeating: 0, count: Self.notesPerFrame)
        bins = .allocate(capacity: Self.slots)
        bins.initialize(repeating: 0, count: Self.slots)
        holds = .allocate(capacity: Self.slots)
        holds.initialize(repeating: 0, count: Self.slots)
    }

    deinit {
        window.deallocate(); re.deallocate(); im.deallocate(); power.deallocate()
        covered.deallocate(); picked.deallocate(); bins.deallocate(); holds.deallocate()
    }

    /// Ages the notes taken before; takes the notes of a reference frame, and of the one after it,
    /// that is the terminal's own tonal sound.
    func listen(to reference: UnsafePointer<Int16>, ownSound: Bool, upcoming: UnsafePointer<Int16>, upcomingOwnSound: Bool) {
        for s in 0..<Self.slots where holds[s] > 0 { holds[s] -= 1 }
        if ownSound { take(reference) }
        if upcomingOwnSound { take(upcoming) }
    }

    private func take(_ reference: UnsafePointer<Int16>) {
        var energy = 0.0
        for i in 0..<frame { energy += Double(reference[i]) * Double(reference[i]) }
        guard energy > floorEnergy else { return }
        let total = spectrum(reference)
        guard total > 0 else { return }
        covered.update(repeating: false, count: half)
        var share = 0.0
        var found = 0
        while found < Self.notesPerFrame, share < Self.enoughShare * total {
            var best = -1
            var bestPower = 0.0
            for k in Self.lobe..<(half - Self.lobe) where !covered[k] && power[k] > bestPower {
                best = k
                bestPower = power[k]
            }
            guard best >= 0 else { break }
            picked[found] = best
            found += 1
            for j in (best - Self.lobe)...(best + Self.lobe) where !covered[j] {
                covered[j] = true
                share += power[j]
            }
        }
        guard share >= Self.tonalShare * total else { return }
        for n in 0..<found { remember(picked[n]) }
    }

    /// The share of `output`'s power at the notes listened for (0 when none is).
    func shareAtNotes(_ output: UnsafePointer<Int16>) -> Double {
        guard (0..<Self.slots).contains(where: { holds[$0] > 0 }) else { return 0 }
        let total = spectrum(output)
        guard total > 0 else { return 0 }
        covered.update(repeating: false, count: half)
        for s in 0..<Self.slots where holds[s] > 0 {
            for j in (bins[s] - Self.lobe)...(bins[s] + Self.lobe) { covered[j] = true }
        }
        var atNotes = 0.0
        for k in 1..<half where covered[k] { atNotes += power[k] }
        return atNotes / total
    }

    func forget() {
        holds.update(repeating: 0, count: Self.slots)
    }

    /// Hann-windowed power spectrum of one frame into `power`; returns its sum (bins 1..<half).
    private func spectrum(_ x: UnsafePointer<Int16>) -> Double {
        let size = 2 * half
        for i in 0..<size {
            re[i] = i < frame ? Double(x[i]) * window[i] : 0
            im[i] = 0
        }
        plan.forward(re: re, im: im)
        var total = 0.0
        power[0] = 0
        for k in 1..<half {
            power[k] = re[k] * re[k] + im[k] * im[k]
            total += power[k]
        }
        return total
    }

    /// Listens for the note at bin `k` again: in its own slot, or in the slot that has least left.
    private func remember(_ k: Int) {
        var slot = 0
        for s in 0..<Self.slots {
            if holds[s] > 0, bins[s] == k { slot = s; break }
            if holds[s] < holds[slot] { slot = s }
        }
        bins[slot] = k
        holds[slot] = holdFrames
    }
}

