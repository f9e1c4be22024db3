import Posix
import Foundation
import Impairment
import XCTest
#if canImport(Glibc)
import Glibc
#endif

final class ImpairmentTests: XCTestCase {
    private let ms: UInt64 = 1_000_000

    /// Feeds `count` packets spaced `spacingNs` apart and returns each packet's send times.
    private func decisions(_ profile: ImpairmentProfile, count: Int, spacingNs: UInt64 = 20_000_000)
        throws -> (times: [[UInt64]], model: ImpairmentModel)
    {
        var model = try ImpairmentModel(profile: profile)
        let times = (0..<count).map { model.sendTimes(arrivalNs: UInt64($0) * spacingNs) }
        return (times, model)
    }

    // MARK: - Model

    func testSameSeedGivesIdenticalDecisionsAndDifferentSeedDoesNot() throws {
        let profile = ImpairmentProfile(baseDelayMs: 20, jitterMs: 30, lossPercent: 5, burstEnterPercent: 1,
                                        burstExitPercent: 30, reorderPercent: 2, duplicatePercent: 1, seed: 42)
        let a = try decisions(profile, count: 10_000)
        let b = try decisions(profile, count: 10_000)
        XCTAssertEqual(a.times, b.times)
        XCTAssertEqual(a.model.counters, b.model.counters)
        var other = profile
        other.seed = 43
        let c = try decisions(other, count: 10_000)
        XCTAssertNotEqual(a.times, c.times)
    }

    func testRandomLossRateIsWithinStatisticalBounds() throws {
        let (times, model) = try decisions(ImpairmentProfile(lossPercent: 5, seed: 7), count: 100_000)
        let lost = times.filter(\.isEmpty).count
        // Binomial(100 000, 0.05): sigma ≈ 69 packets; ±350 is about 5 sigma.
        XCTAssertEqual(Double(lost), 5_000, accuracy: 350)
        XCTAssertEqual(model.counters.droppedRandom, UInt64(lost))
        XCTAssertEqual(model.counters.droppedBurst, 0)
        XCTAssertTrue(model.counters.isBalanced)
    }

    func testBurstLossComesInRunsWithMeanLengthOneOverExitProbability() throws {
        let profile = ImpairmentProfile(burstEnterPercent: 1, burstExitPercent: 25, seed: 11)
        let (times, model) = try decisions(profile, count: 200_000)
        var runs: [Int] = []
        var current = 0
        for t in times {
            if t.isEmpty { current += 1 } else if current > 0 { runs.append(current); current = 0 }
        }
        if current > 0 { runs.append(current) }
        let mean = Double(runs.reduce(0, +)) / Double(runs.count)
        // Geometric run lengths, mean 1 / 0.25 = 4; ~1 900 bursts give a standard error of ≈ 0.08.
        XCTAssertEqual(mean, 4, accuracy: 0.4, "mean burst length")
        XCTAssertGreaterThan(runs.max() ?? 0, 10, "long bursts occur")
        XCTAssertEqual(model.counters.droppedBurst, UInt64(runs.reduce(0, +)))
        XCTAssertEqual(model.counters.droppedRandom, 0)
        // Stationary loss of the chain: enter / (enter + exit) = 1 / 26.
        XCTAssertEqual(Double(model.counters.droppedBurst) / 200_000, 1.0 / 26, accuracy: 0.005)
    }

    func testDelaysLieWithinBasePlusJitter() throws {
        let (times, _) = try decisions(ImpairmentProfile(baseDelayMs: 20, jitterMs: 30, seed: 5), count: 10_000)
        var delays: [UInt64] = []
        for (i, t) in times.enumerated() {
            XCTAssertEqual(t.count, 1)
            delays.append(t[0] - UInt64(i) * 20 * ms)
        }
        XCTAssertGreaterThanOrEqual(delays.min()!, 20 * ms)
        XCTAssertLessThanOrEqual(delays.max()!, 50 * ms)
        // Uniform: the extremes are approached and the mean is in the middle.
        XCTAssertLessThan(delays.min()!, 21 * ms)
        XCTAssertGreaterThan(delays.max()!, 49 * ms)
        let mean = Double(delays.reduce(0, +)) / Double(delays.count) / 1e6
        XCTAssertEqual(mean, 35, accuracy: 0.5)
    }

