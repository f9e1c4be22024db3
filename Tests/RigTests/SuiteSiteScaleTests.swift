import Calls
import Control
import Foundation
import SignalTools
import Glibc
import Posix
import TestSupport
import XCTest

/// The suite's site figures (issues 52 and 53): a site of 5, 20 and 50 terminals on this machine, each a
/// real intercomd in a network namespace of its own (one LAN, the ports as installed) and no
/// sound card (the audio supervisor keeps retrying, as with an unplugged USB card), so that what
/// is measured is signalling: the
/// presence traffic and CPU each terminal costs, a new site version handed to one terminal and
/// applied at all, and one notification to every other room.
final class SuiteSiteScaleTests: XCTestCase {
    struct Figures {
        var datagramsPerSecond: [Double], bytesPerSecond: [Double], cpuPercent: [Double]
        /// Of it, the threads that carry signalling: the calls thread, the site's two and the main loop.
        var signallingPercent: [Double]
        /// Seconds from the publish to each terminal's keeping version 3 (`site.arrival.kept`) and
        /// applying it (`site.applied_at`).
        var kept: [Double], applied: [Double]
        /// Per terminal that fetched it: seconds from a hello naming it to the fetch's start, from
        /// there to kept, and from kept to applied.
        var heardToFetch: [Double], fetchToReceived: [Double], receivedToKept: [Double], keptToApplied: [Double]
        /// The most fetches in a row from the administrator's tool to a terminal; fetches answered
        /// busy and failed, over all terminals.
        var hops: Int, busy: Int, failed: Int
        /// Seconds from the notification's sending to each recipient's receiving it.
        var delivered: [Double]
        /// Under terminal keys: seconds from publishing the version that revokes the last terminal
        /// to each other terminal's applying it (putting the revoked one out at once).
        var revoked: [Double] = []
    }

