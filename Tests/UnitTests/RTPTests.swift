import Codec
import Foundation
import RTP
import SignalTools
import TestSupport
import XCTest


private func parse(_ bytes: [UInt8], expectedPayloadType: UInt8? = nil) -> Result<RTPPacket, RTPParseError> {
    bytes.withUnsafeBytes { RTPParser.parse($0, expectedPayloadType: expectedPayloadType) }
}

private func assertRejected(
    _ bytes: [UInt8], _ reason: RTPParseError, expectedPayloadType: UInt8? = nil,
    file: StaticString = #filePath, line: UInt = #line
) {
    switch parse(bytes, expectedPayloadType: expectedPayloadType) {
    case .success(let packet): XCTFail("accepted, expected \(reason): \(packet)", file: file, line: line)
    case .failure(let error): XCTAssertEqual(error, reason, file: file, line: line)
    }
}

/// A valid 12-byte header: V=2, no flags, PT 96, seq 1, ts 2, SSRC 3.
private let plainHeader: [UInt8] = [0x80, 96, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3]

final class RTPTests: XCTestCase {
    // MARK: building and round trip

    func testBuildThenParseRoundTrip() throws {
        let header = RTPHeader(marker: true, payloadType: 111, sequence: 0xFFFE, timestamp: 0xFFFF_FF00, ssrc: 0xCAFE_BABE)
        let payload: [UInt8] = [0x78, 1, 2, 3, 4, 5]
        var buffer = [UInt8](repeating: 0xAA, count: 64)
        let written = buffer.withUnsafeMutableBytes { out in
            payload.withUnsafeBytes { RTPWriter.write(header, payload: $0, into: out) }
        }
        let length = try written.get()
        XCTAssertEqual(length, 18)
        let bytes = Array(buffer[..<length])
        XCTAssertEqual(Array(bytes[..<12]), [0x80, 0x80 | 111, 0xFF, 0xFE, 0xFF, 0xFF, 0xFF, 0x00, 0xCA, 0xFE, 0xBA, 0xBE])
        let packet = try parse(bytes, expectedPayloadType: 111).get()
        XCTAssertEqual(packet.header, header)
        XCTAssertEqual(packet.payloadRange, 12..<18)
        XCTAssertEqual(packet.paddingLength, 0)
        XCTAssertEqual(packet.csrcCount, 0)
        XCTAssertEqual(Array(bytes[packet.payloadRange]), payload)
        bytes.withUnsafeBytes { XCTAssertEqual(Array(packet.payload(in: $0)), payload) }
    }

    func testWriteHeaderLeavesRoomForPayloadInPlace() throws {
        var buffer = [UInt8](repeating: 0, count: 20)
        let header = RTPHeader(payloadType: 96, sequence: 7, timestamp: 960, ssrc: 42)
        let headerLength = try buffer.withUnsafeMutableBytes { RTPWriter.writeHeader(header, into: $0) }.get()
        XCTAssertEqual(headerLength, RTPHeader.fixedLength)
        buffer[12] = 0xF8  // an encoder would write here
        XCTAssertEqual(try parse(buffer).get().header, header)
    }

    func testWriterRejectsWhatItCannotWrite() {
        let payload: [UInt8] = [1, 2, 3]
        func write(_ header: RTPHeader, payload: [UInt8], capacity: Int) -> Result<Int, RTPWriteError> {
            var buffer = [UInt8](repeating: 0, count: capacity)
            return buffer.withUnsafeMutableBytes { out in payload.withUnsafeBytes { RTPWriter.write(header, payload: $0, into: out) } }
        }
        let ok = RTPHeader(payloadType: 96, sequence: 0, timestamp: 0, ssrc: 0)
        XCTAssertEqual(write(ok, payload: payload, capacity: 15), .success(15))
        XCTAssertEqual(write(ok, payload: payload, capacity: 14), .failure(.bufferTooSmall))
        XCTAssertEqual(write(ok, payload: [], capacity: 64), .failure(.emptyPayload))
        var bad = ok
        bad.payloadType = 128
        XCTAssertEqual(write(bad, payload: payload, capacity: 64), .failure(.invalidPayloadType))
        for change in [{ (h: inout RTPHeader) in h.padding = true }, { $0.hasExtension = true }, { $0.csrcCount = 1 }] {
            var h = ok
            change(&h)
            XCTAssertEqual(write(h, payload: payload, capacity: 64), .failure(.unsupportedHeader))
        }
    }

