// libFuzzer entry point for the signalling decoder. Compiled together with Sources/Calls/*.swift
// into one module (see build.sh), so there is no `import Calls`. Anything inconsistent traps,
// which libFuzzer reports as a crash; AddressSanitizer catches reads outside the input.

@_cdecl("LLVMFuzzerTestOneInput")
public func signalFuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let buffer = UnsafeRawBufferPointer(start: data, count: data == nil ? 0 : size)
    guard case .success(let envelope) = SignalCodec.decode(buffer) else { return 0 }
    // One encoding per message: what decodes must re-encode byte for byte, and decode again equal.
    let bytes = SignalCodec.encode(envelope)
    precondition(bytes.elementsEqual(buffer), "accepted input is not canonical")
    precondition(SignalCodec.decode(bytes) == .success(envelope))
    precondition(envelope.flags.contains(.authenticated) == (envelope.authenticationTag?.count == SignalCodec.tagLength))
    // Every strict prefix is rejected: a message never ends early.
    precondition(SignalCodec.decode(UnsafeRawBufferPointer(rebasing: buffer.dropLast())).isFailure)
    return 0
}

extension Result {
    var isFailure: Bool {
        if case .failure = self { return true }
        return false
    }
}
