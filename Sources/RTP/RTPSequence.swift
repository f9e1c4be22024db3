// Serial-number arithmetic (RFC 1982 style) for the jitter buffer: sequence numbers wrap after
// 65535 and timestamps after 2^32, so "newer" means "ahead by less than half the range".

/// Comparisons of 16-bit RTP sequence numbers across wrap-around.
public enum RTPSequence {
    /// Signed steps from `a` to `b` (positive when `b` is ahead), in -32768...32767.
    @inline(__always)
    public static func distance(from a: UInt16, to b: UInt16) -> Int16 {
        Int16(bitPattern: b &- a)
    }

    /// True when `a` is ahead of `b` by 1...32767; exactly half the range apart counts as not newer either way.
    @inline(__always)
    public static func isNewer(_ a: UInt16, than b: UInt16) -> Bool {
        distance(from: b, to: a) > 0
    }
}

/// Comparisons of 32-bit RTP timestamps across wrap-around.
public enum RTPTimestamp {
    /// Signed clock ticks from `a` to `b` (positive when `b` is later).
    @inline(__always)
    public static func distance(from a: UInt32, to b: UInt32) -> Int32 {
        Int32(bitPattern: b &- a)
    }

    /// True when `a` is later than `b` by less than half the 32-bit range.
    @inline(__always)
    public static func isNewer(_ a: UInt32, than b: UInt32) -> Bool {
        distance(from: b, to: a) > 0
    }
}
