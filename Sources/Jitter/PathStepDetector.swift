/// Tells a step of the path's delay from a clock's drift, in the floor transit a `DriftCorrector`
/// reads its delay against.
///
/// Drift moves the floor by at most `DriftSettings.maxTrimPPM` (1 ms a second at 1000 ppm); a
/// path that got slower or faster (a loaded sender, its capture handing frames over at another
/// phase, a link rerouted) moves it by milliseconds within the window's turnover. The PI loop
/// cannot tell such a step from the start of a ramp: simulated, a 3 ms step on one clock read as
/// -100 ppm of drift for half a minute, and the rig's howling test caught 42 and 70 ppm. So a
/// follower trails the floor along the drift estimate's ramp, straying from it no faster than
/// `DriftSettings.floorSlewPPM`; where the floor gets further
/// from it than a threshold, the distance is a step, handed to the controller's offset whole, and
/// the follower is put on the floor. The threshold is the larger of a fixed one
/// (`DriftSettings.pathStepFrames`) and the window's spread over the square root of its packets,
/// a few standard errors of the floor percentile: its own wandering, ±1 ms on 30 ms of jitter,
/// stays under it and is left to the loop, as a ramp is.
/// A value type with no clock of its own; the audio thread only.
public struct PathStepDetector: Sendable {
    /// How far from the drift estimate's ramp the follower may move, ns of floor per ns of time.
    private let rate: Double
    private let thresholdNs: Int64
    private let spreadScale: Double
    private var follower: Int64 = 0
    private var lastNanos: Int64 = 0
    private var started = false
    /// Until the window has turned over once since the start, its floor is a percentile of the
    /// few packets since (a new timeline) and moves as it fills: followed, never a step.
    private let windowNs: Int64
    private var fillingUntil: Int64 = 0

    /// - Parameters: `thresholdNs`: the fixed threshold; `windowCount`, `windowNs`: packets in the
    ///   window the floor is a percentile of, and how long they take.
    public init(slewPPM: Double, thresholdNs: Int64, windowCount: Int, windowNs: Int64) {
        self.windowNs = windowNs
        rate = slewPPM * 1e-6
        self.thresholdNs = thresholdNs
        spreadScale = 1 / Double(max(1, windowCount)).squareRoot()
    }

    /// Forgets the floor it followed: the next `update` starts over (a new stream).
    public mutating func reset() { started = false }

    /// Starts following at `floorNs` (playout (re)started there).
    public mutating func start(at floorNs: Int64, now: Int64) {
        follower = floorNs
        lastNanos = now
        fillingUntil = now + windowNs
        started = true
    }

    /// One reading of the floor and of the window's spread (from the floor to the percentile the
    /// target covers); returns the step it took, ns (0: none).
    /// `driftPPM`: the loop's estimate (a fast sender's transit falls).
    public mutating func update(floorNs: Int64, spreadNs: Int64, driftPPM: Double, now: Int64) -> Int64 {
        guard started else { start(at: floorNs, now: now); return 0 }
        let elapsed = Double(max(0, now - lastNanos))
        lastNanos = now
        let ramp = -driftPPM * 1e-6 * elapsed, reach = rate * elapsed
        follower += Int64(max(ramp - reach, min(ramp + reach, Double(floorNs - follower))).rounded())
        let distance = floorNs - follower
        if now < fillingUntil { follower = floorNs; return 0 }
        guard abs(distance) > max(thresholdNs, Int64(Double(max(0, spreadNs)) * spreadScale)) else { return 0 }
        follower = floorNs
        return distance
    }
}
