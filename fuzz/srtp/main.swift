// libFuzzer entry point for the receiving side of SRTP: libsrtp2 through our wrapper, then the
// RTP parser, as MediaReceiver (NetworkThread.swift) does. Compiled with Sources/Transport/SRTP.swift and
// Sources/RTP/RTP.swift into one module (see build.sh). The first byte picks the case:
//  - even: the rest is a datagram from the network, checked by an inbound session. It can only
//    be refused (a forged tag passing would be a libsrtp bug), and must not crash or read past it.
//  - odd: the rest is an RTP packet of any shape (CSRCs, extensions, padding, garbage) that we
//    protect; when libsrtp takes it, the inbound session must give back exactly the packet, and
//    any one bit flipped (chosen by the second byte) must be refused.
// Protected cases use fresh sessions, so each run is independent of the ones before (replay
// windows); refused datagrams change no state, so forged ones share one session (speed).

private let key: [UInt8] = (0..<SRTPSession.keyLength).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
private let ssrc: UInt32 = 0x0102_0304
private let forgedCheck = try! SRTPSession(key: key, direction: .inbound)

@_cdecl("LLVMFuzzerTestOneInput")
public func srtpFuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data, size >= 2 else { return 0 }
    let mode = data[0]
    let body = UnsafeBufferPointer(start: data + 1, count: size - 1)
    let buffer = UnsafeMutableRawPointer.allocate(byteCount: body.count + SRTPSession.trailerRoom, alignment: 8)
    defer { buffer.deallocate() }
    buffer.copyMemory(from: body.baseAddress!, byteCount: body.count)
    if mode & 1 == 0 {
        let n = forgedCheck.unprotect(buffer, length: body.count)
        precondition(n < 0, "a datagram nobody protected passed authentication")
        return 0
    }
    // Our own packets always carry our SSRC: put it in when the header is long enough.
    if body.count >= 12 { buffer.storeBytes(of: ssrc.bigEndian, toByteOffset: 8, as: UInt32.self) }
    let original = [UInt8](UnsafeRawBufferPointer(start: buffer, count: body.count))
    let outbound = try! SRTPSession(key: key, direction: .outbound(ssrc: ssrc))
    let inbound = try! SRTPSession(key: key, direction: .inbound)
    let sealed = outbound.protect(buffer, length: body.count)
    guard sealed > 0 else { return 0 }
    precondition(sealed == body.count + SRTPSession.tagLength, "protect added \(sealed - body.count) bytes")
    let copy = [UInt8](UnsafeRawBufferPointer(start: buffer, count: sealed))
    let opened = inbound.unprotect(buffer, length: sealed)
    precondition(opened == body.count, "our own packet did not open: \(opened)")
    precondition(original.elementsEqual(UnsafeRawBufferPointer(start: buffer, count: opened)), "opened differently")
    if case .success(let packet) = RTPParser.parse(UnsafeRawBufferPointer(start: buffer, count: opened)) {
        precondition(packet.payloadRange.upperBound <= opened)
    }
    // One bit flipped anywhere: refused by a fresh session (no replay state involved).
    let bit = Int(data[1 % size]) &* 131 % (sealed * 8)
    var flipped = copy
    flipped[bit / 8] ^= UInt8(1 << (bit % 8))
    let again = try! SRTPSession(key: key, direction: .inbound)
    let refused = flipped.withUnsafeMutableBytes { again.unprotect($0.baseAddress!, length: sealed) }
    precondition(refused < 0, "a packet with bit \(bit) flipped was taken")
    return 0
}
