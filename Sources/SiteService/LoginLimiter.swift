/// How many failed logins an address may make: `allowed` within `window` seconds, then none
/// until the oldest of them is `window` old. Deterministic (the caller gives the time), so a
/// seeded test drives it; the server keeps one behind a lock.
public struct LoginLimiter: Sendable {
    public let allowed: Int
    public let window: Double
    private var failures: [String: [Double]] = [:]
    /// Logins refused by the limit, since start.
    public private(set) var refused = 0

    /// The service's limit: 5 failures a minute.
    public static let standard = LoginLimiter(allowed: 5, window: 60)

    public init(allowed: Int, window: Double) {
        self.allowed = allowed
        self.window = window
    }

    /// Whether `address` may try now (counts the refusal when not).
    public mutating func mayTry(_ address: String, now: Double) -> Bool {
        let recent = (failures[address] ?? []).filter { now - $0 < window }
        failures[address] = recent.isEmpty ? nil : recent
        if recent.count >= allowed {
            refused += 1
            return false
        }
        return true
    }

    public mutating func failed(_ address: String, now: Double) {
        failures[address, default: []].append(now)
        // Bounded: an address keeps only what the window needs; addresses without failures go.
        if failures[address]!.count > allowed { failures[address]!.removeFirst(failures[address]!.count - allowed) }
        if failures.count > 10_000 { failures = failures.filter { now - ($0.value.last ?? 0) < window } }
    }

    public mutating func succeeded(_ address: String) { failures[address] = nil }
}
