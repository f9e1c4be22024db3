/// The control loop of a `DriftCorrector`: delay error in, playout-rate trim out. A value type
/// with no clock of its own; one `update` per frame.
///
/// Two parts share the trim:
/// - a PI loop on the smoothed error, whose integral is the drift estimate;
/// - an offset that takes up every known discrete change of the error (the jitter buffer inserting
///   or dropping a frame, an underrun's late packet, the target moving, the start of playout) the
///   moment it happens and works it off at the trim left over by the PI loop. The PI loop therefore
///   sees drift only, and its integral is not wound up by events that are not drift.
public struct DriftController: Sendable {
    public let settings: DriftSettings
    /// Seconds per update (one frame).
    private let dt: Double
    private let frameMs: Double
    /// Smoothing weight of each new reading (first-order low-pass).
    private let alpha: Double

    /// Smoothed error the PI loop sees, ms.
    public private(set) var errorMs: Double = 0
    /// Part of the raw error from discrete changes, not yet worked off, ms.
    public private(set) var offsetMs: Double = 0
    /// The integral term: the sender's clock rate relative to ours, ppm (positive: sender fast).
    public private(set) var driftPPM: Double = 0
    /// The last trim: input samples consumed per output sample = 1 + trim · 1e-6.
    public private(set) var trimPPM: Double = 0
    private var running = false

    public init(settings: DriftSettings, frameMs: Double) {
        precondition(frameMs > 0 && settings.smoothingMs >= 0 && settings.maxTrimPPM >= 0)
        self.settings = settings
        self.frameMs = frameMs
        dt = frameMs / 1000
        alpha = min(1, frameMs / max(frameMs, settings.smoothingMs))
    }

    /// One frame's reading.
    /// - Parameters:
    ///   - reading: delay minus setpoint, ms.
    ///   - stepMs: how much of the change since the last reading was a discrete change, ms.
    /// - Returns: the trim, ppm.
    public mutating func update(errorMs reading: Double, stepMs: Double) -> Double {
        if running {
            offsetMs += stepMs
        } else {
            // Playout (re)starts wherever the buffer started it: an offset, not drift.
            running = true
            offsetMs = reading
            errorMs = 0
        }
        errorMs += alpha * (reading - offsetMs - errorMs)
        let limit = settings.maxTrimPPM
        if abs(errorMs) < frameMs / 2 {  // larger is no drift: something the offset did not catch
            driftPPM = min(limit, max(-limit, driftPPM + settings.integralPPMPerMsSecond * errorMs * dt))
        }
        let pi = min(limit, max(-limit, driftPPM + settings.proportionalPPMPerMs * errorMs))
        // Work the offset off with the headroom, never past zero: a trim of x ppm moves the delay
        // by x·1e-6 of a frame per frame.
        let headroom = limit - abs(pi)
        let work = min(headroom, max(-headroom, offsetMs / (frameMs * 1e-6)))
        offsetMs -= work * 1e-6 * frameMs
        trimPPM = pi + work
        return trimPPM
    }

    /// No reading this frame (the jitter buffer is not playing): keep the drift estimate.
    public mutating func hold() -> Double {
        running = false
        offsetMs = 0
        errorMs = 0
        trimPPM = driftPPM
        return trimPPM
    }

    /// A new stream: forget everything.
    public mutating func reset() {
        errorMs = 0; offsetMs = 0; driftPPM = 0; trimPPM = 0; running = false
    }
}
