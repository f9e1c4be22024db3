import CAllocCounter

/// Counts heap allocations made on threads that called `trackCurrentThread()` while armed.
public enum AllocationCounter {
    public static func trackCurrentThread() { alloc_counter_track_current_thread() }
    public static func arm() { alloc_counter_reset(); alloc_counter_arm(1) }
    public static func disarm() { alloc_counter_arm(0) }
    public static var count: UInt64 { alloc_counter_count() }
    public static var bytes: UInt64 { alloc_counter_bytes() }
}
