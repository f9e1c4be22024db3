import Calls
import SignalTools

/// The device round-trip test as the control socket carries it: `loopback` starts it and is
/// answered at once; `loopback_result` is polled until the state is done (or aborted), so a
/// measurement of a second or two never holds up the control thread or other clients.
public struct LoopbackStatus: Sendable, Equatable {
    public enum State: String, Sendable {
        case idle, running, done, aborted
    }
    public var state: State
    /// The analysis, once done.
    public var result: LoopbackAnalysis.Result?

    public init(state: State, result: LoopbackAnalysis.Result? = nil) {
        self.state = state
        self.result = result
    }
}

/// The network round-trip test (`net_loopback`, then `net_loopback_result` until done).
public struct NetworkLoopbackStatus: Sendable, Equatable {
    public var state: LoopbackStatus.State
    public var room: RoomID?
    public var result: RoundTripSummary?
    /// This terminal's timing, with the result: what the whole-path estimate needs besides the two measurements.
    public var terminal: TerminalTiming?

    public init(state: LoopbackStatus.State, room: RoomID? = nil, result: RoundTripSummary? = nil, terminal: TerminalTiming? = nil) {
        self.state = state
        self.room = room
        self.result = result
        self.terminal = terminal
    }
}

// On the wire a status is one object: `state`, and the result's members beside it once done
// (docs/control.md). Milliseconds and levels are rounded to thousandths; what was not measured is null.

private func thousandths(_ v: Double?) -> Double? {
    guard let v, v.isFinite else { return nil }
    return (v * 1000).rounded() / 1000
}

/// `[x, y]` pairs: a plot's points and a histogram's bins.
private struct Pair: Codable {
    var x: Double?
    var y: Double?
    init(_ x: Double?, _ y: Double?) { self.x = x; self.y = y }
    init(from decoder: Decoder) throws {
        var c = try decoder.unkeyedContainer()
        x = try c.decode(Double?.self)
        y = try c.decode(Double?.self)
        guard c.isAtEnd else { throw Wire.invalid(decoder, "must be a pair [x, y]") }
    }
    func encode(to encoder: Encoder) throws {
        var c = encoder.unkeyedContainer()
        try c.encode(x)
        try c.encode(y)
    }
}

extension LoopbackStatus.State: Codable {}

extension LoopbackStatus: Codable {
    private enum CodingKeys: String, CodingKey {
        case state, roundTripMs, playbackBufferMs, pathMs, capturePeriodMs, correlation, echoLevelDb, snrDb, clippedSamples, curve
        case problems, warnings
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(state, forKey: .state)
        guard let r = result else { return }
        try c.encode(thousandths(r.roundTripMs), forKey: .roundTripMs)
        try c.encode(thousandths(r.playbackBufferMs), forKey: .playbackBufferMs)
        try c.encode(thousandths(r.pathMs), forKey: .pathMs)
        try c.encode(thousandths(r.capturePeriodMs), forKey: .capturePeriodMs)
        try c.encode(thousandths(r.correlation), forKey: .correlation)
        try c.encode(thousandths(r.echoLevelDb), forKey: .echoLevelDb)
        try c.encode(thousandths(r.snrDb), forKey: .snrDb)
        try c.encode(r.clippedSamples, forKey: .clippedSamples)
        try c.encode(r.curve.map { Pair(thousandths($0.ms), thousandths($0.value)) }, forKey: .curve)
        try c.encode(r.problems, forKey: .problems)
        try c.encode(r.warnings, forKey: .warnings)
    }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let state = try c.decode(State.self, forKey: .state)
        guard c.contains(.roundTripMs) else { self.init(state: state); return }
        let curve = try c.decode([Pair].self, forKey: .curve).map { LoopbackAnalysis.CurvePoint(ms: $0.x ?? .nan, value: $0.y ?? .nan) }
        self.init(state: state, result: LoopbackAnalysis.Result(
            roundTripMs: try c.decode(Double?.self, forKey: .roundTripMs), playbackBufferMs: try c.decode(Double?.self, forKey: .playbackBufferMs),
            pathMs: try c.decode(Double?.self, forKey: .pathMs), capturePeriodMs: try c.decode(Double.self, forKey: .capturePeriodMs),
            correlation: try c.decode(Double.self, forKey: .correlation), echoLevelDb: try c.decode(Double.self, forKey: .echoLevelDb),
            snrDb: try c.decode(Double?.self, forKey: .snrDb), clippedSamples: try c.decode(Int.self, forKey: .clippedSamples),
            curve: curve, problems: try c.decode([String].self, forKey: .problems), warnings: try c.decode([String].self, forKey: .warnings)))
    }
}

