import Glibc

/// CLOCK_MONOTONIC: the time base of every deadline, timer and measured interval in the project
/// (never the wall clock, which NTP may step).
public enum MonotonicClock {
    @inline(__always)
    public static func nanoseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    public static func seconds() -> Double { Double(nanoseconds()) / 1e9 }
}
