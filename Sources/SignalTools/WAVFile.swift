import Foundation

/// A failed WAV read or write, naming the file and what was wrong with it.
public struct WAVError: Error, CustomStringConvertible, Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        /// The operating system refused (open, read, write, rename...).
        case io
        /// Not a RIFF/WAVE file at all.
        case notWAV
        /// A RIFF/WAVE file with missing or inconsistent chunks.
        case malformed
        /// A valid WAV file in an encoding this reader does not convert.
        case unsupportedFormat
        /// Beyond the 4 GiB limit of a RIFF size field.
        case tooLarge
        /// A stream writer used after `close()`.
        case closed
    }

    public let path: String
    public let kind: Kind
    public let problem: String

    public init(path: String, kind: Kind, problem: String) {
        self.path = path
        self.kind = kind
        self.problem = problem
    }

    public var description: String { "WAV file \(path): \(problem)" }
}

/// 16-bit PCM audio in memory, samples interleaved by channel.
public struct WAVAudio: Sendable, Equatable {
    public var sampleRate: Int
    public var channels: Int
    /// Interleaved: frame f, channel c is `samples[f * channels + c]`.
    public var samples: [Int16]

    public init(sampleRate: Int, channels: Int, samples: [Int16]) {
        self.sampleRate = sampleRate
        self.channels = channels
        self.samples = samples
    }

    /// Mono audio from Float samples (full scale 1.0), rounded and clamped to 16 bits.
    public init(sampleRate: Int, mono: [Float]) {
        self.init(sampleRate: sampleRate, channels: 1, samples: Signals.toInt16(mono))
    }

    public var frameCount: Int { channels > 0 ? samples.count / channels : 0 }
    public var duration: Double { sampleRate > 0 ? Double(frameCount) / Double(sampleRate) : 0 }

    /// One channel holding the rounded average of all channels.
    public func mono() -> WAVAudio {
        guard channels > 1 else { return self }
        let c = channels
        let frames = frameCount
        var out = [Int16](repeating: 0, count: frames)
        samples.withUnsafeBufferPointer { p in
            for f in 0..<frames {
                var sum = 0
                for ch in 0..<c { sum += Int(p[f * c + ch]) }
                // Round half away from zero; the average of Int16 values always fits Int16.
                out[f] = Int16((sum + (sum >= 0 ? c / 2 : -(c / 2))) / c)
            }
        }
        return WAVAudio(sampleRate: sampleRate, channels: 1, samples: out)
    }

    /// The samples (still interleaved) as Float in -1...1 (see `Signals.toFloat`).
    public func floats() -> [Float] {
        Signals.toFloat(samples)
    }

    // MARK: Reading

    /// Reads a RIFF/WAVE file: PCM 8/16/24/32-bit integer or 32/64-bit float (also in
    /// WAVE_FORMAT_EXTENSIBLE), converted to 16 bits. Unknown chunks (LIST, fact, ...)
    /// are skipped, honouring the pad byte after odd-sized chunks. A data chunk longer
    /// than the file (a recording cut short) is read up to the last whole frame.
    public static func read(path: String) throws -> WAVAudio {
        let bytes = try PosixFile.readAll(path: path)
        return try bytes.withUnsafeBytes { raw in try parse(raw, path: path) }
    }