    func testReorderingMakesLaterPacketsOvertake() throws {
        let profile = ImpairmentProfile(baseDelayMs: 10, reorderPercent: 10, reorderDelayMs: 50, seed: 3)
        let (times, model) = try decisions(profile, count: 1_000)
        let sendOrder = times.enumerated().map { ($0.element[0], $0.offset) }.sorted { $0.0 < $1.0 }.map(\.1)
        XCTAssertNotEqual(sendOrder, Array(0..<1_000), "send order differs from arrival order")
        XCTAssertEqual(Double(model.counters.reordered), 100, accuracy: 40)
        for (i, t) in times.enumerated() {
            let delay = t[0] - UInt64(i) * 20 * ms
            XCTAssertTrue(delay == 10 * ms || delay == 60 * ms, "held back by exactly reorderDelayMs")
        }
    }

    func testDuplicatesAreCountedAndBothCopiesScheduled() throws {
        let profile = ImpairmentProfile(baseDelayMs: 5, jitterMs: 10, duplicatePercent: 10, seed: 9)
        let (times, model) = try decisions(profile, count: 10_000)
        let doubled = times.filter { $0.count == 2 }
        XCTAssertEqual(UInt64(doubled.count), model.counters.duplicated)
        XCTAssertEqual(Double(doubled.count), 1_000, accuracy: 150)
        XCTAssertEqual(model.counters.sent, 10_000 + model.counters.duplicated)
        XCTAssertTrue(model.counters.isBalanced)
        for t in doubled { XCTAssertLessThanOrEqual(t[0], t[1], "send times ascend") }
        XCTAssertTrue(doubled.contains { $0[0] != $0[1] }, "the copy has its own delay")
    }

    func testValidationErrorsNameTheField() {
        func field(_ profile: ImpairmentProfile) -> String? {
            do { try profile.validate(); return nil } catch { return error.field }
        }
        XCTAssertNil(field(ImpairmentProfile(baseDelayMs: 20, jitterMs: 30, lossPercent: 5, seed: 1)))
        XCTAssertEqual(field(ImpairmentProfile(baseDelayMs: -1)), "baseDelayMs")
        XCTAssertEqual(field(ImpairmentProfile(jitterMs: .nan)), "jitterMs")
        XCTAssertEqual(field(ImpairmentProfile(lossPercent: 101)), "lossPercent")
        XCTAssertEqual(field(ImpairmentProfile(burstEnterPercent: -0.5)), "burstEnterPercent")
        XCTAssertEqual(field(ImpairmentProfile(burstEnterPercent: 1, burstExitPercent: 0)), "burstExitPercent")
        XCTAssertEqual(field(ImpairmentProfile(burstLossPercent: 200)), "burstLossPercent")
        XCTAssertEqual(field(ImpairmentProfile(reorderPercent: 100.5)), "reorderPercent")
        XCTAssertEqual(field(ImpairmentProfile(reorderDelayMs: 1e9)), "reorderDelayMs")
        XCTAssertEqual(field(ImpairmentProfile(duplicatePercent: .infinity)), "duplicatePercent")
        XCTAssertThrowsError(try ImpairmentModel(profile: ImpairmentProfile(lossPercent: -5))) {
            XCTAssertTrue("\($0)".contains("lossPercent"))
        }
    }

    func testOnlyLoopbackEndpointsAreAccepted() throws {
        XCTAssertEqual(try IPv4Endpoint.loopbackOnly(parsing: "127.0.0.1:5004"), IPv4Endpoint.loopback(port: 5004))
        XCTAssertEqual(try IPv4Endpoint.loopbackOnly(parsing: "127.1.2.3:9").description, "127.1.2.3:9")
        for text in ["10.0.0.1:5004", "0.0.0.0:5004", "localhost:5004", "[::1]:5004", "example.com:1"] {
            XCTAssertThrowsError(try IPv4Endpoint.loopbackOnly(parsing: text)) { XCTAssertEqual($0 as? RelayError, .notLoopback(text)) }
        }
        for text in ["127.0.0.1", "127.0.0.1:70000", "127.0.0.1:x"] {
            XCTAssertThrowsError(try IPv4Endpoint.loopbackOnly(parsing: text)) { XCTAssertEqual($0 as? RelayError, .malformedEndpoint(text)) }
        }
    }

    // MARK: - Real sockets on loopback

