import Calls
import Control
import Foundation
import Glibc
import Posix
import Site
import TestSupport
import XCTest

/// A site through real daemons and the administrator's real tool: terminals run by the signed
/// document, a new version reaches a terminal during a call that goes on and spreads from it to
/// the others (and to one that was off), and every kind of bad document, from the file or over a
/// transfer, is refused and counted while the last good one stays in force and on disk.
final class SiteRigTests: XCTestCase {
    private func site(_ arguments: [String]) throws -> (status: Int32, output: String) { try SiteKit.run(arguments) }
    private func document(_ rooms: CallRooms, names: [String: String] = [:], extra: String = "") -> String {
        SiteKit.document(rooms, names: names, extra: extra)
    }
    private func start(_ rooms: CallRooms, _ id: String, folder: String, own: String = "") throws -> DaemonProcess {
        try SiteKit.start(rooms, id, folder: folder, own: own)
    }
    private func sign(_ folder: String) throws { try SiteKit.sign(folder) }

    /// Version 3: roomA renamed, a notification type added, KEY_3 toggles do-not-disturb, a call
    /// lights the green LED; signed.
    private func signVersionThree(_ rooms: CallRooms, _ folder: String) throws {
        try document(rooms, names: ["rooma": "Empfang"], extra: """
            [notifications.material]
            label = "Material bringen"
            recipients = ["rooma"]
            [keys.map]
            KEY_3 = "toggle_dnd"
            [lights.map]
            in_call = { led = "green" }
            """).write(toFile: folder + "/site.toml", atomically: true, encoding: .utf8)
        try sign(folder)
    }

    /// Each kind of bad document, with the reason a terminal holding `good` refuses it: signed
    /// by another key (a thief's site of the same id, at a newer version), tampered, unsigned,
    /// `older`, cut short, oversized.
    private func badDocuments(_ rooms: CallRooms, good: Data, older: Data) throws -> [(String, Data)] {
        let thief = rooms.dir + "/thief"
        XCTAssertEqual(try site(["create", "--dir", thief, "--id", "rig-praxis", "--room", "rooma=127.0.0.1"]).status, 0)
        try document(rooms).write(toFile: thief + "/site.toml", atomically: true, encoding: .utf8)
        for _ in 0..<4 { try sign(thief) }  // version 5 under another key
        var tampered = try JSONSerialization.jsonObject(with: good) as! [String: Any]
        tampered["version"] = 9
        var unsigned = try JSONSerialization.jsonObject(with: good) as! [String: Any]
        unsigned["signature"] = ""
        return [
            ("badSignature", try Data(contentsOf: URL(fileURLWithPath: thief + "/site.json"))),
            ("badSignature", try JSONSerialization.data(withJSONObject: tampered)),
            ("unsigned", try JSONSerialization.data(withJSONObject: unsigned)),
            ("older", older),
            ("malformed", good.prefix(good.count / 2)),
            ("oversized", Data(repeating: 32, count: 600 * 1024)),
        ]
    }

