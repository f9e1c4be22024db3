/// One Linux `struct input_event`: a `struct timeval` (two C longs), then type, code, value, in
/// the host's byte order.
public struct InputEvent: Sendable, Equatable {
    public var seconds: Int
    public var microseconds: Int
    public var type: UInt16
    public var code: UInt16
    public var value: Int32

    /// EV_KEY: a key or button changed state.
    public static let keyType: UInt16 = 1
    /// Values of an EV_KEY event.
    public static let release: Int32 = 0
    public static let press: Int32 = 1
    public static let autorepeat: Int32 = 2

    private static let timevalSize = 2 * MemoryLayout<Int>.size
    /// 24 bytes on 64-bit Linux.
    public static let size = timevalSize + 2 * MemoryLayout<UInt16>.size + MemoryLayout<Int32>.size

    public init(seconds: Int = 0, microseconds: Int = 0, type: UInt16, code: UInt16, value: Int32) {
        self.seconds = seconds
        self.microseconds = microseconds
        self.type = type
        self.code = code
        self.value = value
    }

    /// A key event stamped `time` seconds after the epoch.
    public static func key(_ code: UInt16, _ value: Int32, at time: Double = 0) -> InputEvent {
        let whole = time.rounded(.down)
        return InputEvent(seconds: Int(whole), microseconds: Int(((time - whole) * 1e6).rounded()),
                          type: keyType, code: code, value: value)
    }

    /// The event's time stamp in microseconds.
    /// Wrapping arithmetic: a record with absurd fields (a simulator, a broken driver) must not
    /// trap the key reader; such a stamp only makes one debounce decision wrong.
    public var timeMicroseconds: Int64 { Int64(truncatingIfNeeded: seconds) &* 1_000_000 &+ Int64(truncatingIfNeeded: microseconds) }

    public init(decoding raw: UnsafeRawBufferPointer) {
        precondition(raw.count >= Self.size)
        let t = Self.timevalSize
        seconds = raw.loadUnaligned(fromByteOffset: 0, as: Int.self)
        microseconds = raw.loadUnaligned(fromByteOffset: MemoryLayout<Int>.size, as: Int.self)
        type = raw.loadUnaligned(fromByteOffset: t, as: UInt16.self)
        code = raw.loadUnaligned(fromByteOffset: t + 2, as: UInt16.self)
        value = raw.loadUnaligned(fromByteOffset: t + 4, as: Int32.self)
    }

    /// The record's bytes as the kernel writes them (for tests and simulators).
    public func encoded() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(Self.size)
        withUnsafeBytes(of: seconds) { out.append(contentsOf: $0) }
        withUnsafeBytes(of: microseconds) { out.append(contentsOf: $0) }
        withUnsafeBytes(of: type) { out.append(contentsOf: $0) }
        withUnsafeBytes(of: code) { out.append(contentsOf: $0) }
        withUnsafeBytes(of: value) { out.append(contentsOf: $0) }
        return out
    }
}

/// Reassembles records from reads of any length: a FIFO may split a record across reads.
struct InputEventDecoder {
    private var pending: [UInt8] = []

    var pendingByteCount: Int { pending.count }

    /// Drops a partial record, e.g. when the device was lost mid-record.
    mutating func reset() { pending.removeAll(keepingCapacity: true) }

    mutating func feed(_ bytes: UnsafeRawBufferPointer, _ emit: (InputEvent) -> Void) {
        var rest = bytes
        if !pending.isEmpty {
            let need = InputEvent.size - pending.count
            let take = min(need, rest.count)
            pending.append(contentsOf: rest[rest.startIndex..<rest.startIndex + take])
            rest = UnsafeRawBufferPointer(rebasing: rest[(rest.startIndex + take)...])
            guard pending.count == InputEvent.size else { return }
            pending.withUnsafeBytes { emit(InputEvent(decoding: $0)) }
            pending.removeAll(keepingCapacity: true)
        }
        while rest.count >= InputEvent.size {
            emit(InputEvent(decoding: UnsafeRawBufferPointer(rebasing: rest[rest.startIndex..<rest.startIndex + InputEvent.size])))
            rest = UnsafeRawBufferPointer(rebasing: rest[(rest.startIndex + InputEvent.size)...])
        }
        pending.append(contentsOf: rest)
    }
}
