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

extension ControlJSON {
    static func encode(_ s: NetworkLoopbackStatus) -> JSONValue {
        var o: [String: JSONValue] = ["state": .string(s.state.rawValue), "room": s.room.map { .string($0.value) } ?? .null]
        if let r = s.result {
            func number(_ v: Double?) -> JSONValue { v.map { .number(($0 * 1000).rounded() / 1000) } ?? .null }
            o["sent"] = .integer(Int64(r.sent))
            o["received"] = .integer(Int64(r.received))
            o["duplicates"] = .integer(Int64(r.duplicates))
            o["loss_percent"] = number(r.lossPercent)
            o["rtt_min_ms"] = number(r.minMs)
            o["rtt_median_ms"] = number(r.medianMs)
            o["rtt_p95_ms"] = number(r.p95Ms)
            o["rtt_max_ms"] = number(r.maxMs)
            o["jitter_ms"] = number(r.jitterMs)
            o["bin_width_ms"] = number(r.binWidthMs)
            o["histogram"] = .array(r.histogram.map { .array([number($0.fromMs), .integer(Int64($0.count))]) })
            o["problems"] = .array(r.problems.map { .string($0) })
            o["recommendations"] = .array(r.recommendations.map { .string($0) })
        }
        if let t = s.terminal {
            func number(_ v: Double) -> JSONValue { .number((v * 1000).rounded() / 1000) }
            o["terminal"] = [
                "period_ms": number(t.periodMs), "buffer_periods": .integer(Int64(t.bufferPeriods)),
                "playback_fill_periods": .integer(Int64(t.fillPeriods)),
                "processing_delay_ms": number(t.processingDelayMs), "codec_lookahead_ms": number(t.codecLookaheadMs),
                "jitter_min_ms": number(t.jitterMinMs), "jitter_max_ms": number(t.jitterMaxMs),
                "xruns": .integer(Int64(t.xruns)), "process_max_ms": number(t.processMaxMs),
            ]
        }
        return .object(o)
    }

    static func decodeTerminalTiming(_ json: JSONValue) throws(Violation) -> TerminalTiming {
        func number(_ key: String) throws(Violation) -> Double { try field(json, key, \.numberValue, "a number") }
        func int(_ key: String) throws(Violation) -> Int { try field(json, key, { $0.integerValue.flatMap { Int(exactly: $0) } }, "an integer") }
        return TerminalTiming(periodMs: try number("period_ms"), bufferPeriods: try int("buffer_periods"),
                              fillPeriods: try int("playback_fill_periods"),
                              processingDelayMs: try number("processing_delay_ms"), codecLookaheadMs: try number("codec_lookahead_ms"),
                              jitterMinMs: try number("jitter_min_ms"), jitterMaxMs: try number("jitter_max_ms"),
                              xruns: try int("xruns"), processMaxMs: try number("process_max_ms"))
    }

    static func decodeNetworkLoopback(_ json: JSONValue) throws(Violation) -> NetworkLoopbackStatus {
        let state = try field(json, "state", { $0.stringValue.flatMap(LoopbackStatus.State.init(rawValue:)) }, "idle, running, done or aborted")
        let room = json["room"]?.stringValue.flatMap(RoomID.init)
        guard json["sent"] != nil else { return NetworkLoopbackStatus(state: state, room: room) }
        func optional(_ key: String) throws(Violation) -> Double? {
            if json[key] == nil || json[key] == .null { return nil }
            return try field(json, key, \.numberValue, "a number or null")
        }
        func int(_ key: String) throws(Violation) -> Int {
            try field(json, key, { $0.integerValue.flatMap { Int(exactly: $0) } }, "an integer")
        }
        func strings(_ key: String) throws(Violation) -> [String] {
            var out: [String] = []
            for s in try field(json, key, \.arrayValue, "an array of strings") {
                guard let text = s.stringValue else { throw Violation("\"\(key)\" must be an array of strings") }
                out.append(text)
            }
            return out
        }
        var bins: [RoundTripSummary.Bin] = []
        for b in try field(json, "histogram", \.arrayValue, "an array") {
            guard let pair = b.arrayValue, pair.count == 2, let from = pair[0].numberValue,
                  let count = pair[1].integerValue.flatMap({ Int(exactly: $0) }) else {
                throw Violation("\"histogram\" must hold [from_ms, count] pairs")
            }
            bins.append(.init(fromMs: from, count: count))
        }
        let r = RoundTripSummary(
            sent: try int("sent"), received: try int("received"), duplicates: try int("duplicates"),
            lossPercent: try field(json, "loss_percent", \.numberValue, "a number"),
            minMs: try optional("rtt_min_ms"), medianMs: try optional("rtt_median_ms"), p95Ms: try optional("rtt_p95_ms"),
            maxMs: try optional("rtt_max_ms"), jitterMs: try optional("jitter_ms"),
            binWidthMs: try field(json, "bin_width_ms", \.numberValue, "a number"), histogram: bins,
            problems: try strings("problems"), recommendations: try strings("recommendations"))
        let terminal: TerminalTiming?
        if let t = json["terminal"], t != .null { terminal = try decodeTerminalTiming(t) } else { terminal = nil }
        return NetworkLoopbackStatus(state: state, room: room, result: r, terminal: terminal)
    }

