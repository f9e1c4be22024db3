/// An estimated listening quality of a received stream, from its delay and loss, by the E-model
/// of ITU-T G.107 with its default values: an estimate, not a measurement (the suite measures
/// speech quality with PESQ). Narrowband scale: no loss and no delay give R 93.2, MOS 4.41.
/// Opus has no impairment values in G.113; taken here: Ie 0 (the codec alone costs nothing at
/// the bit rates a practice runs), Bpl 25.1 (a codec with loss concealment, as G.711 with
/// Appendix I's), losses random (BurstR 1). Deterministic, no I/O.
public struct CallQualityEstimate: Sendable, Equatable {
    /// The transmission rating factor, 0...100.
    public var r: Double
    /// The mean opinion score it predicts, 1...4.5.
    public var mos: Double

    public static let ie = 0.0
    public static let bpl = 25.1
    public static let burstR = 1.0

    /// - Parameters:
    ///   - delayMs: one-way delay, mouth to ear (G.107's Ta).
    ///   - lossRatio: frames lost and not recovered, 0...1.
    public init(delayMs: Double, lossRatio: Double) {
        let d = max(0, delayMs)
        let id = 0.024 * d + (d > 177.3 ? 0.11 * (d - 177.3) : 0)
        let ppl = min(100, max(0, lossRatio * 100))
        let ieEff = Self.ie + (95 - Self.ie) * ppl / (ppl / Self.burstR + Self.bpl)
        r = min(100, max(0, 93.2 - id - ieEff))
        mos = r <= 0 ? 1 : r >= 100 ? 4.5 : 1 + 0.035 * r + r * (r - 60) * (100 - r) * 7e-6
    }
}
