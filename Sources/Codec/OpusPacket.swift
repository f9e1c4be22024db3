/// What an Opus packet's bytes say about itself, read without decoding (RFC 6716, 3.1-3.2, 4.2.3).
///
/// `opus_decode` asked for forward error correction from a packet that carries none conceals
/// instead and still reports success, so the jitter buffer must ask first, or it would count
/// every concealed loss as recovered. libopus 1.5 has `opus_packet_has_lbrr` for this; Debian 12
/// ships 1.3.1, so the two flags are read here. Allocation-free; any thread.
public enum OpusPacket {
    /// True if the packet's first frame carries LBRR data (a low-bitrate copy of the frame before
    /// it) for the mono or either stereo channel. False for CELT-only packets, which have no
    /// SILK layer, and for anything too short or malformed to tell.
    public static func carriesFEC(_ packet: UnsafeRawBufferPointer) -> Bool {
        guard let (toc, first) = firstFrame(packet), first < packet.count else { return false }
        let config = Int(toc >> 3)
        if config >= 16 { return false }  // CELT only
        // SILK frames (of 20 ms at most) in this Opus frame: one VAD flag each, then the LBRR flag.
        // (No array literal here: it would allocate, and this runs on the audio thread.)
        let sizeCode = config >= 12 ? 0 : config & 3  // SILK only: 10, 20, 40, 60 ms; hybrid: 10, 20
        let silkFrames = sizeCode < 2 ? 1 : sizeCode   // 40 ms: 2; 60 ms: 3
        // The range coder's first symbols are equiprobable bits: the first byte's top bits.
        let header = packet[first]
        if (header >> (7 - silkFrames)) & 1 == 1 { return true }
        let stereo = toc & 0x04 != 0
        return stereo && (header >> (6 - 2 * silkFrames)) & 1 == 1
    }

    /// The TOC byte and the offset of the first frame's data (code 0-3 framing).
    private static func firstFrame(_ p: UnsafeRawBufferPointer) -> (toc: UInt8, offset: Int)? {
        guard p.count >= 2 else { return nil }
        let toc = p[0]
        switch toc & 0x03 {
        case 0, 1:  // one frame, or two of equal size
            return (toc, 1)
        case 2:  // two frames, the first one's length coded first
            guard let (_, next) = frameLength(p, at: 1) else { return nil }
            return (toc, next)
        default:  // a count byte, optional padding length, then (if VBR) all lengths but the last
            let countByte = p[1]
            let count = Int(countByte & 0x3F)
            guard count > 0 else { return nil }
            var at = 2
            if countByte & 0x40 != 0 {
                while true {
                    guard at < p.count else { return nil }
                    let b = p[at]
                    at += 1
                    if b != 255 { break }
                }
            }
            if countByte & 0x80 != 0 {
                for _ in 0..<(count - 1) {
                    guard let (_, next) = frameLength(p, at: at) else { return nil }
                    at = next
                }
            }
            return (toc, at)
        }
    }

    /// A frame length of one byte (below 252) or two; returns it and the offset after it.
    private static func frameLength(_ p: UnsafeRawBufferPointer, at i: Int) -> (Int, Int)? {
        guard i < p.count else { return nil }
        let b0 = Int(p[i])
        if b0 < 252 { return (b0, i + 1) }
        guard i + 1 < p.count else { return nil }
        return (b0 + 4 * Int(p[i + 1]), i + 2)
    }
}
