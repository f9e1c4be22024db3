import Control
import Foundation
import TestSupport
import XCTest

/// Rooms with the network on, for the tests of network media.
extension XCTestCase {
    /// One room's intercomd with the network on; `network` adds keys to `[network]`, `other` adds sections.
    func startRoom(_ room: String, listen: Int, peers: [String], network: String = "", other: String = "",
                   audio: String = "") throws -> DaemonProcess {
        let config = try DaemonProcess.writeRoomConfig(room, extra: """
            [network]
            listen_port = \(listen)
            peers = [\(peers.map { "\"\($0)\"" }.joined(separator: ", "))]
            \(network)
            [log]
            stats_interval_s = 1
            \(other)
            """, audio: audio)
        return try DaemonProcess(arguments: ["--config", config], name: "intercomd-\(room)")
    }

    /// Waits until every daemon runs audio and network, then lets the streams start.
    func waitUntilStreaming(_ daemons: [DaemonProcess], settle: Double = 1.0) {
        for d in daemons {
            XCTAssertTrue(d.waitUntilRunning(timeout: 10), "the daemon answers stats with its audio running: \(d.log)")
        }
        Thread.sleep(forTimeInterval: settle)
    }
}

extension Checks {
    /// The rig's rooms run on one clock (10 ms blocks are whole microseconds: README, the rig), so
    /// each room's drift estimate of the other's stream reads 0 ± 20 ppm (issue 18, point 4).
    func checkNoDrift(_ rooms: [(DaemonStatistics?, String, DaemonProcess)], after what: String = "") {
        for (stats, name, room) in rooms {
            guard let s = require(stats?.network?.streams.first, "room \(name) lists the other room's stream: \(room.logPath)") else { continue }
            print(String(format: "room %@'s drift estimate %.1f ppm%@", name, s.driftPPM, what))
            check(abs(s.driftPPM) <= 20, "room \(name)'s drift estimate reads \(s.driftPPM) ppm on the rig's one clock\(what): \(room.logPath)")
        }
    }
}