    static func encode(_ s: LoopbackStatus) -> JSONValue {
        var o: [String: JSONValue] = ["state": .string(s.state.rawValue)]
        if let r = s.result {
            func number(_ v: Double?) -> JSONValue { v.map { .number(($0 * 1000).rounded() / 1000) } ?? .null }
            o["round_trip_ms"] = number(r.roundTripMs)
            o["playback_buffer_ms"] = number(r.playbackBufferMs)
            o["path_ms"] = number(r.pathMs)
            o["capture_period_ms"] = number(r.capturePeriodMs)
            o["correlation"] = number(r.correlation)
            o["echo_level_db"] = number(r.echoLevelDb)
            o["snr_db"] = number(r.snrDb)
            o["clipped_samples"] = .integer(Int64(r.clippedSamples))
            o["curve"] = .array(r.curve.map { .array([number($0.ms), number($0.value)]) })
            o["problems"] = .array(r.problems.map { .string($0) })
            o["warnings"] = .array(r.warnings.map { .string($0) })
        }
        return .object(o)
    }

    static func decodeLoopback(_ json: JSONValue) throws(Violation) -> LoopbackStatus {
        let state = try field(json, "state", { $0.stringValue.flatMap(LoopbackStatus.State.init(rawValue:)) }, "idle, running, done or aborted")
        guard json["round_trip_ms"] != nil else { return LoopbackStatus(state: state) }
        func optional(_ key: String) throws(Violation) -> Double? {
            if json[key] == nil || json[key] == .null { return nil }
            return try field(json, key, \.numberValue, "a number or null")
        }
        var curve: [LoopbackAnalysis.CurvePoint] = []
        for p in try field(json, "curve", \.arrayValue, "an array") {
            guard let pair = p.arrayValue, pair.count == 2, let ms = pair[0].numberValue, let v = pair[1].numberValue else {
                throw Violation("\"curve\" must hold [ms, value] pairs")
            }
            curve.append(.init(ms: ms, value: v))
        }
        func strings(_ key: String) throws(Violation) -> [String] {
            var out: [String] = []
            for s in try field(json, key, \.arrayValue, "an array of strings") {
                guard let text = s.stringValue else { throw Violation("\"\(key)\" must be an array of strings") }
                out.append(text)
            }
            return out
        }
        let result = LoopbackAnalysis.Result(
            roundTripMs: try optional("round_trip_ms"), playbackBufferMs: try optional("playback_buffer_ms"),
            pathMs: try optional("path_ms"), capturePeriodMs: try field(json, "capture_period_ms", \.numberValue, "a number"),
            correlation: try field(json, "correlation", \.numberValue, "a number"),
            echoLevelDb: try field(json, "echo_level_db", \.numberValue, "a number"), snrDb: try optional("snr_db"),
            clippedSamples: try field(json, "clipped_samples", { $0.integerValue.flatMap { Int(exactly: $0) } }, "an integer"),
            curve: curve, problems: try strings("problems"), warnings: try strings("warnings"))
        return LoopbackStatus(state: state, result: result)
    }
}
