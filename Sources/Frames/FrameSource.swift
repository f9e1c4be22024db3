import RealTime

/// Something the audio thread pulls one frame of 16-bit mono samples from.
/// Must not allocate, lock or block: it runs on the audio thread.
public protocol FrameSource: AnyObject, Sendable {
    /// Fills `count` samples and returns true, or returns false (the caller plays silence).
    func readFrame(into buffer: UnsafeMutablePointer<Int16>, count: Int) -> Bool
}

extension SampleRing: FrameSource {
    @inline(__always)
    public func readFrame(into buffer: UnsafeMutablePointer<Int16>, count: Int) -> Bool {
        read(into: buffer, count: count)
    }
}
