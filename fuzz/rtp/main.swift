// libFuzzer entry point for the RTP parser and the Opus packet reader behind it (the FEC flag the
// jitter buffer reads from each payload). Compiled together with Sources/RTP/RTP.swift and
// OpusPacket.swift into one module (see build.sh), so there is no `import RTP`. Anything inconsistent traps, which
// libFuzzer reports as a crash; AddressSanitizer catches reads outside the input.

@_cdecl("LLVMFuzzerTestOneInput")
public func rtpFuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let buffer = UnsafeRawBufferPointer(start: data, count: data == nil ? 0 : size)
    blackHole(OpusPacket.carriesFEC(buffer) ? 1 : 0)
    if case .success(let packet) = RTPParser.parse(buffer) {
        check(packet, in: buffer)
        // The same type must be accepted, and any other one refused.
        let pt = packet.header.payloadType
        precondition(RTPParser.parse(buffer, expectedPayloadType: pt) == .success(packet))
        precondition(RTPParser.parse(buffer, expectedPayloadType: pt ^ 1) == .failure(.unexpectedPayloadType))
    } else if size > 1, case .success = RTPParser.parse(buffer, expectedPayloadType: buffer[1] & 0x7F) {
        preconditionFailure("accepted with an expected payload type, rejected without")
    }
    return 0
}

private func check(_ packet: RTPPacket, in buffer: UnsafeRawBufferPointer) {
    let extensionBytes = packet.header.hasExtension ? 4 + 4 * Int(packet.extensionLengthWords) : 0
    precondition(packet.payloadOffset == RTPHeader.fixedLength + 4 * packet.csrcCount + extensionBytes)
    precondition(packet.payloadLength >= 1)
    precondition(packet.payloadRange.upperBound + packet.paddingLength == buffer.count)
    precondition(packet.paddingLength == (packet.header.padding ? Int(buffer[buffer.count - 1]) : 0))
    var sum: UInt32 = 0
    for i in 0..<packet.csrcCount { sum &+= packet.csrc(at: i, in: buffer) }
    for byte in packet.payload(in: buffer) { sum &+= UInt32(byte) }
    if OpusPacket.carriesFEC(packet.payload(in: buffer)) { sum &+= 1 }
    // A plain packet written back must come out byte for byte as it went in.
    if !packet.header.padding, !packet.header.hasExtension, packet.csrcCount == 0 {
        withUnsafeTemporaryAllocation(byteCount: buffer.count, alignment: 1) { out in
            let length = try! RTPWriter.write(packet.header, payload: packet.payload(in: buffer), into: out).get()
            precondition(length == buffer.count && out.elementsEqual(buffer))
        }
    }
    blackHole(sum)
}

@inline(never)
private func blackHole(_ value: UInt32) {
    _ = value
}