    /// `terminalKeys`: every terminal's key approved (version 3) and no site key, signalling sealed
    /// per pair of terminals; else sealed by one site key, as before.
    private func measure(_ n: Int, idle: Double, terminalKeys: Bool) throws -> Figures {
        let names = (1...n).map { String(format: "t%02d", $0) }
        // Each terminal a host of its own on one LAN, with the ports as installed; the
        // administrator's machine one more.
        let lab = try NetLab(hosts: names + ["admin"])
        defer { lab.close() }
        // Statistics logged every 10 s, as installed.
        let rooms = try CallRooms(names, lab: lab, soundCards: false, statsIntervalS: 10)
        defer { rooms.stopAll() }
        let first = names[0], others = Array(names.dropFirst())
        let all = names.map { "\"\($0)\"" }.joined(separator: ", ")
        let types = "[groups]\nalle = [\(all)]\n[notifications.alle]\nlabel = \"Alle\"\nrecipients = [\"alle\"]\nread_aloud = false\n"
        let folder = rooms.dir + "/site"
        try SiteKit.create(folder, document: SiteKit.document(rooms, extra: types))
        // Sealed signalling: one site key, or each terminal's own key approved.
        var own = ""
        if !terminalKeys {
            let key = try SiteKit.siteKeyFile(in: rooms.dir)
            own = "[security]\nsite_key = \"\(key)\"\n"
        }
        var daemons: [String: DaemonProcess] = [:]
        for id in names { daemons[id] = try SiteKit.start(rooms, id, folder: folder, own: own) }
        if terminalKeys { try SiteKit.approveAll(rooms, names, folder: folder, version: 3, in: lab.host("admin")) }
        let next: UInt64 = terminalKeys ? 4 : 3
        XCTAssertTrue(rooms.waitOnline(first, others, timeout: 30), "\(first) sees all \(n - 1) others online")
        Thread.sleep(forTimeInterval: 2)  // every terminal has heard every other's hellos

        // Idle: what presence costs each terminal.
        func traffic() -> [(datagrams: Int, bytes: Int)] {
            names.map { id in
                let c = (try? daemons[id]!.statistics())?.calls
                return (c?.datagramsSent ?? 0, c?.bytesSent ?? 0)
            }
        }
        let pids = names.map { daemons[$0]!.process.processIdentifier }
        let signalling = ["intercom-calls", "site-fetch", "site-server", "intercomd"]
        func signallingSeconds(_ pid: Int32) -> Double {
            let threads = ProcessCPU.threadSeconds(pid: pid)
            return threads.isEmpty ? .nan : signalling.compactMap { threads[$0] }.reduce(0, +)
        }
        let cpu0 = pids.map { ProcessCPU.seconds(pid: $0) ?? .nan }, signalling0 = pids.map(signallingSeconds), traffic0 = traffic(), t0 = Date()
        Thread.sleep(forTimeInterval: idle)
        let cpu1 = pids.map { ProcessCPU.seconds(pid: $0) ?? .nan }, signalling1 = pids.map(signallingSeconds), traffic1 = traffic()
        let wall = Date().timeIntervalSince(t0)
        let datagrams = zip(traffic1, traffic0).map { Double($0.datagrams - $1.datagrams) / wall }
        let bytes = zip(traffic1, traffic0).map { Double($0.bytes - $1.bytes) / wall }
        let cpu = zip(cpu1, cpu0).map { ($0 - $1) / wall * 100 }
        let signallingCPU = zip(signalling1, signalling0).map { ($0 - $1) / wall * 100 }

        // A new version handed to the first terminal: when each applied it.
        try SiteKit.document(rooms, names: [first: "Empfang"], extra: types).write(toFile: folder + "/site.toml", atomically: true, encoding: .utf8)
        try SiteKit.sign(folder)
        let published = Date().timeIntervalSince1970
        let handed = try SiteKit.run(["publish", "--dir", folder, "--to", "\(rooms.room(first).address):\(rooms.room(first).signalling)"],
                                     in: lab.host("admin"))
        XCTAssertEqual(handed.status, 0, handed.output)
        var arrived: [String: DaemonStatistics.Site] = [:]
        let deadline = Date().addingTimeInterval(30)
        while arrived.count < n, Date() < deadline {
            for id in names where arrived[id] == nil {
                if let s = try? daemons[id]!.statistics().site, s.version == next, s.appliedAt != nil { arrived[id] = s }
            }
            if arrived.count < n { Thread.sleep(forTimeInterval: 0.1) }
        }
        XCTAssertEqual(arrived.count, n, "every terminal applied version \(next): missing \(Set(names).subtracting(arrived.keys).sorted())")
        let fetched = arrived.values.compactMap { s in s.arrival.flatMap { a in a.fetchStarted.map { (a, $0) } } }
        func depth(_ id: String, _ seen: Int = 0) -> Int {
            guard seen < n, let from = arrived[id]?.arrival?.from, names.contains(from) else { return 1 }
            return 1 + depth(from, seen + 1)
        }
        // One notification to every other room: when each received it.
        guard case .success = try rooms.control(first, .perform(.notify(type: "alle"))) else { throw RigError(description: "notify refused") }
        var received: [String: Double] = [:]
        let until = Date().addingTimeInterval(10)
        while received.count < others.count, Date() < until {
            for id in others where received[id] == nil {
                if let r = rooms.notifications(id).last(where: { $0.notification.type == "alle" }), let at = r.received {
                    received[id] = at - r.notification.sent
                }
            }
            if received.count < others.count { Thread.sleep(forTimeInterval: 0.1) }
        }
        XCTAssertEqual(received.count, others.count, "every other room received the notification")
        // Under terminal keys: the last terminal revoked, from the administrator's host.
        var revoked: [Double] = []
        if terminalKeys {
            let gone = names[n - 1], rest = names.dropLast()
            let revoke = try SiteKit.run(["revoke", "--dir", folder, "--room", gone], in: lab.host("admin"))
            XCTAssertEqual(revoke.status, 0, revoke.output)
            try SiteKit.sign(folder)
            let start = Date().timeIntervalSince1970
            let handed = try SiteKit.run(["publish", "--dir", folder, "--to", "\(rooms.room(first).address):\(rooms.room(first).signalling)"],
                                         in: lab.host("admin"))
            XCTAssertEqual(handed.status, 0, handed.output)
            var inForce: [String: Double] = [:]
            let until = Date().addingTimeInterval(30)
            while inForce.count < rest.count, Date() < until {
                for id in rest where inForce[id] == nil {
                    if let s = try? daemons[id]!.statistics().site, s.version == next + 1, let at = s.appliedAt { inForce[id] = at - start }
                }
                if inForce.count < rest.count { Thread.sleep(forTimeInterval: 0.05) }
            }
            XCTAssertEqual(inForce.count, rest.count, "every other terminal applied the revocation")
            revoked = Array(inForce.values)
        }
        let transfers = names.compactMap { (try? daemons[$0]!.statistics().site)?.transfers }
        return Figures(datagramsPerSecond: datagrams, bytesPerSecond: bytes, cpuPercent: cpu, signallingPercent: signallingCPU,
                       kept: arrived.values.compactMap { $0.arrival?.kept.map { $0 - published } },
                       applied: arrived.values.compactMap { $0.appliedAt.map { $0 - published } },
                       heardToFetch: fetched.compactMap { a, start in a.heard.map { start - $0 } },
                       fetchToReceived: fetched.compactMap { a, start in a.received.map { $0 - start } },
                       receivedToKept: fetched.compactMap { a, _ in a.received.flatMap { r in a.kept.map { $0 - r } } },
                       keptToApplied: arrived.values.compactMap { s in s.arrival?.kept.flatMap { k in s.appliedAt.map { $0 - k } } },
                       hops: names.map { depth($0) }.max() ?? 0,
                       busy: transfers.map(\.fetchBusy).reduce(0, +), failed: transfers.map(\.fetchFailed).reduce(0, +),
                       delivered: Array(received.values), revoked: revoked)
    }

