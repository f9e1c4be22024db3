import Glibc
import Posix
import Synchronization

/// Records the UDP datagrams that cross this network namespace (a packet socket: root), as
/// someone on the practice's network would record a call, for tests that then try to read it.
/// Each datagram once: loopback shows a packet leaving and arriving, and only the arrival is kept.
public final class PacketCapture: Sendable {
    public struct Datagram: Sendable {
        public let sourcePort: UInt16
        public let destinationPort: UInt16
        public let payload: [UInt8]
    }

    private final class Shared: Sendable {
        let datagrams = Mutex<[Datagram]>([])
        let stopping = Atomic<Bool>(false)
    }
    private let shared: Shared
    private let descriptor: Int32
    private let thread: WorkerThread

    public init() throws {
        // IPv4 packets without their link header. 0x0800: ETH_P_IP, in network order.
        let ipv4 = Int32(UInt16(0x0800).bigEndian)
        let fd = socket(AF_PACKET, Int32(SOCK_DGRAM.rawValue), ipv4)
        guard fd >= 0 else { throw RigError(description: "packet capture: socket: \(String(cString: strerror(errno))) (needs root)") }
        var timeout = timeval(tv_sec: 0, tv_usec: 100_000)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        descriptor = fd
        let shared = Shared()
        self.shared = shared
        let body: @Sendable () -> Void = {
            var buffer = [UInt8](repeating: 0, count: 65536)
            var from = sockaddr_storage()
            while !shared.stopping.load(ordering: .relaxed) {
                var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
                let n = buffer.withUnsafeMutableBytes { b in
                    withUnsafeMutablePointer(to: &from) {
                        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(fd, b.baseAddress, b.count, 0, $0, &length) }
                    }
                }
                guard n > 0 else { continue }
                // sockaddr_ll: family 2, protocol 2, ifindex 4, hatype 2, then the packet type
                // (4: PACKET_OUTGOING, the copy of a packet leaving).
                let packetType = withUnsafeBytes(of: &from) { $0[10] }
                guard packetType != 4, let d = PacketCapture.udp(buffer[0..<n]) else { continue }
                shared.datagrams.withLock { $0.append(d) }
            }
        }
        do {
            thread = try WorkerThread.start(name: "packet-capture", body: body)
        } catch {
            close(fd)
            throw error
        }
    }

    /// An IPv4 packet's UDP datagram (unfragmented), or nil.
    private static func udp(_ packet: ArraySlice<UInt8>) -> Datagram? {
        let p = Array(packet)
        guard p.count >= 20, p[0] >> 4 == 4, p[9] == 17 else { return nil }
        let header = Int(p[0] & 0x0F) * 4
        let total = Int(p[2]) << 8 | Int(p[3])
        guard header >= 20, total <= p.count, total >= header + 8 else { return nil }
        let u = header
        return Datagram(sourcePort: UInt16(p[u]) << 8 | UInt16(p[u + 1]), destinationPort: UInt16(p[u + 2]) << 8 | UInt16(p[u + 3]),
                        payload: Array(p[(u + 8)..<total]))
    }

    /// Stops recording; returns what was recorded, in order.
    public func stop() -> [Datagram] {
        shared.stopping.store(true, ordering: .relaxed)
        thread.join()
        close(descriptor)
        return shared.datagrams.withLock { $0 }
    }
}
