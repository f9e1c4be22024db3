import SignalTools

/// What an `ImpairmentModel` has decided so far.
///
/// Accounting: `sent == received - droppedRandom - droppedBurst + duplicated` (see `isBalanced`);
/// `reordered` counts delivered packets that were held back (a duplicate's copy is never held back).
public struct ImpairmentCounters: Sendable, Equatable, CustomStringConvertible {
    /// Packets given to the model.
    public var received: UInt64 = 0
    /// Packets lost to independent random loss.
    public var droppedRandom: UInt64 = 0
    /// Packets lost in the Gilbert-Elliott bad state.
    public var droppedBurst: UInt64 = 0
    /// Packets held back by `reorderDelayMs`.
    public var reordered: UInt64 = 0
    /// Packets scheduled twice.
    public var duplicated: UInt64 = 0
    /// Send times produced (copies included).
    public var sent: UInt64 = 0

    /// All counters zero.
    public init() {}

    /// True when the counters satisfy `sent == received - droppedRandom - droppedBurst + duplicated`.
    public var isBalanced: Bool {
        sent &+ droppedRandom &+ droppedBurst == received &+ duplicated
    }

    public var description: String {
        "received \(received), dropped \(droppedRandom) random + \(droppedBurst) burst, "
            + "reordered \(reordered), duplicated \(duplicated), sent \(sent)"
    }
}

/// Pure, deterministic impairment decisions: packet arrival time in, send times out.
///
/// Every packet consumes exactly seven pseudo-random draws whatever happens to it, so changing one
/// probability does not shift the random stream of all later decisions.
public struct ImpairmentModel: Sendable {
    /// The validated profile in use.
    public let profile: ImpairmentProfile
    /// Decisions taken so far.
    public private(set) var counters = ImpairmentCounters()
    /// True while the Gilbert-Elliott chain is in the bad (bursty loss) state.
    public private(set) var inBurst = false

    private var random: SplitMix64
    private let loss, burstEnter, burstExit, burstLoss, reorder, duplicate: Double
    private let baseNs, jitterNs, reorderNs: Double

    /// A model at the start of its random stream; throws if the profile is invalid.
    public init(profile: ImpairmentProfile) throws(ImpairmentProfileError) {
        try profile.validate()
        self.profile = profile
        random = SplitMix64(seed: profile.seed)
        loss = profile.lossPercent / 100
        burstEnter = profile.burstEnterPercent / 100
        burstExit = profile.burstExitPercent / 100
        burstLoss = profile.burstLossPercent / 100
        reorder = profile.reorderPercent / 100
        duplicate = profile.duplicatePercent / 100
        baseNs = profile.baseDelayMs * 1e6
        jitterNs = profile.jitterMs * 1e6
        reorderNs = profile.reorderDelayMs * 1e6
    }

    /// Send times (ns, same clock as `arrivalNs`, ascending) for a packet: empty = lost, two = duplicated.
    public mutating func sendTimes(arrivalNs: UInt64) -> [UInt64] {
        let transition = random.nextUnit(), burstDraw = random.nextUnit(), lossDraw = random.nextUnit()
        let jitterDraw = random.nextUnit(), reorderDraw = random.nextUnit()
        let duplicateDraw = random.nextUnit(), copyJitterDraw = random.nextUnit()
        counters.received += 1

        // Gilbert-Elliott: move the chain first, then this packet suffers the state it lands in.
        if inBurst {
            if transition < burstExit { inBurst = false }
        } else if transition < burstEnter {
            inBurst = true
        }
        if inBurst && burstDraw < burstLoss {
            counters.droppedBurst += 1
            return []
        }
        if lossDraw < loss {
            counters.droppedRandom += 1
            return []
        }

        var first = arrivalNs &+ UInt64(baseNs + jitterDraw * jitterNs)
        if reorderDraw < reorder {
            first &+= UInt64(reorderNs)
            counters.reordered += 1
        }
        guard duplicateDraw < duplicate else {
            counters.sent += 1
            return [first]
        }
        let copy = arrivalNs &+ UInt64(baseNs + copyJitterDraw * jitterNs)
        counters.duplicated += 1
        counters.sent += 2
        return first <= copy ? [first, copy] : [copy, first]
    }
}