    private static func parse(_ raw: UnsafeRawBufferPointer, path: String) throws -> WAVAudio {
        func fail(_ kind: WAVError.Kind, _ problem: String) -> WAVError {
            WAVError(path: path, kind: kind, problem: problem)
        }
        func u16(_ o: Int) -> Int { Int(UInt16(littleEndian: raw.loadUnaligned(fromByteOffset: o, as: UInt16.self))) }
        func u32(_ o: Int) -> Int { Int(UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: o, as: UInt32.self))) }
        func tag(_ o: Int) -> String { String(decoding: raw[o..<o + 4], as: UTF8.self) }

        guard raw.count >= 12, tag(0) == "RIFF", tag(8) == "WAVE" else {
            throw fail(.notWAV, "not a RIFF/WAVE file")
        }

        var format: (tag: Int, channels: Int, rate: Int, blockAlign: Int, bits: Int)?
        var data: Range<Int>?
        var offset = 12
        while offset + 8 <= raw.count, format == nil || data == nil {
            let id = tag(offset)
            let size = u32(offset + 4)
            let body = offset + 8
            switch id {
            case "fmt ":
                guard size >= 16, body + 16 <= raw.count else {
                    throw fail(.malformed, "fmt chunk is \(size) bytes, needs at least 16")
                }
                var formatTag = u16(body)
                if formatTag == 0xFFFE { // WAVE_FORMAT_EXTENSIBLE: the real tag starts the subformat GUID
                    guard size >= 40, body + 26 <= raw.count else {
                        throw fail(.malformed, "extensible fmt chunk is \(size) bytes, needs 40")
                    }
                    formatTag = u16(body + 24)
                }
                format = (formatTag, u16(body + 2), u32(body + 4), u16(body + 12), u16(body + 14))
            case "data":
                data = body..<min(body + size, raw.count)
            default:
                break
            }
            offset = body + size + (size & 1) // chunks are padded to even length
        }

        guard let fmt = format else { throw fail(.malformed, "no fmt chunk") }
        guard let dataRange = data else { throw fail(.malformed, "no data chunk") }
        guard fmt.channels >= 1, fmt.rate >= 1 else {
            throw fail(.malformed, "\(fmt.channels) channels at \(fmt.rate) Hz")
        }
        let bytesPerSample = fmt.bits / 8
        guard fmt.bits % 8 == 0, bytesPerSample >= 1, fmt.blockAlign == bytesPerSample * fmt.channels else {
            throw fail(.malformed, "block align \(fmt.blockAlign) does not match \(fmt.channels) channels of \(fmt.bits) bits")
        }
        guard let decode = decoder(formatTag: fmt.tag, bits: fmt.bits) else {
            throw fail(.unsupportedFormat, "format tag \(fmt.tag) with \(fmt.bits) bits (supported: PCM 8/16/24/32, float 32/64)")
        }

        let count = dataRange.count / fmt.blockAlign * fmt.channels // whole frames only
        let base = dataRange.lowerBound
        let samples = [Int16](unsafeUninitializedCapacity: count) { out, initialized in
            var i = 0
            while i < count {
                out[i] = decode(raw, base + i * bytesPerSample)
                i += 1
            }
            initialized = count
        }
        return WAVAudio(sampleRate: fmt.rate, channels: fmt.channels, samples: samples)
    }

    private typealias Decoder = (UnsafeRawBufferPointer, Int) -> Int16

    // One closure per encoding, chosen once, so the per-sample loop has no format switch.
    private static func decoder(formatTag: Int, bits: Int) -> Decoder? {
        switch (formatTag, bits) {
        case (1, 8): // unsigned, offset by 128
            return { raw, o in Int16(Int(raw[o]) - 128) << 8 }
        case (1, 16):
            return { raw, o in Int16(littleEndian: raw.loadUnaligned(fromByteOffset: o, as: Int16.self)) }
        case (1, 24):
            return { raw, o in
                // Place the 3 bytes in the top of an Int32, then shift down arithmetically.
                let u = UInt32(raw[o]) << 8 | UInt32(raw[o + 1]) << 16 | UInt32(raw[o + 2]) << 24
                let v = Int32(bitPattern: u) >> 8
                return Int16(clamping: (v + 128) >> 8) // round to nearest 16-bit step
            }
        case (1, 32):
            return { raw, o in
                let v = Int64(Int32(littleEndian: raw.loadUnaligned(fromByteOffset: o, as: Int32.self)))
                return Int16(clamping: (v + 32768) >> 16)
            }
        case (3, 32):
            return { raw, o in
                let bits = UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: o, as: UInt32.self))
                return Signals.int16(fromUnit: Double(Float(bitPattern: bits)))
            }
        case (3, 64):
            return { raw, o in
                let bits = UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: o, as: UInt64.self))
                return Signals.int16(fromUnit: Double(bitPattern: bits))
            }
        default:
            return nil
        }
    }

    // MARK: Writing

    /// The whole file in memory (16-bit PCM), e.g. for an HTTP reply.
    public func fileBytes() throws -> [UInt8] {
        if let problem = WAVHeader.problem(sampleRate: sampleRate, channels: channels) {
            throw WAVError(path: "(memory)", kind: .malformed, problem: problem)
        }
        guard samples.count * 2 <= WAVHeader.maxDataBytes else {
            throw WAVError(path: "(memory)", kind: .tooLarge, problem: "\(samples.count * 2) bytes of audio exceed the 4 GiB WAV limit")
        }
        var bytes = WAVHeader.pcm16(sampleRate: sampleRate, channels: channels, dataBytes: UInt32(samples.count * 2))
        bytes.reserveCapacity(bytes.count + samples.count * 2)
        for s in samples { withUnsafeBytes(of: s.littleEndian) { bytes.append(contentsOf: $0) } }
        return bytes
    }

    /// Writes 16-bit PCM atomically: a temporary file in the same directory is written,
    /// synced and renamed over `path`, so readers never see a half-written file.
    public func write(path: String) throws {
        if let problem = WAVHeader.problem(sampleRate: sampleRate, channels: channels) {
            throw WAVError(path: path, kind: .malformed, problem: problem)
        }
        guard samples.count % channels == 0 else {
            throw WAVError(path: path, kind: .malformed,
                           problem: "\(samples.count) samples is not a whole number of \(channels)-channel frames")
        }
        let dataBytes = samples.count * 2
        guard dataBytes <= WAVHeader.maxDataBytes else {
            throw WAVError(path: path, kind: .tooLarge, problem: "\(dataBytes) bytes of audio exceed the 4 GiB WAV limit")
        }
        let header = WAVHeader.pcm16(sampleRate: sampleRate, channels: channels, dataBytes: UInt32(dataBytes))
        try PosixFile.atomicWrite(path: path) { fd in
            try PosixFile.writeAll(fd: fd, header, path: path)
            try PosixFile.writeSamples(fd: fd, samples, path: path)
        }
    }
}

