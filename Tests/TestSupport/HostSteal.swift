import Foundation

/// CPU time the hypervisor took from this VM ("steal" in /proc/stat): on the project's shared
/// machines it reaches 20-45 % at times, and then even a real-time thread misses its deadlines.
/// Tests that assert "no xruns" repeat an attempt only when the host stole a measurable share.
public struct HostSteal {
    private let start: (steal: Double, total: Double)

    /// Starts a measurement.
    public init() { start = Self.sample() }

    /// The share of all CPU time stolen since `init` (0...1).
    public var fraction: Double {
        let now = Self.sample()
        let total = now.total - start.total
        return total > 0 ? (now.steal - start.steal) / total : 0
    }

    /// An attempt with xruns is spoiled by the host when it stole more than this.
    public static let spoilingFraction = 0.03

    private static func sample() -> (steal: Double, total: Double) {
        guard let text = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
              let line = text.split(separator: "\n").first(where: { $0.hasPrefix("cpu ") }) else { return (0, 0) }
        let v = line.split(separator: " ").dropFirst().compactMap { Double($0) }
        // user nice system idle iowait irq softirq steal [guest guest_nice, already in user]
        guard v.count >= 8 else { return (0, 0) }
        return (v[7], v[0..<8].reduce(0, +))
    }
}
