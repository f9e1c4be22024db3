import AudioPipeline
import Foundation
import Jitter
import Posix
import RealTime
import RTP
import SignalTools
import TestSupport
import Transport
import XCTest

/// Routes changed at run time (calls): where the network thread sends the microphone, whose
/// datagrams it takes, which groups it joins. Real sockets on loopback, the real loop on a thread.
final class MediaRoutesTests: XCTestCase {
    private static let frame = 480
    private let loopbackAnyPort = IPv4Endpoint(address: 0x7F00_0001, port: 0)

    private static func routes(sendTo: [IPv4Endpoint] = [], acceptFrom: [IPv4Endpoint]? = nil,
                               joinGroups: [IPv4Endpoint] = []) -> MediaRoutes {
        MediaRoutes(sendTo: sendTo, acceptFrom: acceptFrom, joinGroups: joinGroups)
    }

    /// The RTP headers of what `socket` receives within `seconds`, up to `expected` of them.
    private func headers(_ socket: UDPSocket, expected: Int, seconds: Double = 1) -> [RTPHeader] {
        var out: [RTPHeader] = []
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 2048, alignment: 4)
        defer { buffer.deallocate() }
        let deadline = Date().addingTimeInterval(seconds)
        while out.count < expected, Date() < deadline {
            guard socket.waitReadable(milliseconds: 10), let (n, _) = socket.receive(into: buffer) else { continue }
            if case let .success(p) = RTPParser.parse(UnsafeRawBufferPointer(rebasing: buffer[0..<n]), expectedPayloadType: 96) {
                out.append(p.header)
            }
        }
        return out
    }

    func testPostedRoutesRedirectTheMicrophoneFromOneReceiverToAnother() throws {
        let x = try UDPSocket(bind: .loopback(port: 0)), y = try UDPSocket(bind: .loopback(port: 0))
        let live = try LiveLoop(peers: [x.local])
        defer { live.stop() }

        live.speak(frames: 5)
        let toX = headers(x, expected: 5)
        XCTAssertEqual(toX.count, 5, "before any routes: the configured peers")

        XCTAssertTrue(live.apply(Self.routes(sendTo: [y.local])))
        live.speak(frames: 5)
        let toY = headers(y, expected: 5)
        XCTAssertEqual(toY.count, 5, "the microphone follows the routes")
        XCTAssertTrue(headers(x, expected: 1, seconds: 0.1).isEmpty, "the old peer gets nothing more")
        XCTAssertEqual(toY.first?.marker, true, "new routes start a talk spurt")
        XCTAssertEqual(toY.first?.sequence, toX.last.map { $0.sequence &+ 1 }, "the same RTP stream goes on")

        // Nobody to send to: frames are counted, and the timestamp keeps pace with capture.
        XCTAssertTrue(live.apply(Self.routes(sendTo: [])))
        live.speak(frames: 3)
        XCTAssertTrue(eventually { live.loop.framesNotSent.load == 3 })
        XCTAssertTrue(live.apply(Self.routes(sendTo: [x.local, y.local])))
        live.speak(frames: 2)
        let again = (headers(x, expected: 2), headers(y, expected: 2))
        XCTAssertEqual(again.0.count, 2)
        XCTAssertEqual(again.1.count, 2)
        XCTAssertEqual(again.1.first?.timestamp, toY.last.map { $0.timestamp &+ UInt32(4 * Self.frame) },
                       "the three frames not sent are a gap in the timeline")
    }

    func testAcceptFromTakesOnlyTheListedSources() throws {
        let live = try LiveLoop()
        defer { live.stop() }
        let a = try Talker(to: live.socket.local), b = try Talker(to: live.socket.local)
        let st = live.receiver.statistics

        XCTAssertTrue(live.apply(Self.routes(acceptFrom: [a.socket.local])))
        a.talk(frames: 5)
        b.talk(frames: 5)
        XCTAssertTrue(eventually { st.datagrams.load == 10 && st.notRouted.load >= 5 }, "a datagram is counted before its verdict")
        XCTAssertEqual(st.notRouted.load, 5, "the unlisted source's datagrams are dropped and counted")
        XCTAssertEqual(live.table.started.load, 1)
        XCTAssertEqual(live.activeSources, [a.socket.local.description], "only the listed source has a stream")

        // Port 0: any port of that address.
        XCTAssertTrue(live.apply(Self.routes(acceptFrom: [loopbackAnyPort])))
        b.talk(frames: 5)
        XCTAssertTrue(eventually { live.table.started.load == 2 })
        XCTAssertEqual(st.notRouted.load, 5)
        XCTAssertEqual(live.table.evicted.load, 0, "a source still accepted keeps its stream")
    }

    func testAStreamWhoseSourceIsNoLongerAcceptedIsEvictedAtOnce() throws {
        let live = try LiveLoop()
        defer { live.stop() }
        let a = try Talker(to: live.socket.local), b = try Talker(to: live.socket.local)
        a.talk(frames: 3)
        b.talk(frames: 3)
        XCTAssertTrue(eventually { live.table.started.load == 2 })

        let start = MonotonicClock.nanoseconds()
        XCTAssertTrue(live.loop.post(Self.routes(acceptFrom: [b.socket.local])))
        XCTAssertTrue(eventually { live.table.evicted.load == 1 })
        let elapsedMs = Double(MonotonicClock.nanoseconds() - start) / 1e6
        XCTAssertLessThan(elapsedMs, 100, "evicted when the routes are applied, not after the idle timeout")
        XCTAssertEqual(live.activeSources, [b.socket.local.description], "the mixer no longer plays the removed source")

        a.talk(frames: 2)
        XCTAssertTrue(eventually { live.receiver.statistics.notRouted.load == 2 })
        XCTAssertEqual(live.table.started.load, 2, "no new stream for the removed source")
    }

    func testJoinGroupsJoinsAndLeavesMulticastGroups() throws {
        let live = try LiveLoop(bind: IPv4Endpoint(address: 0, port: 0))  // multicast reaches only a socket bound to any
        defer { live.stop() }
        let group = try XCTUnwrap(IPv4Endpoint("239.255.0.41:0"))
        let talker = try Talker(to: IPv4Endpoint(address: group.address, port: live.socket.local.port))
        let st = live.receiver.statistics

        XCTAssertTrue(live.apply(Self.routes(joinGroups: [group])))
        talker.talk(frames: 3)
        XCTAssertTrue(eventually { st.datagrams.load == 3 }, "a member receives the group")

        XCTAssertTrue(live.apply(Self.routes(joinGroups: [])))
        talker.talk(frames: 3)
        usleep(100_000)
        XCTAssertEqual(st.datagrams.load, 3, "left the group: nothing more arrives")
        XCTAssertEqual(live.loop.membershipErrors.load, 0)
    }

    func testApplyingRoutesDoesNotAllocateOnTheNetworkThread() throws {
        let sinks = try (0..<2).map { _ in try UDPSocket(bind: .loopback(port: 0)) }
        let live = try LiveLoop(peers: [sinks[0].local])
        defer { live.stop() }
        let a = try Talker(to: live.socket.local)
        let many = (0..<MediaRoutes.maxEndpoints).map { IPv4Endpoint(address: 0x7F00_0001, port: UInt16(9000 + $0)) }
        let groups = (1...3).map { IPv4Endpoint(address: 0xEFFF_0130 + UInt32($0), port: 0) }  // 239.255.1.49...
        let sets = [
            Self.routes(sendTo: [sinks[1].local], acceptFrom: [a.socket.local], joinGroups: [groups[0]]),
            Self.routes(sendTo: Array(many.prefix(14)) + sinks.map(\.local), acceptFrom: many, joinGroups: groups),
            Self.routes(sendTo: [], acceptFrom: [], joinGroups: []),
            Self.routes(sendTo: sinks.map(\.local), acceptFrom: nil, joinGroups: [groups[2], groups[1]]),
        ]
        // Warm-up: every path once.
        for r in sets {
            XCTAssertTrue(live.apply(r))
            live.speak(frames: 1)
            a.talk(frames: 2)
        }
        usleep(20_000)

        AllocationCounter.arm()
        for k in 0..<40 {
            XCTAssertTrue(live.apply(sets[k % sets.count]))
            live.speak(frames: 1)
            a.talk(frames: 1)
        }
        usleep(20_000)
        AllocationCounter.disarm()
        XCTAssertEqual(AllocationCounter.count, 0, "network thread allocations: \(AllocationCounter.callers)")
        XCTAssertEqual(live.loop.membershipErrors.load, 0)
        XCTAssertGreaterThan(live.table.evicted.load, 0, "the eviction path ran too")
    }

    func testManyRoutesPostedQuicklyEndWithTheNewest() throws {
        let x = try UDPSocket(bind: .loopback(port: 0)), y = try UDPSocket(bind: .loopback(port: 0))
        let live = try LiveLoop()
        defer { live.stop() }
        let loop = live.loop, old = x.local
        // Two posting threads at once, then the newest from this one.
        DispatchQueue.concurrentPerform(iterations: 2) { t in
            for k in 0..<300 {
                let others = (0..<(k % 17)).map { IPv4Endpoint(address: 0x7F00_0001, port: UInt16(20000 + t * 100 + $0)) }
                loop.post(MediaRoutes(sendTo: [old], acceptFrom: k % 2 == 0 ? nil : others, joinGroups: []))
            }
        }
        XCTAssertTrue(loop.post(Self.routes(sendTo: [y.local])))
        live.speak(frames: 5)
        XCTAssertEqual(headers(y, expected: 5).count, 5, "the newest routes are in force")
        XCTAssertTrue(headers(x, expected: 1, seconds: 0.1).isEmpty, "no older set came back")
        XCTAssertLessThanOrEqual(loop.appliedRoutes, 601)
        print("routes: 601 posted, \(loop.appliedRoutes) applied (the rest replaced before they were taken)")

        loop.requestStop()
        XCTAssertFalse(loop.post(Self.routes()), "a stopped loop takes no routes")
    }
}