    // MARK: sender state

    func testSenderAdvancesSequenceAndTimestampWithWrapAround() throws {
        var generator = SplitMix64(seed: 1)
        var sender = try RTPSender(payloadType: 100, using: &generator)
        let first = sender.next(frameSamples: 960, marker: true)
        XCTAssertTrue(first.marker)
        XCTAssertEqual(first.payloadType, 100)
        XCTAssertEqual(first.ssrc, sender.ssrc)
        var previous = first
        // More than 65536 packets: the sequence number must wrap at least once.
        for _ in 0..<70_000 {
            let header = sender.next(frameSamples: 960, marker: false)
            XCTAssertFalse(header.marker)
            XCTAssertEqual(header.sequence, previous.sequence &+ 1)
            XCTAssertEqual(header.timestamp, previous.timestamp &+ 960)
            XCTAssertEqual(RTPSequence.distance(from: previous.sequence, to: header.sequence), 1)
            XCTAssertEqual(RTPTimestamp.distance(from: previous.timestamp, to: header.timestamp), 960)
            previous = header
        }
        XCTAssertEqual(previous.sequence, first.sequence &+ UInt16(70_000 % 65_536))
        XCTAssertEqual(previous.timestamp, first.timestamp &+ 70_000 &* 960)
    }

    func testSenderIsSeededDeterministicallyAndRandomByDefault() throws {
        var g1 = SplitMix64(seed: 99)
        var g2 = SplitMix64(seed: 99)
        let a = try RTPSender(using: &g1)
        let b = try RTPSender(using: &g2)
        XCTAssertEqual([a.ssrc, UInt32(a.sequence), a.timestamp], [b.ssrc, UInt32(b.sequence), b.timestamp])
        let c = try RTPSender()
        let d = try RTPSender()
        // Equal SSRC, sequence and timestamp from the system generator would be a 1-in-2^80 coincidence.
        XCTAssertNotEqual([c.ssrc, UInt32(c.sequence), c.timestamp], [d.ssrc, UInt32(d.sequence), d.timestamp])
        XCTAssertEqual(c.payloadType, 96)
    }

    func testSenderAcceptsOnlyDynamicPayloadTypes() {
        for pt: UInt8 in [0, 8, 95, 128, 255] {
            XCTAssertThrowsError(try RTPSender(payloadType: pt)) { error in
                XCTAssertEqual(error as? RTPSenderError, .payloadTypeNotDynamic(pt))
            }
        }
        for pt: UInt8 in [96, 111, 127] {
            XCTAssertNoThrow(try RTPSender(payloadType: pt))
        }
    }

    // MARK: parsing CSRCs, extension, padding

