import Synchronization

/// A statistic written by one thread (often the audio thread) and read by any other.
/// Relaxed ordering: readers want a recent value, not a synchronisation point.
public final class Counter: Sendable {
    private let value = Atomic<Int>(0)
    public init() {}
    @inline(__always) public func increment(by n: Int = 1) { value.wrappingAdd(n, ordering: .relaxed) }
    @inline(__always) public func store(_ v: Int) { value.store(v, ordering: .relaxed) }
    public var load: Int { value.load(ordering: .relaxed) }
}

/// A Double gauge with the same single-writer semantics (bit pattern in an atomic).
public final class Gauge: Sendable {
    private let bits = Atomic<UInt64>(0)
    public init(_ initial: Double = 0) { bits.store(initial.bitPattern, ordering: .relaxed) }
    @inline(__always) public func store(_ v: Double) { bits.store(v.bitPattern, ordering: .relaxed) }
    public var load: Double { Double(bitPattern: bits.load(ordering: .relaxed)) }
}

/// A boolean switch flipped by control threads and polled by the audio thread.
public final class Flag: Sendable {
    private let value: Atomic<Bool>
    public init(_ initial: Bool = false) { value = Atomic(initial) }
    @inline(__always) public func set(_ v: Bool) { value.store(v, ordering: .relaxed) }
    public var isSet: Bool { value.load(ordering: .relaxed) }
}

/// A one-shot integer request from a control thread to the audio thread (taken with exchange).
public final class Request: Sendable {
    private let value = Atomic<Int>(0)
    public init() {}
    public func post(_ v: Int) { value.store(v, ordering: .releasing) }
    @inline(__always) public func take() -> Int { value.exchange(0, ordering: .acquiring) }
}