/// The canonical 44-byte header for 16-bit PCM; shared by the one-shot and streaming writers.
enum WAVHeader {
    static let size = 44
    static let riffSizeOffset = 4
    static let dataSizeOffset = 40
    /// The RIFF size field (36 + data) must fit 32 bits.
    static let maxDataBytes = Int(UInt32.max) - 36

    /// Why these parameters cannot be written as 16-bit PCM, or nil if they can.
    static func problem(sampleRate: Int, channels: Int) -> String? {
        // Block align (channels * 2) is 16 bits and byte rate 32 bits in the header.
        guard channels >= 1, channels * 2 <= Int(UInt16.max), sampleRate >= 1,
              sampleRate * channels * 2 <= Int(UInt32.max) else {
            return "cannot write \(channels) channels at \(sampleRate) Hz"
        }
        return nil
    }

    static func pcm16(sampleRate: Int, channels: Int, dataBytes: UInt32) -> [UInt8] {
        var h: [UInt8] = []
        h.reserveCapacity(size)
        func ascii(_ s: String) { h.append(contentsOf: Array(s.utf8)) }
        func le32(_ v: UInt32) { withUnsafeBytes(of: v.littleEndian) { h.append(contentsOf: $0) } }
        func le16(_ v: UInt16) { withUnsafeBytes(of: v.littleEndian) { h.append(contentsOf: $0) } }
        // Saturate so a provisional 0xFFFFFFFF data size (streaming) stays representable.
        let riffSize = dataBytes > UInt32.max - 36 ? UInt32.max : dataBytes + 36
        ascii("RIFF"); le32(riffSize); ascii("WAVE")
        ascii("fmt "); le32(16)
        le16(1) // PCM
        le16(UInt16(channels))
        le32(UInt32(sampleRate))
        le32(UInt32(sampleRate * channels * 2)) // byte rate
        le16(UInt16(channels * 2)) // block align
        le16(16) // bits per sample
        ascii("data"); le32(dataBytes)
        return h
    }
}
