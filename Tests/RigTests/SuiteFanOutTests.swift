import Foundation
import Posix
import TestSupport
import Transport
import XCTest

/// The suite's 1:n figures: the caller's CPU and bytes on the wire when its voice goes to n rooms,
/// one unicast stream each or one multicast stream. The callees are counting sockets, not daemons:
/// the caller's side is what is measured, and 16 daemons do not fit the rig's two cores.
final class SuiteFanOutTests: XCTestCase {
    /// Counts datagrams and bytes on a set of sockets until stopped.
    final class Receivers: @unchecked Sendable {
        let sockets: [UDPSocket]
        private let lock = NSLock()
        private var packets: [Int], bytes: [Int]
        private var stopping = false
        private var thread: Thread?

        init(_ sockets: [UDPSocket]) {
            self.sockets = sockets
            packets = Array(repeating: 0, count: sockets.count)
            bytes = packets
            let t = Thread { [unowned self] in self.run() }
            thread = t
            t.start()
        }

        private func run() {
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 2048, alignment: 4)
            defer { buffer.deallocate() }
            var fds = sockets.map { pollfd(fd: $0.descriptor, events: Int16(POLLIN), revents: 0) }
            while !lock.withLock({ stopping }) {
                guard poll(&fds, nfds_t(fds.count), 50) > 0 else { continue }
                for (i, s) in sockets.enumerated() where fds[i].revents != 0 {
                    while let (n, _) = s.receive(into: buffer) { lock.withLock { packets[i] += 1; bytes[i] += n } }
                }
            }
        }

        func snapshot() -> (packets: [Int], bytes: [Int]) { lock.withLock { (packets, bytes) } }
        func stop() {
            lock.withLock { stopping = true }
            while thread?.isFinished == false { usleep(10_000) }
        }
    }

    /// utime + stime of a process, seconds (NaN once it is gone).
    static func cpuSeconds(_ pid: Int32) -> Double { ProcessCPU.seconds(pid: pid) ?? .nan }

    struct Figures { var cpuPercent: Double; var kBps: Double; var perReceiver: [Int] }

    private func measure(n: Int, multicast: Bool, seconds: Double) throws -> Figures {
        let receivers: Receivers, peers: [String], network: String
        if multicast {
            let port = try FreePort.udp(address: "0.0.0.0")
            let group = IPv4Endpoint("239.255.0.77:\(port)")!
            let sockets = try (0..<n).map { _ in
                let s = try UDPSocket(bind: IPv4Endpoint(address: 0, port: UInt16(port)), reuse: true)
                try s.joinMulticast(group: group.address, interface: 0x7F00_0001)
                return s
            }
            receivers = Receivers(sockets)
            peers = [group.description]
            network = "multicast_interface = \"127.0.0.1\"\nmulticast_loopback = true"
        } else {
            let sockets = try (0..<n).map { _ in try UDPSocket(bind: IPv4Endpoint.loopback(port: 0)) }
            receivers = Receivers(sockets)
            peers = sockets.map { "127.0.0.1:\($0.local.port)" }
            network = ""
        }
        defer { receivers.stop() }
        let a = try startRoom("roomA", listen: 0, peers: peers, network: network, other: "[opus]\ndtx = false")
        defer { a.terminate() }
        waitUntilStreaming([a])
        let talker = try Rig.startTalker(room: "roomA", wav: try Speech.farEnd())
        defer { if talker.isRunning { talker.terminate() } }
        Thread.sleep(forTimeInterval: 0.5)
        let pid = a.process.processIdentifier
        let cpu0 = Self.cpuSeconds(pid), start = Date(), before = receivers.snapshot()
        Thread.sleep(forTimeInterval: seconds)
        let cpu1 = Self.cpuSeconds(pid), elapsed = Date().timeIntervalSince(start), after = receivers.snapshot()
        let perReceiverBytes = zip(after.bytes, before.bytes).map { $0 - $1 }
        let packets = zip(after.packets, before.packets).map { $0 - $1 }
        // On the wire: unicast sends every receiver its own copy; multicast sends one.
        let wireBytes = multicast ? Double(perReceiverBytes.max() ?? 0) : Double(perReceiverBytes.reduce(0, +))
        // RTP payload + headers as the sockets see them, plus the UDP/IP headers per packet.
        let wirePackets = multicast ? Double(packets.max() ?? 0) : Double(packets.reduce(0, +))
        return Figures(cpuPercent: (cpu1 - cpu0) / elapsed * 100, kBps: (wireBytes + 28 * wirePackets) / elapsed / 1000,
                       perReceiver: packets)
    }

    func testSuiteOneToNCallerCPUAndBytesUnicastAgainstMulticast() throws {
        let mode = try SuiteMode.require()
        try Rig.require()
        let sizes = mode.isSmoke ? [4] : [1, 4, 8, 16]
        let seconds = mode.isSmoke ? 3.0 : 6.0
        SuiteMode.emit("### 1:n: the caller's CPU and bytes on the wire, unicast against multicast (rig, loopback)")
        SuiteMode.emit("")
        SuiteMode.emitTable(intro: "One intercomd sends its microphone (speech playing in its room, DTX off) to n receivers for \(Int(seconds)) s: n unicast streams, or one multicast stream that n sockets join. The receivers are counting sockets (the caller's side is what is measured; 16 daemons do not fit two cores). CPU: the whole daemon (audio, echo canceller, encoder, network thread), % of one core; bytes: RTP + UDP/IP headers. Lower is better. Goal: multicast bytes per second independent of n; unicast grows linearly with n, CPU only slightly (one encode, n sends).",
                            columns: ["n", "unicast: CPU", "unicast: kB/s", "multicast: CPU", "multicast: kB/s", "packets per receiver, unicast / multicast"])
        for n in sizes {
            let u = try measure(n: n, multicast: false, seconds: seconds)
            let m = try measure(n: n, multicast: true, seconds: seconds)
            XCTAssertTrue(u.cpuPercent.isFinite && m.cpuPercent.isFinite, "CPU measured")
            XCTAssertGreaterThan(u.perReceiver.min() ?? 0, 0, "every unicast receiver got packets")
            XCTAssertGreaterThan(m.perReceiver.min() ?? 0, 0, "every multicast receiver got packets")
            func range(_ v: [Int]) -> String { "\(v.min() ?? 0)-\(v.max() ?? 0)" }
            SuiteMode.emit(String(format: "| %d | %.1f %% | %.1f | %.1f %% | %.1f | %@ / %@ |", n, u.cpuPercent, u.kBps, m.cpuPercent, m.kBps,
                                  range(u.perReceiver), range(m.perReceiver)))
        }
        SuiteMode.emit("")
    }
}