    func testCSRCsExtensionAndPaddingGiveTheRightPayloadRange() throws {
        let bytes: [UInt8] = [
            0xB2, 0x60, 0x00, 0x05, 0x00, 0x00, 0x03, 0xC0, 0x11, 0x22, 0x33, 0x44,  // V2 P X CC=2, PT 96
            0x00, 0x00, 0x00, 0x01, 0xFF, 0xFF, 0xFF, 0xFF,                          // two CSRCs
            0x12, 0x34, 0x00, 0x02, 0xA0, 0xA1, 0xA2, 0xA3, 0xB0, 0xB1, 0xB2, 0xB3,  // extension, 2 words
            0x78, 0x01, 0x02,                                                        // payload
            0x00, 0x00, 0x03,                                                        // 3 bytes of padding
        ]
        let packet = try parse(bytes).get()
        XCTAssertTrue(packet.header.padding)
        XCTAssertTrue(packet.header.hasExtension)
        XCTAssertEqual(packet.csrcCount, 2)
        XCTAssertEqual(packet.header.sequence, 5)
        XCTAssertEqual(packet.header.timestamp, 960)
        XCTAssertEqual(packet.header.ssrc, 0x1122_3344)
        bytes.withUnsafeBytes {
            XCTAssertEqual(packet.csrc(at: 0, in: $0), 1)
            XCTAssertEqual(packet.csrc(at: 1, in: $0), 0xFFFF_FFFF)
        }
        XCTAssertEqual(packet.extensionProfile, 0x1234)
        XCTAssertEqual(packet.extensionLengthWords, 2)
        XCTAssertEqual(packet.extensionDataOffset, 24)
        XCTAssertEqual(packet.payloadRange, 32..<35)
        XCTAssertEqual(packet.paddingLength, 3)
    }

    func testEmptyExtensionAndOneBytePayload() throws {
        let packet = try parse([0x90, 96, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0xBE, 0xDE, 0, 0, 0x42]).get()
        XCTAssertEqual(packet.extensionProfile, 0xBEDE)
        XCTAssertEqual(packet.extensionLengthWords, 0)
        XCTAssertEqual(packet.payloadRange, 16..<17)
    }

    // MARK: every rejection reason

    func testEveryReasonHasItsOwnCaseAndText() {
        XCTAssertEqual(RTPParseError.allCases.count, 9)
        XCTAssertEqual(Set(RTPParseError.allCases.map(\.description)).count, RTPParseError.allCases.count)
    }

    func testRejectsTruncatedHeader() {
        assertRejected([], .truncatedHeader)
        assertRejected(Array(plainHeader[..<11]), .truncatedHeader)
        assertRejected([0x40], .truncatedHeader)  // too short comes first, even with a wrong version
    }

    func testRejectsWrongVersion() {
        for first: UInt8 in [0x00, 0x40, 0xC0] {
            assertRejected([first] + plainHeader[1...] + [0x78], .unsupportedVersion)
        }
    }

    func testRejectsCSRCCountPastEnd() {
        // CC = 2 needs 8 bytes after the fixed header; 7 are there.
        assertRejected([0x82] + plainHeader[1...] + [UInt8](repeating: 0, count: 7), .csrcPastEnd)
        assertRejected([0x8F] + plainHeader[1...], .csrcPastEnd)
    }

    func testRejectsExtensionPastEnd() {
        assertRejected([0x90] + plainHeader[1...] + [0xBE, 0xDE, 0x00], .extensionHeaderPastEnd)
        assertRejected([0x91] + plainHeader[1...] + [0, 0, 0, 1], .extensionHeaderPastEnd)  // CSRC fits, preamble not
        // Length 2 words = 8 bytes of extension, 7 present (no payload either).
        assertRejected([0x90] + plainHeader[1...] + [0xBE, 0xDE, 0x00, 0x02] + [UInt8](repeating: 0, count: 7), .extensionPastEnd)
        assertRejected([0x90] + plainHeader[1...] + [0xBE, 0xDE, 0xFF, 0xFF, 1, 2, 3, 4], .extensionPastEnd)
    }

    func testRejectsZeroPadding() {
        assertRejected([0xA0] + plainHeader[1...] + [0x78, 0x01, 0x00], .zeroPadding)
    }

    func testRejectsPaddingLargerThanRest() {
        // 3 bytes after the header, padding claims 4.
        assertRejected([0xA0] + plainHeader[1...] + [0x78, 0x01, 0x04], .paddingTooLarge)
        assertRejected([0xA0] + plainHeader[1...] + [0xFF], .paddingTooLarge)
        // Padding may not eat into the extension either.
        assertRejected([0xB0] + plainHeader[1...] + [0xBE, 0xDE, 0x00, 0x00, 0x78, 0x06], .paddingTooLarge)
    }