    /// B cannot hand out documents here (the test holds its transfer port), so that A, hearing of
    /// B's newer version and failing to fetch it, stays behind for the site overview to show.
    func testTerminalsRunByTheSignedDocumentANewVersionAppliesInACallAndBadOnesAreRefused() throws {
        let rooms = try CallRooms(["roomA", "roomB"])
        defer { rooms.stopAll() }
        let blocker = try TCPSocket.listen(IPv4Endpoint(address: 0, port: UInt16(rooms.room("roomb").signalling)))
        let folder = rooms.dir + "/site"

        // The administrator creates the site and describes both rooms (version 2).
        let created = try site(["create", "--dir", folder, "--id", "rig-praxis", "--name", "Rig", "--room", "rooma=127.0.0.1"])
        XCTAssertEqual(created.status, 0, created.output)
        let keyMode = try FileManager.default.attributesOfItem(atPath: folder + "/administrator.key")[.posixPermissions] as? Int
        XCTAssertEqual(keyMode, 0o600)
        try document(rooms).write(toFile: folder + "/site.toml", atomically: true, encoding: .utf8)
        let signed = try site(["sign", "--dir", folder])
        XCTAssertEqual(signed.status, 0, signed.output)
        XCTAssertTrue(signed.output.contains("version 2 signed"), signed.output)

        let a = try start(rooms, "rooma", folder: folder)
        let b = try start(rooms, "roomb", folder: folder)
        let siteA = try XCTUnwrap(a.statistics().site), siteB = try XCTUnwrap(b.statistics().site)
        XCTAssertEqual(siteA.version, 2)
        XCTAssertEqual(siteA.digest, siteB.digest, "the same document on both")
        XCTAssertEqual(siteA.digest.count, 16)
        XCTAssertTrue(rooms.waitOnline("rooma", ["roomb"]), a.log)

        // A call by the document's button.
        _ = try rooms.control("rooma", .perform(.call(button: "roomb")))
        XCTAssertTrue(rooms.wait(6) { rooms.isConnected("rooma") && rooms.isConnected("roomb") }, b.log)
        let callID = rooms.status("roomb")?.call?.callID

        // Version 3 during the call: roomA renamed, a notification type added.
        try signVersionThree(rooms, folder)
        let v2 = try Data(contentsOf: URL(fileURLWithPath: "\(rooms.dir)/roomb-site.json"))
        try FileManager.default.removeItem(atPath: "\(rooms.dir)/roomb-site.json")
        try FileManager.default.copyItem(atPath: folder + "/site.json", toPath: "\(rooms.dir)/roomb-site.json")
        var reloaded: DaemonStatistics?
        let across = try AudioAcross.measure(b) {
            kill(b.process.processIdentifier, SIGHUP)
            reloaded = b.waitForStatistics(timeout: 3) { $0.reload.count == 1 }
            Thread.sleep(forTimeInterval: 1)
        }
        XCTAssertEqual(reloaded?.site?.version, 3, b.log)
        XCTAssertEqual(Set(reloaded?.reload.waitingForCallEnd ?? []), ["rooms", "notifications"], "the call keeps its rules: \(b.log)")
        print("site: version 3 applied at roomb during the call: \(across); reload \(String(describing: reloaded?.reload))")
        XCTAssertEqual(rooms.status("roomb")?.call?.callID, callID)
        XCTAssertTrue(rooms.isConnected("rooma") && rooms.isConnected("roomb"))
        across.assertUndisturbed("B's call audio across the reload")

        // The call ends: the new version's rooms and notification types apply.
        _ = try rooms.control("rooma", .perform(.hangUp))
        XCTAssertTrue(rooms.wait(5) { rooms.isIdle("roomb") })
        XCTAssertTrue(rooms.wait(3) {
            guard case .success(.rooms(let d))? = try? rooms.control("roomb", .rooms) else { return false }
            return d.rooms.first { $0.id.value == "rooma" }?.name == "Empfang"
        }, "the new name: \(b.log)")
        XCTAssertNotNil(b.waitForStatistics(timeout: 2) { $0.reload.waitingForCallEnd.isEmpty }, "stats no longer say they wait: \(b.log)")

        // Each terminal's hellos announce its software and document: A, still at version 2, is
        // behind, as B and A itself see it (typed replies; and as intercomctl site shows it).
        XCTAssertTrue(rooms.wait(3) {
            guard case .success(.site(let o))? = try? rooms.control("roomb", .site) else { return false }
            return o.terminals.first { $0.room == "rooma" }?.behind == true
        }, "B hears that A is behind: \(b.log)")
        guard case .success(.site(let fromA))? = try? rooms.control("rooma", .site) else { return XCTFail("A answers site") }
        XCTAssertEqual(fromA.terminals.map(\.room), ["rooma", "roomb"])
        XCTAssertEqual(fromA.terminals.map(\.siteVersion), [2, 3])
        XCTAssertEqual(fromA.terminals.map(\.behind), [true, false])
        XCTAssertEqual(fromA.terminals.map(\.software), [Software.version, Software.version])
        XCTAssertEqual(fromA.terminals[1].digest, try b.statistics().site?.digest, "B's digest as B's own stats show it")
        XCTAssertEqual(fromA.newestVersion, 3)
        let shown = try Command.run(Repo.builtProgram("intercomctl"), ["site", "--socket", rooms.room("rooma").socket])
        print("site: intercomctl site at rooma:\n\(shown)")
        XCTAssertTrue(shown.contains("behind: rooma"), shown)
        XCTAssertNotNil(a.waitForStatistics(timeout: 8) { ($0.site?.transfers.fetchFailed ?? 0) >= 1 },
                        "A tried to fetch version 3 from B, which does not answer: \(a.log)")

        // The administrator's tool hands version 3 to A itself.
        let published = try site(["publish", "--dir", folder, "--to", "127.0.0.1:\(rooms.room("rooma").signalling)"])
        XCTAssertEqual(published.status, 0, published.output)
        XCTAssertTrue(published.output.contains("took version 3"), published.output)
        XCTAssertEqual(a.waitForStatistics(timeout: 3) { $0.site?.version == 3 && $0.reload.count >= 1 }?.site?.transfers.offered, 1, a.log)
        _ = blocker

        // Bad documents: each refused and counted, version 3 stays in force and on disk.
        let v3 = try Data(contentsOf: URL(fileURLWithPath: folder + "/site.json"))
        let cases = try badDocuments(rooms, good: v3, older: v2)
        for (n, (reason, bytes)) in cases.enumerated() {
            try bytes.write(to: URL(fileURLWithPath: "\(rooms.dir)/roomb-site.json"))
            kill(b.process.processIdentifier, SIGHUP)
            let stats = b.waitForStatistics(timeout: 3) { $0.reload.count == 2 + n }
            XCTAssertEqual(stats?.site?.version, 3, "\(reason): \(b.log)")
            XCTAssertNotNil(stats?.site?.lastRefusal, reason)
            let kept = try Data(contentsOf: URL(fileURLWithPath: "\(rooms.dir)/roomb-site.json"))
            XCTAssertEqual(kept, v3, "\(reason): the last good document is back on disk")
        }
        let refused = try XCTUnwrap(b.statistics().site?.refused)
        print("site: refused at roomb: \(refused); last: \((try? b.statistics().site?.lastRefusal) ?? "none")")
        XCTAssertEqual(refused, ["badSignature": 2, "unsigned": 1, "older": 1, "malformed": 1, "oversized": 1])

        // A restart comes back with version 3.
        _ = rooms.stop("roomb")
        let again = try start(rooms, "roomb", folder: folder)
        XCTAssertEqual(try again.statistics().site?.version, 3, again.log)
    }