extension NetworkLoopbackStatus: Codable {
    private enum CodingKeys: String, CodingKey {
        case state, room, sent, received, duplicates, lossPercent, rttMinMs, rttMedianMs, rttP95Ms = "rttP95Ms", rttMaxMs, jitterMs
        case binWidthMs, histogram, problems, recommendations, terminal
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(state, forKey: .state)
        try c.encode(room, forKey: .room)
        if let r = result {
            try c.encode(r.sent, forKey: .sent)
            try c.encode(r.received, forKey: .received)
            try c.encode(r.duplicates, forKey: .duplicates)
            try c.encode(thousandths(r.lossPercent), forKey: .lossPercent)
            try c.encode(thousandths(r.minMs), forKey: .rttMinMs)
            try c.encode(thousandths(r.medianMs), forKey: .rttMedianMs)
            try c.encode(thousandths(r.p95Ms), forKey: .rttP95Ms)
            try c.encode(thousandths(r.maxMs), forKey: .rttMaxMs)
            try c.encode(thousandths(r.jitterMs), forKey: .jitterMs)
            try c.encode(thousandths(r.binWidthMs), forKey: .binWidthMs)
            try c.encode(r.histogram.map { Pair(thousandths($0.fromMs), Double($0.count)) }, forKey: .histogram)
            try c.encode(r.problems, forKey: .problems)
            try c.encode(r.recommendations, forKey: .recommendations)
        }
        try c.encodeIfPresent(terminal.map(Timing.init), forKey: .terminal)
    }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let state = try c.decode(LoopbackStatus.State.self, forKey: .state)
        let room = try? c.decodeIfPresent(RoomID.self, forKey: .room)
        guard c.contains(.sent) else { self.init(state: state, room: room); return }
        var bins: [RoundTripSummary.Bin] = []
        for pair in try c.decode([Pair].self, forKey: .histogram) {
            guard let from = pair.x, let n = pair.y, let count = Int(exactly: n) else {
                throw DecodingError.dataCorruptedError(forKey: .histogram, in: c, debugDescription: "must hold [from_ms, count] pairs")
            }
            bins.append(.init(fromMs: from, count: count))
        }
        let r = RoundTripSummary(
            sent: try c.decode(Int.self, forKey: .sent), received: try c.decode(Int.self, forKey: .received),
            duplicates: try c.decode(Int.self, forKey: .duplicates), lossPercent: try c.decode(Double.self, forKey: .lossPercent),
            minMs: try c.decode(Double?.self, forKey: .rttMinMs), medianMs: try c.decode(Double?.self, forKey: .rttMedianMs),
            p95Ms: try c.decode(Double?.self, forKey: .rttP95Ms), maxMs: try c.decode(Double?.self, forKey: .rttMaxMs),
            jitterMs: try c.decode(Double?.self, forKey: .jitterMs), binWidthMs: try c.decode(Double.self, forKey: .binWidthMs),
            histogram: bins, problems: try c.decode([String].self, forKey: .problems),
            recommendations: try c.decode([String].self, forKey: .recommendations))
        self.init(state: state, room: room, result: r, terminal: try c.decodeIfPresent(Timing.self, forKey: .terminal)?.timing)
    }

    /// This terminal's timing as the wire spells it.
    private struct Timing: Codable {
        var periodMs: Double, bufferPeriods: Int, playbackFillPeriods: Int, processingDelayMs: Double, codecLookaheadMs: Double
        var jitterMinMs: Double, jitterMaxMs: Double, xruns: Int, processMaxMs: Double

        init(_ t: TerminalTiming) {
            func r(_ v: Double) -> Double { thousandths(v) ?? 0 }
            periodMs = r(t.periodMs); bufferPeriods = t.bufferPeriods; playbackFillPeriods = t.fillPeriods
            processingDelayMs = r(t.processingDelayMs); codecLookaheadMs = r(t.codecLookaheadMs)
            jitterMinMs = r(t.jitterMinMs); jitterMaxMs = r(t.jitterMaxMs); xruns = t.xruns; processMaxMs = r(t.processMaxMs)
        }

        var timing: TerminalTiming {
            TerminalTiming(periodMs: periodMs, bufferPeriods: bufferPeriods, fillPeriods: playbackFillPeriods,
                           processingDelayMs: processingDelayMs, codecLookaheadMs: codecLookaheadMs, jitterMinMs: jitterMinMs,
                           jitterMaxMs: jitterMaxMs, xruns: xruns, processMaxMs: processMaxMs)
        }
    }
}