    func testRejectsEmptyPayload() {
        assertRejected(plainHeader, .emptyPayload)
        assertRejected([0xA0] + plainHeader[1...], .emptyPayload)  // P bit, nothing after the header
        assertRejected([0xA0] + plainHeader[1...] + [0x00, 0x02], .emptyPayload)  // all padding
        assertRejected([0x81] + plainHeader[1...] + [0, 0, 0, 9], .emptyPayload)
        assertRejected([0x90] + plainHeader[1...] + [0xBE, 0xDE, 0x00, 0x01, 1, 2, 3, 4], .emptyPayload)
    }

    func testRejectsUnexpectedPayloadType() throws {
        let bytes = plainHeader + [0x78]
        assertRejected(bytes, .unexpectedPayloadType, expectedPayloadType: 97)
        XCTAssertEqual(try parse(bytes, expectedPayloadType: 96).get().header.payloadType, 96)
        XCTAssertEqual(try parse(bytes).get().header.payloadType, 96)
    }

    // MARK: packets as other implementations put them on the wire

    /// Written out by hand from RFC 3550 5.1 and RFC 7587: the first packet of a talk spurt
    /// (marker) of an Opus stream with PT 96; payload is one 20 ms hybrid-fullband mono frame (TOC 0x78).
    func testReferenceOpusPacketWithMarker() throws {
        let bytes: [UInt8] = [
            0x80, 0xE0, 0x12, 0x34,  // V=2 P=0 X=0 CC=0 | M=1 PT=96 | seq 0x1234
            0x00, 0x01, 0xE2, 0x40,  // timestamp 123456
            0xDE, 0xAD, 0xBE, 0xEF,  // SSRC
            0x78, 0x0B, 0xE4, 0xC1, 0x36,  // Opus payload
        ]
        let packet = try parse(bytes, expectedPayloadType: 96).get()
        XCTAssertEqual(packet.header, RTPHeader(marker: true, payloadType: 96, sequence: 0x1234, timestamp: 123_456, ssrc: 0xDEAD_BEEF))
        XCTAssertEqual(packet.payloadRange, 12..<17)
        XCTAssertEqual(packet.paddingLength, 0)
    }

    /// Written out by hand: what a WebRTC-style sender emits with PT 111, one CSRC (a mixer),
    /// an RFC 8285 one-byte extension (profile 0xBEDE) carrying an RFC 6464 audio level, and
    /// 4 bytes of padding (e.g. for SRTP block alignment); sequence and timestamp about to wrap.
    func testReferencePacketWithCSRCExtensionAndPadding() throws {
        let bytes: [UInt8] = [
            0xB1, 0x6F, 0xFF, 0xFF,  // V=2 P=1 X=1 CC=1 | M=0 PT=111 | seq 65535
            0xFF, 0xFF, 0xFF, 0xF0,  // timestamp 2^32 - 16
            0x01, 0x02, 0x03, 0x04,  // SSRC
            0x0A, 0x0B, 0x0C, 0x0D,  // CSRC
            0xBE, 0xDE, 0x00, 0x01,  // extension profile 0xBEDE, 1 word
            0x10, 0x80, 0x00, 0x00,  // ID 1 L=0: voice activity, level 0 dBov; 2 bytes of extension padding
            0xF8, 0xFF, 0xFE,        // Opus payload (TOC 0xF8: CELT fullband 20 ms)
            0x00, 0x00, 0x00, 0x04,  // RTP padding, count 4
        ]
        let packet = try parse(bytes, expectedPayloadType: 111).get()
        XCTAssertEqual(packet.header, RTPHeader(
            padding: true, hasExtension: true, csrcCount: 1, marker: false,
            payloadType: 111, sequence: 65535, timestamp: 0xFFFF_FFF0, ssrc: 0x0102_0304))
        bytes.withUnsafeBytes { XCTAssertEqual(packet.csrc(at: 0, in: $0), 0x0A0B_0C0D) }
        XCTAssertEqual(packet.extensionProfile, 0xBEDE)
        XCTAssertEqual(packet.extensionLengthWords, 1)
        XCTAssertEqual(bytes[packet.extensionDataOffset], 0x10)
        XCTAssertEqual(Array(bytes[packet.payloadRange]), [0xF8, 0xFF, 0xFE])
        XCTAssertEqual(packet.paddingLength, 4)
    }