    /// Three terminals: A and B in a call, C off. The administrator hands version 3 to B alone;
    /// A fetches it from B and applies it without disturbing the call; C, started later with
    /// version 2, catches up from the others. Bad documents handed to A over a transfer are each
    /// refused with their reason and counted, while a client that connects and says nothing
    /// holds up nobody.
    func testANewVersionSpreadsFromOneTerminalToTheOthersDuringACallAndOneThatWasOffCatchesUp() throws {
        let rooms = try CallRooms(["roomA", "roomB", "roomC"])
        defer { rooms.stopAll() }
        let folder = rooms.dir + "/site"
        XCTAssertEqual(try site(["create", "--dir", folder, "--id", "rig-praxis", "--room", "rooma=127.0.0.1"]).status, 0)
        // Version 2: KEY_3 mutes the microphone (A has keys: a FIFO stands in for its input device).
        try document(rooms, extra: "[keys.map]\nKEY_3 = \"toggle_mic_mute\"\n").write(toFile: folder + "/site.toml", atomically: true, encoding: .utf8)
        try sign(folder)
        let v2 = try Data(contentsOf: URL(fileURLWithPath: folder + "/site.json"))
        try v2.write(to: URL(fileURLWithPath: "\(rooms.dir)/roomc-site.json"))  // C holds version 2 while it is off
        let fifo = rooms.dir + "/rooma-keys"
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        let leds = rooms.dir + "/rooma-leds"
        try TerminalLightsRigTests.makeLEDs(leds)
        let a = try start(rooms, "rooma", folder: folder, own: "[keys]\ndevice = \"\(fifo)\"\n[lights]\nled_dir = \"\(leds)\"\n")
        let keys = try FIFOKeyWriter(path: fifo)
        let b = try start(rooms, "roomb", folder: folder)
        XCTAssertTrue(rooms.waitOnline("rooma", ["roomb"]), a.log)
        _ = try rooms.control("rooma", .perform(.call(button: "roomb")))
        XCTAssertTrue(rooms.wait(6) { rooms.isConnected("rooma") && rooms.isConnected("roomb") }, b.log)
        let callID = rooms.status("rooma")?.call?.callID
        XCTAssertEqual(rooms.status("rooma")?.lights.count, 0, "version 2 lights nothing")

        try signVersionThree(rooms, folder)
        let v3 = try Data(contentsOf: URL(fileURLWithPath: folder + "/site.json"))
        var atA: DaemonStatistics?, spreadSeconds = 0.0
        let across = try AudioAcross.measure(a) {
            let t0 = Date()
            let published = try site(["publish", "--dir", folder, "--to", "127.0.0.1:\(rooms.room("roomb").signalling)"])
            XCTAssertEqual(published.status, 0, published.output)
            XCTAssertTrue(published.output.contains("took version 3"), published.output)
            atA = a.waitForStatistics(timeout: 5) { $0.site?.version == 3 }
            spreadSeconds = Date().timeIntervalSince(t0)
            XCTAssertEqual(atA?.site?.transfers.fetched, 1, "A fetched version 3 from B: \(a.log)")
            XCTAssertEqual(try b.statistics().site?.transfers.served, 1, "B served it")
            XCTAssertEqual(Set(a.waitForStatistics(timeout: 2) { $0.reload.count == 1 }?.reload.waitingForCallEnd ?? []), ["rooms", "notifications"],
                           "A's call keeps its rules: \(a.log)")
            Thread.sleep(forTimeInterval: 1)
        }
        print(String(format: "site spread: version 3 handed to B, at A %.2f s later (fetched from B); A's call audio ", spreadSeconds) + "\(across)")
        XCTAssertEqual(rooms.status("rooma")?.call?.callID, callID, "the same call")
        across.assertUndisturbed("A's call audio across the new version")
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: "\(rooms.dir)/rooma-site.json")), v3, "A kept version 3 on disk, byte for byte")
        // The keys apply at once, in the call: KEY_3 now toggles do-not-disturb, not the microphone.
        XCTAssertTrue((try a.statistics()).reload.applied.contains("keys.map"), a.log)
        keys.press(2 + 2)  // KEY_3
        XCTAssertTrue(rooms.wait(3) { rooms.status("rooma")?.doNotDisturb == true }, "KEY_3 by version 3's map: \(a.log)")
        XCTAssertEqual(rooms.status("rooma")?.mute.microphone, false, "not by version 2's")
        // And the lights: the call lights green now.
        XCTAssertTrue(rooms.wait(3) { rooms.status("rooma")?.lights.first { $0.led == "green" }?.state == "in_call" },
                      "green shows the call: \(String(describing: rooms.status("rooma")?.lights))")
        XCTAssertEqual(try String(contentsOfFile: leds + "/green/brightness", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines), "255")

        // C was off: started with version 2, it catches up from the others.
        let t1 = Date()
        let c = try start(rooms, "roomc", folder: folder)
        let atC = try XCTUnwrap(c.waitForStatistics(timeout: 8) { $0.site?.version == 3 && $0.site?.appliedAt != nil }?.site, c.log)
        XCTAssertEqual(atC.transfers.fetched, 1, c.log)
        print(String(format: "site spread: C, started with version 2, held version 3 %.2f s after its start", Date().timeIntervalSince(t1)))
        // Its way here, step by step: heard of in a hello, fetched from a terminal, kept, applied.
        let way = try XCTUnwrap(atC.arrival, "C says how version 3 came")
        print("site spread: C's version 3: \(way), applied at \(atC.appliedAt ?? .nan)")
        XCTAssertEqual(way.version, 3)
        XCTAssertTrue(["rooma", "roomb"].contains(way.from ?? ""), "from a terminal: \(String(describing: way.from))")
        let steps = [way.heard, way.fetchStarted, way.kept, atC.appliedAt].compactMap { $0 }
        XCTAssertEqual(steps.count, 4, "every step timed: \(way)")
        XCTAssertEqual(steps, steps.sorted(), "in order: \(way)")

        // Bad documents handed to A, while a client that connected and says nothing waits: each
        // refused with its reason, counted, and version 3 stays in force and on disk.
        var silent: TCPSocket? = try TCPSocket.connect(to: IPv4Endpoint.loopback(port: UInt16(rooms.room("rooma").signalling)), deadline: MonotonicClock.seconds() + 2)
        let cases = try badDocuments(rooms, good: v3, older: v2)
        let endpointA = IPv4Endpoint.loopback(port: UInt16(rooms.room("rooma").signalling))
        for (reason, bytes) in cases {
            let reply = SiteTransfer.exchange(.offer(site: "rig-praxis", document: Array(bytes)), with: endpointA, timeout: 3)
            XCTAssertEqual(try reply.get(), .refused(reason), reason)
        }
        XCTAssertEqual(try SiteTransfer.exchange(.offer(site: "other-praxis", document: Array(v3)), with: endpointA, timeout: 3).get(), .otherSite)
        XCTAssertEqual(try SiteTransfer.exchange(.get(site: "rig-praxis"), with: endpointA, timeout: 3).get(), .document(Array(v3)), "A hands out version 3")
        let garbage = try TCPSocket.connect(to: endpointA, deadline: MonotonicClock.seconds() + 2)
        try garbage.sendAll(Array("GET / HTTP/1.0\r\n\r\n".utf8), deadline: MonotonicClock.seconds() + 2)
        garbage.shutdownWrite()
        let answer = try garbage.receiveAll(limit: 1000, deadline: MonotonicClock.seconds() + 3)
        guard case .success(.badRequest(let why)) = SiteTransfer.Reply.decode(answer) else { return XCTFail("not a transfer: \(answer)") }
        print("site spread: a request that is not a transfer's: \(why)")
        XCTAssertNotNil(silent)
        silent = nil  // it leaves having said nothing: counted too
        let stats = try XCTUnwrap(a.waitForStatistics(timeout: 3) { ($0.site?.transfers.badRequests ?? 0) >= 3 }?.site, a.log)
        print("site spread: refused at A: \(stats.refused); transfers \(stats.transfers)")
        XCTAssertEqual(stats.version, 3)
        XCTAssertEqual(stats.refused, ["badSignature": 2, "unsigned": 1, "older": 1, "malformed": 1, "oversized": 1])
        XCTAssertEqual(stats.transfers.offered, 6)
        XCTAssertEqual(stats.transfers.badRequests, 3, "another site's, one not a transfer's, and the client that said nothing")
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: "\(rooms.dir)/rooma-site.json")), v3, "version 3 stays on disk")

        // Eight clients that say nothing hold every transfer A takes at once: the ninth is
        // answered busy, counted as such, and asks again once they are dropped.
        var holding: [TCPSocket] = try (0..<8).map { _ in try TCPSocket.connect(to: endpointA, deadline: MonotonicClock.seconds() + 2) }
        // (A's server accepts in the order they connected: the ninth comes after them.)
        XCTAssertEqual(try SiteTransfer.exchange(.get(site: "rig-praxis"), with: endpointA, timeout: 3).get(), .busy)
        XCTAssertEqual(try XCTUnwrap(a.statistics().site).transfers.answeredBusy, 1)
        XCTAssertEqual(holding.count, 8)
        holding.removeAll()
        XCTAssertTrue(rooms.wait(3) { (try? SiteTransfer.exchange(.get(site: "rig-praxis"), with: endpointA, timeout: 1).get()) == .document(Array(v3)) },
                      "served again once they left")
        XCTAssertEqual(rooms.status("rooma")?.call?.callID, callID, "and the call goes on")
    }

    /// Re-keying (docs/site.md): `intercom-site rekey` replaces the administrator's key, and one
    /// published version moves every terminal to the new key without touching it (each keeps
    /// the first administrator.pub), across a restart too; what the retired key signs is refused
    /// and counted everywhere; a terminal installed with the new administrator.pub takes the
    /// same documents.
    func testTheAdministratorsKeyIsReplacedWithoutTouchingATerminalAndTheRetiredOneSignsNothingMore() throws {
        let rooms = try CallRooms(["roomA", "roomB", "roomC"], soundCards: false)
        defer { rooms.stopAll() }
        let folder = rooms.dir + "/site", firstPublic = rooms.dir + "/first-administrator.pub"
        try SiteKit.create(folder, document: document(rooms))  // versions 1 and 2
        try FileManager.default.copyItem(atPath: folder + "/administrator.pub", toPath: firstPublic)
        // What a thief of the administrator's old machine holds: the key about to be retired.
        let thief = rooms.dir + "/thief"
        try FileManager.default.createDirectory(atPath: thief, withIntermediateDirectories: true)
        for file in ["administrator.key", "administrator.pub", "site.toml"] {
            try FileManager.default.copyItem(atPath: folder + "/" + file, toPath: thief + "/" + file)
        }
        for id in ["rooma", "roomb"] { try SiteKit.start(rooms, id, folder: folder, administratorKey: firstPublic) }
        func site(_ id: String) -> DaemonStatistics.Site? { try? rooms.daemons[id]?.statistics().site }
        let first = try XCTUnwrap(try rooms.daemons["rooma"]!.statistics().site?.administrator)
        XCTAssertEqual(site("roomb")?.administrator, first)

        let rekeyed = try SiteKit.run(["rekey", "--dir", folder])
        XCTAssertEqual(rekeyed.status, 0, rekeyed.output)
        XCTAssertTrue(rekeyed.output.contains("version 3 signed with the handover"), rekeyed.output)
        XCTAssertFalse(FileManager.default.fileExists(atPath: folder + "/administrator.key.new"))
        let keyMode = try FileManager.default.attributesOfItem(atPath: folder + "/administrator.key")[.posixPermissions] as? Int
        XCTAssertEqual(keyMode, 0o600)
        let published = try SiteKit.run(["publish", "--dir", folder])
        XCTAssertEqual(published.status, 0, published.output)
        for id in ["rooma", "roomb"] {
            XCTAssertNotNil(rooms.daemons[id]!.waitForStatistics(timeout: 5) { $0.site?.version == 3 && $0.site?.appliedAt != nil },
                            "\(id) took the version that hands the key over")
        }
        let second = try XCTUnwrap(site("rooma")?.administrator)
        XCTAssertNotEqual(second, first, "the terminal trusts the new key")
        XCTAssertEqual(site("roomb")?.administrator, second)
        print("re-keying: administrator key \(first) handed over to \(second) at every terminal by one published version")

        // The retired key signs version 4: refused and counted at each terminal, version 3 stays.
        try FileManager.default.copyItem(atPath: "\(rooms.dir)/rooma-site.json", toPath: thief + "/site.json")
        let forged = try SiteKit.run(["sign", "--dir", thief])
        XCTAssertEqual(forged.status, 0, forged.output)
        XCTAssertTrue(forged.output.contains("version 4 signed"), forged.output)
        func refusedWithRetiredKey(_ id: String, _ count: Int) -> Bool {
            rooms.daemons[id]!.waitForStatistics(timeout: 3) { ($0.site?.refused["badSignature"] ?? 0) >= count } != nil
        }
        let pushed = try SiteKit.run(["publish", "--dir", thief])
        XCTAssertNotEqual(pushed.status, 0, "no terminal takes it: \(pushed.output)")
        for id in ["rooma", "roomb"] {
            XCTAssertTrue(refusedWithRetiredKey(id, 1), "\(id) refuses the retired key's document")
            XCTAssertEqual(site(id)?.version, 3)
        }

        // roomB restarts with the first administrator.pub: the kept document leads it to the new
        // key again, and the retired key is still refused.
        XCTAssertEqual(rooms.stop("roomb"), 0)
        try SiteKit.start(rooms, "roomb", folder: folder, administratorKey: firstPublic)
        XCTAssertEqual(site("roomb")?.administrator, second, "after a restart, the new key")
        XCTAssertNotEqual(try SiteKit.run(["publish", "--dir", thief, "--to", "127.0.0.1:\(rooms.room("roomb").signalling)"]).status, 0)
        XCTAssertTrue(refusedWithRetiredKey("roomb", 1), "the restarted terminal refuses the retired key's document")

        // A terminal installed now gets the new administrator.pub and takes the site as it is.
        try SiteKit.start(rooms, "roomc", folder: folder)
        XCTAssertEqual(site("roomc")?.version, 3)
        XCTAssertEqual(site("roomc")?.administrator, second)

        // The administrator goes on with the new key: version 4 reaches all three.
        try document(rooms, names: ["rooma": "Empfang"]).write(toFile: folder + "/site.toml", atomically: true, encoding: .utf8)
        try sign(folder)
        XCTAssertEqual(try SiteKit.run(["publish", "--dir", folder]).status, 0)
        for id in ["rooma", "roomb", "roomc"] {
            XCTAssertNotNil(rooms.daemons[id]!.waitForStatistics(timeout: 8) { $0.site?.version == 4 && $0.site?.appliedAt != nil },
                            "\(id) took version 4, signed by the new key")
        }
    }
}
