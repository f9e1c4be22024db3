import CAllocCounter
import Foundation

/// Counts heap allocations made on threads that called `trackCurrentThread()` while armed.
public enum AllocationCounter {
    public static func trackCurrentThread() { alloc_counter_track_current_thread() }
    public static func arm() { alloc_counter_reset(); alloc_counter_arm(1) }
    public static func disarm() { alloc_counter_arm(0) }
    public static var count: UInt64 { alloc_counter_count() }
    public static var bytes: UInt64 { alloc_counter_bytes() }

    /// Where the first counted allocations came from: "library: symbol" per distinct caller.
    public static var callers: [String] {
        var raw = [UnsafeMutableRawPointer?](repeating: nil, count: 64)
        let n = Int(alloc_counter_callers(&raw, 64))
        var seen: [String: Int] = [:]
        for p in raw.prefix(n) {
            guard let p else { continue }
            var text = [CChar](repeating: 0, count: 256)
            alloc_counter_describe(p, &text, 256)
            seen[String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self), default: 0] += 1
        }
        return seen.sorted { $0.value > $1.value }.map { "\($0.value)x \($0.key)" }
    }
}