    // MARK: wrap-around arithmetic

    func testSequenceComparisonAcrossWrapAround() {
        XCTAssertTrue(RTPSequence.isNewer(0, than: 65535))
        XCTAssertFalse(RTPSequence.isNewer(65535, than: 0))
        XCTAssertTrue(RTPSequence.isNewer(10, than: 65530))
        XCTAssertFalse(RTPSequence.isNewer(5, than: 5))
        XCTAssertEqual(RTPSequence.distance(from: 65535, to: 0), 1)
        XCTAssertEqual(RTPSequence.distance(from: 0, to: 65535), -1)
        XCTAssertEqual(RTPSequence.distance(from: 65530, to: 10), 16)
        XCTAssertEqual(RTPSequence.distance(from: 0, to: 32767), 32767)
        XCTAssertEqual(RTPSequence.distance(from: 0, to: 32768), -32768)
        // Exactly half the range apart: neither is newer.
        XCTAssertFalse(RTPSequence.isNewer(32768, than: 0))
        XCTAssertFalse(RTPSequence.isNewer(0, than: 32768))
    }

    func testTimestampDistanceAcrossWrapAround() {
        XCTAssertEqual(RTPTimestamp.distance(from: 0xFFFF_FE20, to: 0x0000_01E0), 960)
        XCTAssertEqual(RTPTimestamp.distance(from: 0x0000_01E0, to: 0xFFFF_FE20), -960)
        XCTAssertTrue(RTPTimestamp.isNewer(0x0000_01E0, than: 0xFFFF_FE20))
        XCTAssertFalse(RTPTimestamp.isNewer(0xFFFF_FE20, than: 0x0000_01E0))
        XCTAssertEqual(RTPTimestamp.distance(from: 0, to: 0x7FFF_FFFF), Int32.max)
        XCTAssertEqual(RTPTimestamp.distance(from: 0, to: 0x8000_0000), Int32.min)
    }

    // MARK: randomized robustness

