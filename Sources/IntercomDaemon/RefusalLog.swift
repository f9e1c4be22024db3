import Control
import Posix

/// Refused signalling in the log, one line a minute at most, so that a revoked terminal or a
/// stranger that keeps trying cannot flood it: how many since the last line, by reason, and from
/// which addresses. The first refusal is logged at once. No I/O: the calls thread logs what
/// `line` returns; the counts themselves are `SealRefusals`'.
struct RefusalLog {
    static let interval = 60.0
    /// Addresses told apart; more are summed as others (a flood from spoofed addresses).
    static let addressesKept = 8

    private var lastLine: Double?
    private var atLastLine: DaemonStatistics.Refusals
    private var from: [IPv4Endpoint: Int] = [:]
    private var fromOthers = 0

    init(counters: DaemonStatistics.Refusals) { atLastLine = counters }

    /// A datagram from `address` was refused (its reason is in the counters).
    mutating func refused(from address: IPv4Endpoint) {
        if from[address] != nil || from.count < Self.addressesKept {
            from[address, default: 0] += 1
        } else {
            fromOthers += 1
        }
    }

    /// The line to log now, if refusals came since the last one and a minute has passed.
    mutating func line(now: Double, counters: DaemonStatistics.Refusals) -> String? {
        let total = counters.total - atLastLine.total
        guard total > 0 else { return nil }
        if let lastLine, now - lastLine < Self.interval { return nil }
        let reasons = zip(counters.byReason, atLastLine.byReason)
            .map { ($0.reason, $0.count - $1.count) }.filter { $0.1 > 0 }
            .map { "\($0.0) \($0.1)" }.joined(separator: ", ")
        var sources = from.sorted { $0.value != $1.value ? $0.value > $1.value : $0.key.description < $1.key.description }
            .map { "\($0.key) (\($0.value))" }
        if fromOthers > 0 { sources.append("\(fromOthers) from other addresses") }
        let span = lastLine.map { String(format: " in the last %.0f s", now - $0) } ?? ""
        defer {
            lastLine = now
            atLastLine = counters
            from = [:]
            fromOthers = 0
        }
        return "calls: refused \(total) signalling datagram\(total == 1 ? "" : "s")\(span) (\(reasons))"
            + (sources.isEmpty ? "" : " from " + sources.joined(separator: ", ")) + "; next such line in a minute at the earliest"
    }
}