    func testSuiteASiteOfFiveTwentyAndFiftyTerminals() throws {
        let mode = try SuiteMode.require()
        try Rig.require()
        let sizes = mode.isSmoke ? [5] : [5, 20, 50]
        // Long enough that one clock tick (10 ms) is a small part of 1 % of a core.
        let idle = mode.isSmoke ? 4.0 : 30.0
        SuiteMode.emit("### A site of 5, 20 and 50 terminals: presence, a new version everywhere, a notification to all (network namespaces, no sound cards)")
        SuiteMode.emit("")
        SuiteMode.emitTable(intro: "Each terminal a real intercomd in a network namespace of its own (one LAN through a bridge, the ports as installed) and no sound card (its audio supervisor retries, as with an unplugged USB card): what is measured is signalling. Each size twice: signalling sealed by one site key, and by terminal keys (every terminal's key approved in version 3 by `intercom-site approve` from the administrator's host, no site key: each datagram sealed for one terminal, a signed session announcement in each hello round). Idle for \(Int(idle)) s: signalling datagrams and bytes each terminal sends (typed `calls.datagrams_sent`, `bytes_sent`, as sealed) and its CPU (utime + stime, % of one core; a clock tick of 10 ms is \(String(format: "%.2f", 1 / idle)) % of this window): the whole process, and of it the threads that carry signalling (the calls thread `intercom-calls`, the site's `site-fetch` and `site-server`, and the main loop; not the audio supervisor retrying the missing sound card, nor the statistics logger). Then `intercom-site publish` hands the next version (3; 4 under terminal keys) to the first terminal only; each terminal's `site.arrival.kept` (checked and on disk: it can pass it on) and `site.applied_at` (in force) less the publish's start (which includes starting the tool). Then the first terminal's notification to all others: each recipient's `received` less `sent`. Goals (issue 52): a change everywhere within 2 s at 50 terminals; signalling CPU per terminal under 1 % of a core; traffic per terminal that grows no faster than the number of terminals.",
                            columns: ["terminals, sealed by", "datagrams/s sent per terminal (median)", "bytes/s sent per terminal (median)", "CPU per terminal, median / worst", "of it signalling threads, median / worst", "next version kept: median / worst", "next version applied: median / worst", "notification received: first / last"])
        var steps: [String] = [], revocations: [String] = []
        for terminalKeys in [false, true] { for n in sizes {
            let f = try measure(n, idle: idle, terminalKeys: terminalKeys)
            let sealed = terminalKeys ? "terminal keys" : "site key"
            steps.append("| \(n), \(sealed) | " + String(format: "%d | %.3f s / %.3f s | %.3f s / %.3f s | %.3f s / %.3f s | %.3f s / %.3f s | %d / %d |", f.hops,
                                Levels.median(f.heardToFetch), f.heardToFetch.max() ?? .nan, Levels.median(f.fetchToReceived), f.fetchToReceived.max() ?? .nan,
                                Levels.median(f.receivedToKept), f.receivedToKept.max() ?? .nan,
                                Levels.median(f.keptToApplied), f.keptToApplied.max() ?? .nan, f.busy, f.failed))
            if terminalKeys {
                revocations.append("| \(n) | " + String(format: "%.2f s / %.2f s |", Levels.median(f.revoked), f.revoked.max() ?? .nan))
            }
            XCTAssertTrue(f.cpuPercent.allSatisfy(\.isFinite), "CPU measured for every terminal")
            XCTAssertTrue(f.signallingPercent.allSatisfy(\.isFinite), "the signalling threads measured for every terminal")
            SuiteMode.emit("| \(n), \(sealed) | " + String(format: "%.1f | %.0f | %.2f %% / %.2f %% | %.2f %% / %.2f %% | %.2f s / %.2f s | %.2f s / %.2f s | %.3f s / %.3f s |",
                                  Levels.median(f.datagramsPerSecond), Levels.median(f.bytesPerSecond),
                                  Levels.median(f.cpuPercent), f.cpuPercent.max() ?? .nan,
                                  Levels.median(f.signallingPercent), f.signallingPercent.max() ?? .nan,
                                  Levels.median(f.kept), f.kept.max() ?? .nan, Levels.median(f.applied), f.applied.max() ?? .nan,
                                  f.delivered.min() ?? .nan, f.delivered.max() ?? .nan))
        } }
        SuiteMode.emit("")
        SuiteMode.emitTable(intro: "The way of the next version, per terminal that fetched it (typed `site.arrival`, `site.applied_at`): hops, the most fetches in a row from the publish to a terminal; from a hello naming it to the start of the fetch that brought it (a fetch answered busy is tried again a quarter second later, or at another holder), from there to the whole document in hand (the transfer), from there to kept (the check and the write with fsync), and from kept to applied (the daemon's main loop, every 100 ms, and the reload); fetches answered busy and failed, over all terminals.",
                            columns: ["terminals, sealed by", "hops", "hello → fetch: median / worst", "transfer: median / worst", "check and keep: median / worst", "kept → applied: median / worst", "busy / failed"])
        for line in steps { SuiteMode.emit(line) }
        SuiteMode.emit("")
        SuiteMode.emitTable(intro: "Revocation under terminal keys: `intercom-site revoke` of the last terminal, signed and handed to the first terminal from the administrator's host; each other terminal's `site.applied_at` of that version (the moment it puts the revoked one out of any call and shows it offline; from then on it opens nothing from it) less the publish's start. Goal (issue 53): within 2 s at every online terminal.",
                            columns: ["terminals", "revocation in force: median / worst"])
        for line in revocations { SuiteMode.emit(line) }
        SuiteMode.emit("")
    }
}