    /// Mutates valid packets 100,000 times (seeded): parsing must never trap, and whatever it
    /// accepts must describe a payload inside the buffer, consistent with the header.
    func testMutatedPacketsNeverEscapeTheBuffer() {
        var rng = SplitMix64(seed: 0x5EED)
        let seeds: [[UInt8]] = [
            plainHeader + [0x78, 1, 2, 3],
            [0xB1, 0x6F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xF0, 1, 2, 3, 4, 10, 11, 12, 13,
             0xBE, 0xDE, 0, 1, 0x10, 0x80, 0, 0, 0xF8, 0xFF, 0xFE, 0, 0, 0, 4],
            [0xB2, 0x60, 0, 5, 0, 0, 3, 0xC0, 0x11, 0x22, 0x33, 0x44, 0, 0, 0, 1, 0xFF, 0xFF, 0xFF, 0xFF,
             0x12, 0x34, 0, 2, 0xA0, 0xA1, 0xA2, 0xA3, 0xB0, 0xB1, 0xB2, 0xB3, 0x78, 1, 2, 0, 0, 3],
        ]
        var accepted = 0
        var rejected = [RTPParseError: Int]()
        for _ in 0..<100_000 {
            var bytes = seeds[Int.random(in: 0..<seeds.count, using: &rng)]
            for _ in 0..<Int.random(in: 1...4, using: &rng) {
                switch Int.random(in: 0..<5, using: &rng) {
                case 0 where !bytes.isEmpty:  // flip one bit
                    let i = Int.random(in: 0..<bytes.count, using: &rng)
                    bytes[i] ^= 1 << UInt8.random(in: 0..<8, using: &rng)
                case 1 where !bytes.isEmpty:  // replace one byte
                    bytes[Int.random(in: 0..<bytes.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
                case 2:  // truncate
                    bytes.removeLast(Int.random(in: 0...bytes.count, using: &rng))
                case 3:  // append garbage
                    for _ in 0..<Int.random(in: 1...8, using: &rng) { bytes.append(UInt8.random(in: 0...255, using: &rng)) }
                default:  // rewrite the flags byte, where most length fields come from
                    if !bytes.isEmpty { bytes[0] = UInt8.random(in: 0...255, using: &rng) }
                }
            }
            switch parse(bytes) {
            case .failure(let error):
                rejected[error, default: 0] += 1
            case .success(let packet):
                accepted += 1
                let minimumOffset = RTPHeader.fixedLength + 4 * packet.csrcCount
                    + (packet.header.hasExtension ? 4 + 4 * Int(packet.extensionLengthWords) : 0)
                if packet.payloadOffset != minimumOffset || packet.payloadLength < 1
                    || packet.payloadRange.upperBound + packet.paddingLength != bytes.count
                    || packet.paddingLength != (packet.header.padding ? Int(bytes[bytes.count - 1]) : 0) {
                    XCTFail("inconsistent packet \(packet) from \(bytes)")
                    return
                }
                bytes.withUnsafeBytes { buffer in
                    for i in 0..<packet.csrcCount { _ = packet.csrc(at: i, in: buffer) }
                    _ = packet.payload(in: buffer).reduce(0, &+)
                }
            }
        }
        XCTAssertGreaterThan(accepted, 1000)
        // The mutations reach every structural rejection (the payload-type check needs an expected type).
        for reason in RTPParseError.allCases where reason != .unexpectedPayloadType {
            XCTAssertGreaterThan(rejected[reason, default: 0], 0, "never rejected for: \(reason)")
        }
    }

    // MARK: real-time safety

    /// The audio thread calls these per packet: building, writing and parsing must not touch the heap.
    func testPerPacketPathsDoNotAllocate() {
        final class Box: @unchecked Sendable { var allocations: UInt64 = .max; var checksum = 0 }
        let box = Box()
        AllocationCounter.arm()
        let thread = Thread {
            AllocationCounter.trackCurrentThread()
            // Set-up may allocate; only the loop is measured.
            var generator = SplitMix64(seed: 7)
            var sender = try! RTPSender(payloadType: 111, using: &generator)
            let packet = UnsafeMutableRawBufferPointer.allocate(byteCount: 1500, alignment: 1)
            let payload = UnsafeMutableRawBufferPointer.allocate(byteCount: 160, alignment: 1)
            defer { packet.deallocate(); payload.deallocate() }
            payload.initializeMemory(as: UInt8.self, repeating: 0x5A)
            let before = AllocationCounter.count
            var checksum = 0
            for i in 0..<1000 {
                let header = sender.next(frameSamples: 960, marker: i == 0)
                guard case .success(let length) = RTPWriter.write(header, payload: UnsafeRawBufferPointer(payload), into: packet),
                      case .success(let parsed) = RTPParser.parse(
                          UnsafeRawBufferPointer(rebasing: packet[..<length]), expectedPayloadType: 111)
                else { return }
                checksum &+= parsed.payloadLength &+ Int(RTPSequence.distance(from: header.sequence, to: parsed.header.sequence))
                if case .failure(.truncatedHeader) = RTPParser.parse(UnsafeRawBufferPointer(rebasing: packet[..<11])) {
                    checksum &+= 1
                }
            }
            box.allocations = AllocationCounter.count - before
            box.checksum = checksum
        }
        thread.start()
        while !thread.isFinished { usleep(1000) }
        AllocationCounter.disarm()
        XCTAssertEqual(box.checksum, 1000 * 161, "every packet must round-trip")
        XCTAssertEqual(box.allocations, 0)
    }
}
