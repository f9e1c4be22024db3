import Calls
import Foundation
import Posix
import SiteSecurity
import TestSupport
import Transport
import XCTest

@testable import IntercomDaemon

/// SRTP through the real libsrtp2: the wrapper, the keys calls derive, and protected routes on
/// the real network loop with real sockets.
final class SRTPTests: XCTestCase {
    private let keyA = (0..<30).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 1) }
    private let keyB = (0..<30).map { UInt8(truncatingIfNeeded: $0 &* 11 &+ 5) }

    /// An RTP packet (version 2, payload type 96) with `payload`.
    private func rtp(sequence: UInt16, ssrc: UInt32 = 0x1234_5678, payload: [UInt8] = Array(repeating: 0x5A, count: 40)) -> [UInt8] {
        let ts = UInt32(sequence) &* 480
        return [0x80, 96, UInt8(sequence >> 8), UInt8(sequence & 0xFF),
                UInt8(ts >> 24), UInt8(ts >> 16 & 0xFF), UInt8(ts >> 8 & 0xFF), UInt8(ts & 0xFF),
                UInt8(ssrc >> 24), UInt8(ssrc >> 16 & 0xFF), UInt8(ssrc >> 8 & 0xFF), UInt8(ssrc & 0xFF)] + payload
    }

    /// `packet` protected by `session` (room for libsrtp's trailer included).
    private func protect(_ packet: [UInt8], _ session: SRTPSession) -> [UInt8] {
        var buffer = packet + [UInt8](repeating: 0, count: SRTPSession.trailerRoom)
        let n = buffer.withUnsafeMutableBytes { session.protect($0.baseAddress!, length: packet.count) }
        XCTAssertGreaterThan(n, 0, SRTPError.message(Int32(-n)))
        return Array(buffer.prefix(max(0, n)))
    }

    /// The unprotected packet, or the negated libsrtp status.
    private func unprotect(_ packet: [UInt8], _ session: SRTPSession) -> Result<[UInt8], SRTPError> {
        var buffer = packet
        let n = buffer.withUnsafeMutableBytes { session.unprotect($0.baseAddress!, length: packet.count) }
        return n > 0 ? .success(Array(buffer.prefix(n))) : .failure(SRTPError(status: Int32(-n), context: "unprotect"))
    }

    func testAProtectedPacketOpensOnceWithItsKeyAndNeverWithAnotherOrAltered() throws {
        let out = try SRTPSession(key: keyA, direction: .outbound(ssrc: 0x1234_5678))
        let inA = try SRTPSession(key: keyA, direction: .inbound)
        let inB = try SRTPSession(key: keyB, direction: .inbound)
        let plain = rtp(sequence: 7)
        let sealed = protect(plain, out)
        XCTAssertEqual(sealed.count, plain.count + SRTPSession.tagLength)
        XCTAssertEqual(Array(sealed.prefix(12)), Array(plain.prefix(12)), "the RTP header stays readable")
        XCTAssertNotEqual(Array(sealed[12..<plain.count]), Array(plain[12...]), "the payload is encrypted")

        var altered = sealed
        altered[20] ^= 0x01
        XCTAssertEqual(try? unprotect(altered, inA).get(), nil)
        if case .failure(let e) = unprotect(altered, inA) { XCTAssertEqual(e.status, SRTPError.authenticationFailed) }
        if case .failure(let e) = unprotect(sealed, inB) { XCTAssertEqual(e.status, SRTPError.authenticationFailed) } else { XCTFail("opened under another key") }
        XCTAssertEqual(try unprotect(sealed, inA).get(), plain)
        if case .failure(let e) = unprotect(sealed, inA) { XCTAssertEqual(e.status, SRTPError.replayed) } else { XCTFail("a replay was taken") }
        if case .success = unprotect(Array(sealed.prefix(5)), inA) { XCTFail("5 bytes taken as SRTP") }
        if case .success = unprotect(plain, inA) { XCTFail("plain RTP taken as SRTP") }
    }

    func testAKeyOfTheWrongLengthIsAnErrorThatSaysSo() {
        XCTAssertThrowsError(try SRTPSession(key: Array(keyA.prefix(16)), direction: .inbound)) { error in
            XCTAssertEqual("\(error)", "a key of 16 bytes, not 30: unsupported parameter")
        }
    }

    /// Debian builds libsrtp2 on NSS, which makes a crypto context (and a lock) for every packet:
    /// allocations on the network thread that are the library's, not ours. This pins how many,
    /// for protect and unprotect each, and that the count per packet does not grow.
    func testLibsrtpAllocatesAFixedNumberPerPacketAndNothingOfOurs() throws {
        final class Box: @unchecked Sendable { var counts: [UInt64] = []; var callers: [[String]] = [] }
        let box = Box()
        let out = try SRTPSession(key: keyA, direction: .outbound(ssrc: 0x1234_5678))
        let inA = try SRTPSession(key: keyA, direction: .inbound)
        let t = Thread {
            AllocationCounter.trackCurrentThread()
            let buffer = UnsafeMutableRawPointer.allocate(byteCount: 1500, alignment: 8)
            defer { buffer.deallocate() }
            var sequence: UInt16 = 0
            func one(protectOnly: Bool, count: Int) {
                AllocationCounter.arm()
                for _ in 0..<count {
                    sequence &+= 1
                    // Header and payload written in place, as the sender does.
                    buffer.storeBytes(of: 0x80, toByteOffset: 0, as: UInt8.self)
                    buffer.storeBytes(of: 96, toByteOffset: 1, as: UInt8.self)
                    buffer.storeBytes(of: sequence.bigEndian, toByteOffset: 2, as: UInt16.self)
                    buffer.storeBytes(of: UInt32(0x1234_5678).bigEndian, toByteOffset: 8, as: UInt32.self)
                    let n = out.protect(buffer, length: 60)
                    if !protectOnly { precondition(n > 0 && inA.unprotect(buffer, length: n) == 60) }
                }
                AllocationCounter.disarm()
                box.counts.append(AllocationCounter.count)
                box.callers.append(AllocationCounter.callers)
            }
            one(protectOnly: false, count: 1)  // the inbound stream is made here
            one(protectOnly: true, count: 10)
            one(protectOnly: true, count: 100)
            one(protectOnly: false, count: 10)
            one(protectOnly: false, count: 100)
        }
        t.start()
        while !t.isFinished { usleep(1000) }
        let c = box.counts
        print("srtp allocations: protect \(Double(c[2]) / 100)/packet, protect+unprotect \(Double(c[4]) / 100)/packet; \(box.callers[4])")
        XCTAssertEqual(c[2], c[1] * 10, "protect: the same number for every packet")
        XCTAssertEqual(c[4], c[3] * 10, "protect and unprotect: the same number for every packet")
        for callers in box.callers.dropFirst() {
            let ours = callers.filter { !["libnss", "libnspr", "libfreebl", "libsoftokn", "libsrtp"].contains(where: $0.contains) }
            XCTAssertEqual(ours, [], "allocations outside libsrtp and NSS")
        }
    }

    func testMediaKeysDifferPerCallAndSenderAndEveryRoomDerivesTheSame() throws {
        let bytes = (0..<32).map { UInt8($0) }
        let here = try SiteKey(bytes: bytes), there = try SiteKey(bytes: bytes)
        let c1 = CallID(0x1111), c2 = CallID(0x2222)
        let a = RoomID("empfang")!, b = RoomID("labor")!
        let k = MediaKeys.key(here, call: c1, sender: a)
        XCTAssertEqual(k.count, SRTPSession.keyLength)
        XCTAssertEqual(k, MediaKeys.key(there, call: c1, sender: a), "both ends of a call derive one key")
        XCTAssertEqual(Set([k, MediaKeys.key(here, call: c1, sender: b), MediaKeys.key(here, call: c2, sender: a)]).count, 3)
        XCTAssertNotEqual(k, MediaKeys.key(try SiteKey(bytes: bytes.reversed()), call: c1, sender: a))

        // The sessions of one call are kept while it lasts; a new call gets new ones.
        let keys = MediaKeys(siteKey: here, room: a, ssrc: 42)
        let peer = MediaPeer(room: b, endpoint: IPv4Endpoint(address: 0x7F00_0001, port: 5000))
        let first = try XCTUnwrap(keys.protection(for: MediaPlan(sendTo: [peer.endpoint], receiveFrom: [peer], call: c1)))
        let again = try XCTUnwrap(keys.protection(for: MediaPlan(sendTo: [], receiveFrom: [peer], call: c1)))
        XCTAssertEqual(first, again, "a route change within a call keeps its sessions (and their replay windows)")
        let next = try XCTUnwrap(keys.protection(for: MediaPlan(sendTo: [], receiveFrom: [peer], call: c2)))
        XCTAssertFalse(next.outbound === first.outbound)
        XCTAssertNil(try keys.protection(for: .idle))
    }

    /// Keys agreed in the call's signalling: the plan's keys make the sessions, with or without
    /// a site key; a peer that gave none is derived from the site key, and without one the
    /// call's media stays off (nothing in the clear); no keys and no site key: clear.
    func testMediaKeysTakeThePlansKeysFirst() throws {
        let a = RoomID("empfang")!, b = RoomID("labor")!, call = CallID(0x3333)
        let mine = try XCTUnwrap(MediaKey(bytes: [UInt8](repeating: 1, count: MediaKey.length)))
        let theirs = try XCTUnwrap(MediaKey(bytes: [UInt8](repeating: 2, count: MediaKey.length)))
        let endpoint = IPv4Endpoint(address: 0x7F00_0001, port: 5000)
        let keyed = MediaPlan(sendTo: [endpoint], receiveFrom: [MediaPeer(room: b, endpoint: endpoint, key: theirs)], call: call, sendKey: mine)
        let bare = MediaPlan(sendTo: [endpoint], receiveFrom: [MediaPeer(room: b, endpoint: endpoint)], call: call)

        let noSiteKey = MediaKeys(siteKey: nil, room: a, ssrc: 42)
        XCTAssertNil(try noSiteKey.protection(for: bare), "no keys anywhere: clear")
        let first = try XCTUnwrap(noSiteKey.protection(for: keyed))
        XCTAssertEqual(first.inbound.count, 1)
        XCTAssertEqual(try noSiteKey.protection(for: keyed), first, "the same keys keep their sessions")
        var half = keyed
        half.receiveFrom[0].key = nil
        XCTAssertThrowsError(try noSiteKey.protection(for: half), "a peer without a key and no site key: media off") { error in
            guard case .noKey(let room)? = error as? MediaKeys.Failure else { return XCTFail("\(error)") }
            XCTAssertEqual(room, b)
        }
        var rekeyed = keyed
        rekeyed.receiveFrom[0].key = mine
        XCTAssertFalse(try XCTUnwrap(noSiteKey.protection(for: rekeyed)).inbound[0] === first.inbound[0], "another key, another session")

        let withSiteKey = MediaKeys(siteKey: try SiteKey(bytes: (0..<32).map { UInt8($0) }), room: a, ssrc: 42)
        XCTAssertNotNil(try withSiteKey.protection(for: half), "a peer without a key: derived from the site key")
        XCTAssertNotNil(try withSiteKey.protection(for: keyed))
    }

    /// The live loop with protected routes: A (the right key) is played; plain RTP from B and
    /// SRTP under another key from C are dropped, counted, and start no stream; a replay of A's
    /// packet is refused; what the loop sends is SRTP under its own key; the network thread
    /// allocates nothing once each stream's first packet is in.
    func testProtectedRoutesPlayOnlyAuthenticSRTPAndSendSRTP() throws {
        let sink = try UDPSocket(bind: .loopback(port: 0))
        let live = try LiveLoop()
        defer { live.stop() }
        let ours = keyA.reversed() as [UInt8]
        let a = try Talker(to: live.socket.local, key: keyA)
        let b = try Talker(to: live.socket.local)
        let c = try Talker(to: live.socket.local, key: keyB)
        let inbound = try [keyA, keyB.reversed(), keyA.reversed().map { $0 ^ 1 }].map { try SRTPSession(key: $0, direction: .inbound) }
        let routes = MediaRoutes(sendTo: [sink.local], acceptFrom: [a.socket.local, b.socket.local, c.socket.local], joinGroups: [],
                                 protection: MediaProtection(outbound: try SRTPSession(key: ours, direction: .outbound(ssrc: live.loop.sender!.ssrc)),
                                                             inbound: inbound))
        XCTAssertTrue(live.apply(routes))
        let st = live.receiver.statistics

        a.talk(frames: 5)
        b.talk(frames: 5)
        c.talk(frames: 5)
        // The network thread counts a datagram before its verdict: wait for both.
        XCTAssertTrue(eventually { st.datagrams.load == 15 && st.authenticated.load + st.unauthenticated.load == 15 })
        XCTAssertEqual(st.authenticated.load, 5)
        XCTAssertEqual(st.accepted.load, 4, "authentic packets go on to the stream table (its probation holds the first)")
        XCTAssertEqual(st.unauthenticated.load, 10, "plain RTP and another key fail authentication")
        XCTAssertEqual(live.activeSources, ["\(a.socket.local)"])

        // A replayed packet of A's, from A's address.
        let replay = try SRTPSession(key: keyA, direction: .outbound(ssrc: 0xA0))
        let packet = protect(rtp(sequence: 900, ssrc: 0xA0), replay)
        for _ in 0..<2 { _ = packet.withUnsafeBytes { a.socket.send($0, to: live.socket.local) } }
        XCTAssertTrue(eventually { st.datagrams.load == 17 && st.authenticated.load + st.replayed.load >= 7 })
        XCTAssertEqual(st.authenticated.load, 6)
        XCTAssertEqual(st.replayed.load, 1)

        // What the loop sends opens with the inbound session of its key.
        live.speak(frames: 3)
        let check = try SRTPSession(key: ours, direction: .inbound)
        var opened = 0
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 2048, alignment: 8)
        defer { buffer.deallocate() }
        while opened < 3, sink.waitReadable(milliseconds: 500), let (n, _) = sink.receive(into: buffer) {
            XCTAssertGreaterThan(check.unprotect(buffer.baseAddress!, length: n), 12)
            opened += 1
        }
        XCTAssertEqual(opened, 3)

        // Steady state, route changes within the call included: the network thread allocates
        // what libsrtp allocates per packet (NSS, see the test above) and nothing of ours.
        final class Box: @unchecked Sendable { var count: UInt64 = 0 }
        let perOperation = Box()
        let probe = try SRTPSession(key: keyB, direction: .outbound(ssrc: 0x0E))
        let measuring = Thread { [rtp = self.rtp(sequence: 1, ssrc: 0x0E)] in
            AllocationCounter.trackCurrentThread()
            var p = rtp + [UInt8](repeating: 0, count: SRTPSession.trailerRoom)
            _ = p.withUnsafeMutableBytes { probe.protect($0.baseAddress!, length: rtp.count) }  // makes the stream
            p[3] = 2
            AllocationCounter.arm()
            _ = p.withUnsafeMutableBytes { probe.protect($0.baseAddress!, length: rtp.count) }
            AllocationCounter.disarm()
            perOperation.count = AllocationCounter.count
        }
        measuring.start()
        while !measuring.isFinished { usleep(1000) }
        XCTAssertGreaterThan(perOperation.count, 0)

        let sent = live.loop.sender!.packetsSent.load
        AllocationCounter.arm()
        for _ in 0..<3 {
            XCTAssertTrue(live.apply(routes))
            a.talk(frames: 4)
            b.talk(frames: 2)
            live.speak(frames: 2)
        }
        XCTAssertTrue(eventually { st.datagrams.load == 17 + 18 && live.loop.sender!.packetsSent.load == sent + 6 })
        usleep(20_000)
        AllocationCounter.disarm()
        XCTAssertEqual(AllocationCounter.count, 24 * perOperation.count,
                       "12 + 6 packets checked and 6 protected, at \(perOperation.count) allocations each in libsrtp")
        let foreign = AllocationCounter.callers.filter { !["libnss", "libnspr", "libfreebl", "libsoftokn", "libsrtp"].contains(where: $0.contains) }
        XCTAssertEqual(foreign, [], "network thread allocations outside libsrtp and NSS")
        XCTAssertEqual(st.authenticated.load, 6 + 12)
    }
}
