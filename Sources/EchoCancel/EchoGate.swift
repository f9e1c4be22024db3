import Glibc

/// Mutes the residual echo that the adaptive filter has not (yet) removed, while the far end talks.
///
/// speexdsp's residual echo suppressor scales with the filter's own echo estimate, so it does
/// nothing while the filter is still learning: for the first half second or so after a reset, or
/// after the far end's first words in a room that was quiet, the echo goes out almost untouched.
/// In a group call that is the caller's microphone repeating one callee to all the others.
///
/// The gate learns what the canceller leaves: `residual`, the cleaned output relative to the far
/// end's recent peak level, tracked in dB over frames taken as echo only (quickly up to the louder
/// ones, slowly down). It starts high (nothing learned: all of the echo may come back) and follows
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
        var hangoverFrames = 5
        /// The far end counts as active above this level (dBFS, its decaying peak).
        var farFloorDBFS = -55.0
        /// The far end's peak falls by this much over the canceller's tail (the room's echo decays).
        var farDecayDBOverTail = 30.0
    }

    private let settings: Settings
    private let frame: Int
    private let secondsPerFrame: Double
    private let farDecay: Double      // per frame, as a power factor
    private let farFloor: Double      // power, Int16 units squared
    private let closedGain: Double
    private var farPeak = 0.0
    private var residualDB: Double
    private var hangover = 0
    private var gain = 1.0

    init(frameSize: Int, sampleRate: Int, tailSamples: Int, settings: Settings = Settings()) {
        self.settings = settings
        frame = frameSize
        secondsPerFrame = Double(frameSize) / Double(sampleRate)
        farDecay = pow(10, -settings.farDecayDBOverTail / 10 * Double(frameSize) / Double(max(tailSamples, frameSize)))
        farFloor = 32768.0 * 32768.0 * pow(10, settings.farFloorDBFS / 10)
        closedGain = pow(10, -settings.attenuationDB / 20)
        residualDB = settings.startResidualDB
    }

    /// Gates `output` (the canceller's cleaned frame) in place, given the reference it was cleaned
    /// against and the reference's next frame (silence if not played yet). Returns true if the
    /// frame was attenuated.
    @discardableResult
    mutating func process(reference: UnsafePointer<Int16>, upcoming: UnsafePointer<Int16>,
                          output: UnsafeMutablePointer<Int16>) -> Bool {
        let referencePower = Self.power(reference, frame)
        farPeak = max(referencePower, Self.power(upcoming, frame), farPeak * farDecay)
        var target = 1.0
        if farPeak > farFloor {
            let ratioDB = 10 * log10(max(Self.power(UnsafePointer(output), frame), 1e-3) / farPeak)
            if ratioDB > residualDB + settings.nearEndMarginDB {
                hangover = settings.hangoverFrames
            } else if referencePower > farPeak * 0.1 {
                // Echo only, while the far end is talking now (not in its decay): learn.
                let step = ratioDB - residualDB
                residualDB += max(-settings.fallDBPerSecond * secondsPerFrame, min(settings.riseDBPerSecond * secondsPerFrame, step))
            }
            if hangover > 0 {
                hangover -= 1
            } else {
                target = closedGain
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
        farPeak = 0
        hangover = 0
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
