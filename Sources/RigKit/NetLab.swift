import Foundation
import Glibc

/// A small LAN of network namespaces, one host per room, for tests that need what one loopback
/// host cannot give: every room on its own address with the same ports, as in an installation,
/// and multicast that reaches every member but not the sender. A hub namespace holds a bridge
/// (multicast snooping off, so groups flood like on a plain switch); each host namespace has
/// `eth0` on 10.77.0.0/24, wired to the bridge by a veth pair, and a multicast route on it.
/// Programs run inside with `ip netns exec`; the rig's sound server and the control sockets are
/// files, which every namespace reaches. `close()` (or deinit) deletes the namespaces.
public final class NetLab: @unchecked Sendable {
    // @unchecked: built and used from one test thread.
    public struct Host: Sendable {
        public let name: String
        public let namespace: String
        public let address: String
    }

    public let hosts: [Host]
    private let hub: String
    private var closed = false
    /// Kernel limits raised while the lab stands, with the values to put back.
    private var raised: [(path: String, before: String)] = []

    /// One host per name, addresses 10.77.0.11, .12, ... in order.
    public init(hosts names: [String]) throws {
        guard getuid() == 0 else { throw RigError(description: "network namespaces need root (ip netns)") }
        // Interface and namespace names stay short (IFNAMSIZ 16) and unique per lab.
        let tag = "icl" + String(UInt32.random(in: 0...0xFFFFF), radix: 16)
        hub = "\(tag)-hub"
        hosts = names.enumerated().map { i, name in
            Host(name: name, namespace: "\(tag)-\(i)", address: "10.77.0.\(11 + i)")
        }
        do {
            try raiseNeighbourLimits()
            try Self.ip(["netns", "add", hub])
            try Self.ip(["-n", hub, "link", "add", "br0", "type", "bridge", "mcast_snooping", "0"])
            try Self.ip(["-n", hub, "link", "set", "br0", "up"])
            for (i, h) in hosts.enumerated() {
                try Self.ip(["netns", "add", h.namespace])
                try Self.ip(["-n", hub, "link", "add", "h\(i)", "type", "veth", "peer", "name", "eth0", "netns", h.namespace])
                try Self.ip(["-n", hub, "link", "set", "h\(i)", "master", "br0", "up"])
                try Self.ip(["-n", h.namespace, "addr", "add", "\(h.address)/24", "dev", "eth0"])
                try Self.ip(["-n", h.namespace, "link", "set", "eth0", "up"])
                try Self.ip(["-n", h.namespace, "link", "set", "lo", "up"])
                try Self.ip(["-n", h.namespace, "route", "add", "224.0.0.0/4", "dev", "eth0"])
            }
        } catch {
            close()
            throw error
        }
    }

    public func host(_ name: String) -> Host { hosts.first { $0.name == name }! }

    /// The command line that runs `program` inside a host's namespace.
    public func command(_ name: String, _ program: String, _ arguments: [String]) -> (String, [String]) {
        (Self.ipPath, ["netns", "exec", host(name).namespace, program] + arguments)
    }

    /// Gives a host another address on the LAN in place of its own (a new DHCP lease): the old
    /// one removed, the new one added (the other order would take the new one with the old: a
    /// second address of a subnet goes with its first). Sockets bound to every address stay.
    public func readdress(_ name: String, to address: String) throws {
        let h = host(name)
        try Self.ip(["-n", h.namespace, "addr", "del", "\(h.address)/24", "dev", "eth0"])
        try Self.ip(["-n", h.namespace, "addr", "add", "\(address)/24", "dev", "eth0"])
    }

    /// Cuts a host off the bridge (`connected: false`) or plugs it back in: a network partition.
    public func setLink(_ name: String, connected: Bool) throws {
        guard let i = hosts.firstIndex(where: { $0.name == name }) else { return }
        try Self.ip(["-n", hub, "link", "set", "h\(i)", connected ? "up" : "down"])
    }

    /// Stops the bridge forwarding any multicast (`flowing: false`; unicast passes as before), or
    /// lets it flow again: with snooping off every group floods, and a port's `mcast_flood` flag
    /// gates that flood (netem and packet filters are not available here: platform notes).
    public func setMulticast(flowing: Bool) throws {
        for i in hosts.indices {
            try Self.ip(["-n", hub, "link", "set", "dev", "h\(i)", "type", "bridge_slave", "mcast_flood", flowing ? "on" : "off"])
        }
    }

    public func close() {
        guard !closed else { return }
        closed = true
        for h in hosts { try? Self.ip(["netns", "del", h.namespace]) }
        try? Self.ip(["netns", "del", hub])
        for r in raised.reversed() { try? r.before.write(toFile: r.path, atomically: false, encoding: .utf8) }
    }

    /// The kernel keeps one ARP table for all namespaces, and its limits are global
    /// (net.ipv4.neigh.default.gc_thresh2 and 3, 512 and 1024 by default): a LAN of n hosts that
    /// all talk to each other fills n(n − 1) entries, past those from about 32 hosts, and the
    /// kernel then refuses new neighbours ("neighbor table overflow": a host not yet known cannot
    /// be reached). Where each terminal is a machine of its own, each has a table of its own; a lab
    /// that large raises the limits while it stands.
    private func raiseNeighbourLimits() throws {
        let needed = hosts.count * hosts.count + 256
        for (name, value) in [("gc_thresh2", needed), ("gc_thresh3", 2 * needed)] {
            let path = "/proc/sys/net/ipv4/neigh/default/\(name)"
            let before = try String(contentsOfFile: path, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
            guard let now = Int(before), now < value else { continue }
            try "\(value)".write(toFile: path, atomically: false, encoding: .utf8)
            raised.append((path, before))
        }
    }

    deinit { close() }

    public static let ipPath = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"]
        .first { FileManager.default.isExecutableFile(atPath: $0) } ?? "ip"

    /// Runs `ip` and throws with its message when it fails.
    static func ip(_ arguments: [String]) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: ipPath)
        p.arguments = arguments
        let err = Pipe()
        p.standardError = err
        p.standardOutput = FileHandle.nullDevice
        try p.run()
        let message = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else {
            throw RigError(description: "ip \(arguments.joined(separator: " ")): \(String(decoding: message, as: UTF8.self))")
        }
    }
}
