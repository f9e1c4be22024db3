import Calls
import Control
import Foundation
import Posix
import RigKit
import SignalTools
import TestSupport
import XCTest

/// Issue 55's fault "10,000 garbage datagrams on every port", through real daemons: during a call,
/// B's signalling and media ports each get 10,000 datagrams of garbage (some shaped like RTP or
/// like a sealed message), and its TCP metrics port connections of garbage.
/// Every one is refused and counted, and nothing is lost: the call goes on, its buffer delay back
/// to before's within 30 s, nothing enters the history, and a notification sent afterwards arrives once.
final class GarbageFloodRigTests: XCTestCase {
    static let datagrams = 10_000

    func testTenThousandGarbageDatagramsOnEveryPortAreCountedAndLoseNothing() throws {
        try Rig.require()
        let rooms = try CallRooms(["roomA", "roomB"])
        defer { rooms.stopAll() }
        let metricsPort = try FreePort.udp()
        try rooms.start("rooma", extra: "[notifications.material]\nrecipients = [\"roomb\"]\ntext = \"Bitte Material bringen\"")
        try rooms.start("roomb", extra: "[metrics]\nlisten = \"127.0.0.1:\(metricsPort)\"")
        XCTAssertTrue(rooms.waitOnline("rooma", ["roomb"]))
        _ = try rooms.control("rooma", .perform(.call(button: "roomb")))
        XCTAssertTrue(rooms.wait(8) { rooms.isConnected("roomb") && rooms.plays("roomb", from: "rooma") }, "connected: \(rooms.streamHealth())")
        func stats() throws -> DaemonStatistics { try rooms.daemons["roomb"]!.statistics() }
        let delayBefore = rooms.settledDelayMs("roomb")
        let before = try stats()
        let historyBefore = rooms.history("roomb").count

        // The flood, from an address the directory does not know, paced so that the kernel's
        // receive buffer takes all of it (what it dropped would not reach the daemon to count).
        var random = SplitMix64(seed: 55)
        let flooder = try UDPSocket(bind: IPv4Endpoint.parse("127.0.0.9:0"))
        let b = rooms.room("roomb")
        for port in [b.signalling, b.media] {
            let target = try IPv4Endpoint.parse("127.0.0.1:\(port)")
            for i in 0..<Self.datagrams {
                var bytes = (0..<Int.random(in: 1...300, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
                switch i % 3 {
                case 0 where bytes.count >= 12: bytes[0] = 0x80; bytes[1] = 0x60  // an RTP header: version 2, payload type 96
                case 1 where bytes.count >= 2: bytes[0] = 0x49; bytes[1] = 0x43  // the start of a message of ours, then garbage
                default: break
                }
                _ = bytes.withUnsafeBytes { flooder.send($0, to: target) }
                if i % 50 == 49 { Thread.sleep(forTimeInterval: 0.005) }
            }
        }
        // TCP: connections that send garbage, on the metrics port and (with a site document) the
        // site transfer port.
        for port in [metricsPort] + (before.site != nil ? [b.signalling] : []) {
            for _ in 0..<50 {
                let c = try TCPSocket.connect(to: IPv4Endpoint.parse("127.0.0.1:\(port)"), deadline: MonotonicClock.seconds() + 2)
                let junk = (0..<2000).map { _ in UInt8.random(in: 0...255, using: &random) }
                try? c.sendAll(junk, deadline: MonotonicClock.seconds() + 2)
            }
        }
        Thread.sleep(forTimeInterval: 2)

        let after = try stats()
        let refusedSignalling = (after.calls?.refused.total ?? 0) - (before.calls?.refused.total ?? 0)
            + (after.calls?.decodeErrors ?? 0) - (before.calls?.decodeErrors ?? 0)
        let refusedMedia = ((after.network?.datagrams ?? 0) - (after.network?.accepted ?? 0))
            - ((before.network?.datagrams ?? 0) - (before.network?.accepted ?? 0))
        print("garbage: signalling refused \(refusedSignalling), media refused \(refusedMedia) of \(Self.datagrams) each; "
              + "site transfers refused \((after.site?.transfers.badRequests ?? 0) - (before.site?.transfers.badRequests ?? 0)); "
              + "delay \(delayBefore) ms before")
        XCTAssertEqual(refusedSignalling, Self.datagrams, "every garbage signalling datagram refused and counted")
        XCTAssertEqual(refusedMedia, Self.datagrams, "every garbage media datagram refused and counted")
        if let site = after.site {
            XCTAssertGreaterThan(site.transfers.badRequests, before.site?.transfers.badRequests ?? 0, "garbage transfers refused and counted")
        }
        let scrape = try SiteServiceProcess.run(["/usr/bin/curl", "-s", "-m", "5", "http://127.0.0.1:\(metricsPort)/metrics"]).out
        XCTAssertTrue(scrape.contains("intercom_metrics_requests_total{outcome=\"bad_request\"}"), "the garbage scrapes counted")
        XCTAssertTrue(scrape.contains("intercom_call_active 1"), "the metrics still served, the call on")

        // Nothing lost: the call goes on, its delay as before, no history entry, no hang-up.
        XCTAssertTrue(rooms.isConnected("rooma") && rooms.isConnected("roomb"), "the call goes on")
        let received = after.network?.streams.first?.received ?? 0
        XCTAssertTrue(rooms.wait(2) { ((try? stats().network?.streams.first?.received) ?? 0) > received + 50 }, "B still receives A")
        // The flood may hold packets up on a loaded machine (a CI run: 8.9 ms before, 38.7 ms 2 s
        // after), and the buffer then grows, as it should; what must hold is that it comes back.
        func delayMs() -> Double { (try? stats().network?.streams.first?.delayMs) ?? .nan }
        let delayAfterFlood = delayMs(), recoveryStart = Date()
        let recovered = rooms.wait(30) { delayMs() - delayBefore <= 20 }
        let delayAfter = delayMs()
        print(String(format: "garbage: B's buffer delay %.1f ms before, %.1f ms just after the flood, %.1f ms after %.1f s",
                     delayBefore, delayAfterFlood, delayAfter, Date().timeIntervalSince(recoveryStart)))
        XCTAssertTrue(recovered, "B's buffer delay back within 20 ms of before within 30 s: \(delayAfter) ms, \(delayBefore) ms before")
        XCTAssertEqual(rooms.history("roomb").count, historyBefore, "nothing entered the history")
        XCTAssertEqual(after.calls?.ended, before.calls?.ended, "no call ended")

        _ = try rooms.control("rooma", .perform(.hangUp))
        XCTAssertTrue(rooms.wait(5) { rooms.isIdle("roomb") })
        _ = try rooms.control("rooma", .perform(.notify(type: "material")))
        XCTAssertTrue(rooms.wait(5) { (try? stats().calls?.notifications.received) == 1 }, "the notification arrives")
        Thread.sleep(forTimeInterval: 1)
        XCTAssertEqual(try stats().calls?.notifications.received, 1, "once")
        XCTAssertEqual(rooms.history("roomb").filter { $0.outcome == .finished }.count, 1, "the call in B's history, once")
    }
}