    func testRelayOverLoopbackLosesDelaysReordersAndAccounts() throws {
        let receiver = try TestSocket()
        let sender = try TestSocket()
        let profile = ImpairmentProfile(baseDelayMs: 1, jitterMs: 10, lossPercent: 5, duplicatePercent: 1, seed: 1234)
        let relay = try UDPRelay(targetPort: receiver.port, profile: profile)
        XCTAssertNotEqual(relay.boundPort, 0)
        try relay.start()
        defer { relay.stop() }

        for i in 0..<500 {
            sender.send(UInt32(i), toPort: relay.boundPort)
            if i % 50 == 49 { usleep(1_000) }  // a realistic burst pattern, still far faster than the jitter
        }
        var arrivals: [UInt32] = []
        let deadline = Date().addingTimeInterval(2)
        while Date() < deadline, let number = receiver.receive(timeoutMs: 300) { arrivals.append(number) }
        relay.stop()

        let unique = Set(arrivals)
        XCTAssertTrue((450...500).contains(unique.count), "got \(unique.count) of 500")
        XCTAssertTrue(unique.isSubset(of: Set(0..<500)))
        XCTAssertTrue(zip(arrivals, arrivals.dropFirst()).contains { $0 > $1 }, "some arrive out of order")

        let stats = relay.statistics.forward
        XCTAssertEqual(stats.model.received, 500)
        // Model: sent = received - dropped + duplicated. Relay: sent = delivered + overflow + errors + discarded.
        XCTAssertTrue(stats.isBalanced, "\(stats)")
        XCTAssertEqual(stats.model.sent, stats.model.received - stats.model.droppedRandom + stats.model.duplicated)
        XCTAssertEqual(stats.delivered, UInt64(arrivals.count))
        XCTAssertEqual(UInt64(arrivals.count - unique.count), stats.model.duplicated)
        XCTAssertEqual(500 - UInt64(unique.count), stats.model.droppedRandom)
        XCTAssertEqual(relay.statistics.reverse.model.received, 0)
    }

    func testRelayForwardsRepliesBackToTheLastSender() throws {
        let target = try TestSocket()
        let client = try TestSocket()
        let relay = try UDPRelay(targetPort: target.port, profile: ImpairmentProfile(baseDelayMs: 2, seed: 5))
        try relay.start()
        client.send(7, toPort: relay.boundPort)
        let (request, from) = try XCTUnwrap(target.receiveWithSource(timeoutMs: 500))
        XCTAssertEqual(request, 7)
        target.send(8, toPort: from)
        XCTAssertEqual(client.receive(timeoutMs: 500), 8)
        let started = Date()
        relay.stop()
        XCTAssertLessThan(Date().timeIntervalSince(started), 0.1, "stop() returns promptly")
        XCTAssertEqual(relay.statistics.reverse.delivered, 1)
        XCTAssertThrowsError(try relay.start()) { XCTAssertEqual($0 as? RelayError, .notRestartable) }
    }

    func testQueueOverflowIsDroppedAndCounted() throws {
        let receiver = try TestSocket()
        let sender = try TestSocket()
        let relay = try UDPRelay(targetPort: receiver.port, profile: ImpairmentProfile(baseDelayMs: 5_000), queueCapacity: 10)
        try relay.start()
        for i in 0..<30 { sender.send(UInt32(i), toPort: relay.boundPort) }
        let deadline = Date().addingTimeInterval(1)
        while Date() < deadline, relay.statistics.forward.model.received < 30 { usleep(1_000) }
        relay.stop()
        let stats = relay.statistics.forward
        XCTAssertEqual(stats.queueOverflow, 20)
        XCTAssertEqual(stats.discardedAtStop, 10)
        XCTAssertTrue(stats.isBalanced, "\(stats)")
    }
}

/// A plain blocking UDP socket on 127.0.0.1 for the tests, sending and receiving 4-byte numbers.
private final class TestSocket {
    let fd: Int32
    let port: UInt16

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        var size: Int32 = 4 << 20
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        var address = Self.loopback(port: 0)
        let ok = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard fd >= 0, ok == 0 else { throw SystemError("bind a loopback UDP socket", SystemError.currentErrno) }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        self.fd = fd
        port = UInt16(bigEndian: address.sin_port)
    }

    deinit { close(fd) }

    static func loopback(port: UInt16) -> sockaddr_in {
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_port = port.bigEndian
        a.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return a
    }

    func send(_ number: UInt32, toPort port: UInt16) {
        var address = Self.loopback(port: port)
        var value = number.bigEndian
        _ = withUnsafePointer(to: &address) { a in
            a.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                sendto(fd, &value, 4, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
    }

    func receive(timeoutMs: Int32) -> UInt32? { receiveWithSource(timeoutMs: timeoutMs)?.0 }

    func receiveWithSource(timeoutMs: Int32) -> (UInt32, UInt16)? {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&p, 1, timeoutMs) == 1 else { return nil }
        var value: UInt32 = 0
        var source = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let n = withUnsafeMutablePointer(to: &source) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(fd, &value, 4, 0, $0, &length) }
        }
        return n == 4 ? (UInt32(bigEndian: value), UInt16(bigEndian: source.sin_port)) : nil
    }
}
