import ArgumentParser
import CAllocCounter
import Foundation
import Posix
import RealTime
import Transport

/// `intercom-bench srtp`: what SRTP costs the network thread per packet, through Debian's libsrtp2
/// (NSS inside): time and heap allocations to protect one packet and to check one. Prints
/// Markdown; every figure is measured in this run.
struct SRTPBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "srtp", abstract: "Measure SRTP protect/unprotect per packet (time, allocations).")

    @Option(help: "Runs (the median is reported).")
    var runs = 7

    @Option(help: "Packets per run.")
    var packets = 20000

    @Option(help: "Opus payload bytes per packet (32 kbit/s at 10 ms is 40).")
    var payload = 40

    func run() throws {
        let key = (0..<SRTPSession.keyLength).map { UInt8(truncatingIfNeeded: $0 &* 29 &+ 7) }
        let ssrc: UInt32 = 0x1357_9BDF
        let out = try SRTPSession(key: key, direction: .outbound(ssrc: ssrc))
        let check = try SRTPSession(key: key, direction: .inbound)
        let length = 12 + payload
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: length + SRTPSession.trailerRoom, alignment: 8)
        defer { buffer.deallocate() }
        buffer.initializeMemory(as: UInt8.self, repeating: 0x5A, count: length + SRTPSession.trailerRoom)
        var sequence: UInt16 = 0
        func packet() {
            sequence &+= 1
            buffer.storeBytes(of: 0x80, toByteOffset: 0, as: UInt8.self)
            buffer.storeBytes(of: 96, toByteOffset: 1, as: UInt8.self)
            buffer.storeBytes(of: sequence.bigEndian, toByteOffset: 2, as: UInt16.self)
            buffer.storeBytes(of: ssrc.bigEndian, toByteOffset: 8, as: UInt32.self)
        }
        // One packet first: the inbound stream is made then.
        packet()
        precondition(check.unprotect(buffer, length: out.protect(buffer, length: length)) == length)

        var protectNs: [Double] = [], bothNs: [Double] = []
        for _ in 0..<runs {
            var t = MonotonicClock.nanoseconds()
            for _ in 0..<packets { packet(); _ = out.protect(buffer, length: length) }
            protectNs.append(Double(MonotonicClock.nanoseconds() - t) / Double(packets))
            t = MonotonicClock.nanoseconds()
            for _ in 0..<packets {
                packet()
                precondition(check.unprotect(buffer, length: out.protect(buffer, length: length)) == length)
            }
            bothNs.append(Double(MonotonicClock.nanoseconds() - t) / Double(packets))
        }
        alloc_counter_track_current_thread()
        alloc_counter_reset()
        alloc_counter_arm(1)
        for _ in 0..<100 { packet(); _ = out.protect(buffer, length: length) }
        alloc_counter_arm(0)
        let protectAllocations = Double(alloc_counter_count()) / 100
        alloc_counter_reset()
        alloc_counter_arm(1)
        for _ in 0..<100 { packet(); _ = check.unprotect(buffer, length: out.protect(buffer, length: length)) }
        alloc_counter_arm(0)
        let bothAllocations = Double(alloc_counter_count()) / 100

        func median(_ v: [Double]) -> Double { v.sorted()[v.count / 2] }
        let p = median(protectNs), u = median(bothNs) - median(protectNs)
        print("## SRTP per packet (libsrtp2 from Debian, measured \(ISO8601DateFormatter().string(from: Date())), "
              + "\(ProcessInfo.processInfo.processorCount) cores, median of \(runs) runs × \(packets) packets of \(length) bytes)\n")
        print("| operation | time per packet | heap allocations per packet | share of a 10 ms frame |")
        print("|---|---|---|---|")
        print(String(format: "| protect (every packet sent) | %.2f µs | %.0f | %.3f %% |", p / 1000, protectAllocations, p / 1e5))
        print(String(format: "| unprotect (every packet received) | %.2f µs | %.0f | %.3f %% |", u / 1000,
                     bothAllocations - protectAllocations, u / 1e5))
        print(String(format: "| a 1:4 caller's frame: 1 protect + 4 unprotects | %.2f µs | %.0f | %.3f %% |\n",
                     (p + 4 * u) / 1000, protectAllocations + 4 * (bothAllocations - protectAllocations), (p + 4 * u) / 1e5))
    }
}
