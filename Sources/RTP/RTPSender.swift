// Per-stream sending state. SSRC, first sequence number and first timestamp are random
// (RFC 3550 5.1, 8.1) so that streams from restarted terminals are not confused with old ones.

/// Why an `RTPSender` could not be created.
public enum RTPSenderError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The payload type is outside the dynamic range 96-127.
    case payloadTypeNotDynamic(UInt8)

    /// A short text for logs.
    public var description: String {
        switch self {
        case .payloadTypeNotDynamic(let pt): "payload type \(pt) is not dynamic (96-127)"
        }
    }
}

/// Sequence number, timestamp and SSRC of one outgoing stream at the 48 kHz Opus clock.
public struct RTPSender: Sendable {
    /// RTP clock rate of Opus (RFC 7587 4.1): always 48 kHz, whatever the codec's internal rate.
    public static let clockRate: UInt32 = 48_000
    /// Dynamic payload types that may be negotiated for Opus.
    public static let dynamicPayloadTypes: ClosedRange<UInt8> = 96...127

    /// Synchronization source identifier of this stream.
    public let ssrc: UInt32
    /// Payload type written into every header.
    public let payloadType: UInt8
    /// Sequence number of the next packet.
    public private(set) var sequence: UInt16
    /// Timestamp of the next packet.
    public private(set) var timestamp: UInt32

    /// Creates a sender with SSRC, sequence and timestamp drawn from the system's random generator.
    public init(payloadType: UInt8 = 96) throws(RTPSenderError) {
        var generator = SystemRandomNumberGenerator()
        try self.init(payloadType: payloadType, using: &generator)
    }

    /// Creates a sender drawing SSRC, sequence and timestamp from `generator` (seeded in tests).
    public init(payloadType: UInt8 = 96, using generator: inout some RandomNumberGenerator) throws(RTPSenderError) {
        guard Self.dynamicPayloadTypes.contains(payloadType) else {
            throw .payloadTypeNotDynamic(payloadType)
        }
        self.payloadType = payloadType
        self.ssrc = UInt32.random(in: .min ... .max, using: &generator)
        self.sequence = UInt16.random(in: .min ... .max, using: &generator)
        self.timestamp = UInt32.random(in: .min ... .max, using: &generator)
    }

    /// Returns the header for the next packet, then advances sequence by 1 and timestamp by `frameSamples` (wrapping).
    /// `marker` should be true for the first packet of a talk spurt; deciding that is the caller's job.
    public mutating func next(frameSamples: UInt32, marker: Bool) -> RTPHeader {
        let header = RTPHeader(
            marker: marker, payloadType: payloadType, sequence: sequence, timestamp: timestamp, ssrc: ssrc)
        sequence &+= 1
        timestamp &+= frameSamples
        return header
    }

    /// A frame that is not sent (DTX silence): time advances, the sequence does not, so the
    /// receiver sees a timestamp gap (silence) rather than a sequence gap (loss).
    public mutating func skip(frameSamples: UInt32) {
        timestamp &+= frameSamples
    }
}
