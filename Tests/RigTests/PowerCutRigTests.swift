import Calls
import Control
import Foundation
import SignalTools
import TestSupport
import XCTest

/// Issue 55's fault "a power cut during the writing of the history and the state, repeated":
/// B's every fsync made slower (the preloaded FsyncDelay library) so that its writes take a
/// while, and B killed with SIGKILL at a random moment just after a call has ended, a
/// notification has arrived and its read-aloud switch has changed (each a write), round after round.
final class PowerCutRigTests: XCTestCase {
    /// After every cut B starts again with whole files: everything it held at its previous start
    /// is still there, nothing twice, and it goes on taking calls and notifications. No
    /// notification is lost: B acknowledges one only once it is on disk, so one the cut caught
    /// before its write comes again from A after the restart. A call's history entry the cut
    /// caught before its write is gone (nobody sends a call again): counted and printed.
    func testPowerCutsDuringStoreWritesLeaveWholeFilesAndLoseNothingWritten() throws {
        try Rig.require()
        let library = Repo.builtProgram("libFsyncDelay.so")
        XCTAssertTrue(FileManager.default.fileExists(atPath: library), "the test library is built: \(library)")
        let rooms = try CallRooms(["roomA", "roomB"])
        defer { rooms.stopAll() }
        try rooms.start("rooma", extra: "[notifications.material]\nrecipients = [\"roomb\"]\ntext = \"Bitte Material bringen\"")
        let environment = ["LD_PRELOAD": library, "FSYNC_DELAY_MS": "30"]
        var random = SplitMix64(seed: 5505)
        func held() -> (calls: [String], notifications: [String]) {
            (rooms.history("roomb").map { "\($0.callID)" },
             rooms.notifications("roomb").filter { $0.direction == .incoming }.map { "\($0.notification.id)" })
        }
        var before: (calls: [String], notifications: [String]) = ([], [])
        let rounds = 8
        var cutsMs: [Int] = []
        var sent: [String] = []
        for round in 0...rounds {
            let b = try rooms.start("roomb", environment: environment)
            let now = held()
            XCTAssertEqual(Set(now.calls).count, now.calls.count, "round \(round): no call twice in B's history")
            XCTAssertEqual(Set(now.notifications).count, now.notifications.count, "round \(round): no notification twice")
            XCTAssertTrue(Set(before.calls).isSubset(of: Set(now.calls)), "round \(round): every call B held before the cut is still there")
            XCTAssertTrue(Set(before.notifications).isSubset(of: Set(now.notifications)), "round \(round): every notification B held before is still there")
            before = now
            guard round < rounds else { break }

            XCTAssertTrue(rooms.waitOnline("rooma", ["roomb"]), "round \(round): B online at A")
            _ = try rooms.control("rooma", .perform(.call(button: "roomb")))
            XCTAssertTrue(rooms.wait(8) { rooms.isConnected("roomb") }, "round \(round): B answers")
            _ = try rooms.control("rooma", .perform(.hangUp))
            XCTAssertTrue(rooms.wait(5) { rooms.isIdle("roomb") }, "round \(round): the call ends at B")
            guard case .success(.notificationSent(let id, _))? = try? rooms.control("rooma", .perform(.notify(type: "material"))) else {
                return XCTFail("round \(round): A sends the notification")
            }
            sent.append("\(id)")
            // Arrived: B's engine has it (A's notifications of earlier rounds may come again first).
            XCTAssertTrue(rooms.wait(5) { rooms.notifications("roomb").contains { $0.id == id && $0.direction == .incoming } },
                          "round \(round): the notification arrives")
            // A state write (read-aloud, not do-not-disturb: kept on, that would decline the next round's call).
            _ = try rooms.control("roomb", .perform(.setReadAloud(round % 2 == 0)))
            let cut = Int.random(in: 0...80, using: &random)
            cutsMs.append(cut)
            usleep(UInt32(cut * 1000))
            kill(b.process.processIdentifier, SIGKILL)
            b.process.waitUntilExit()
        }
        // A sends again what B did not acknowledge (B acknowledges only what is on disk).
        XCTAssertTrue(rooms.wait(15) { Set(held().notifications).isSuperset(of: sent) }, "every notification reaches B's disk in the end")
        XCTAssertTrue(rooms.wait(5) { rooms.notifications("rooma").filter { $0.direction == .outgoing && $0.delivered == [RoomID("roomb")!] }.count == rounds },
                      "A shows each delivered")
        let after = held()
        let lostCalls = rounds - after.calls.count
        print("power cuts: \(rounds) cuts at \(cutsMs) ms after the last change; B holds \(after.calls.count) of \(rounds) calls "
              + "(\(lostCalls) caught before their write) and \(after.notifications.count) of \(rounds) notifications")
        XCTAssertEqual(Set(after.notifications), Set(sent), "every notification once, none lost")
        XCTAssertEqual(after.notifications.count, rounds, "none twice")
        XCTAssertLessThanOrEqual(after.calls.count, rounds, "no call made up")
        XCTAssertGreaterThan(after.calls.count, 0, "writes that finished before a cut are kept")
        // B still works after all that: a call and a notification are taken and kept.
        _ = try rooms.control("rooma", .perform(.notify(type: "material")))
        XCTAssertTrue(rooms.wait(5) { rooms.notifications("roomb").filter { $0.direction == .incoming }.count == after.notifications.count + 1 },
                      "a notification after the last restart arrives and is kept")
    }
}

/// Issue 55's fault "a power cut during the writing of the site's last good configuration,
/// repeated": B keeps each new site version it fetches from A (every fsync slowed by the preloaded
/// FsyncDelay library, so that the write takes a while), and is killed with SIGKILL while it
/// writes (its temporary file is there) or just after, round after round.
final class SiteDocumentPowerCutRigTests: XCTestCase {
    /// After every cut B's kept document is, byte for byte, the old version or the new one; B
    /// starts with it (nothing refused, never a version older than the one on disk), the
    /// temporary file the cut left is gone, and B catches up with the newest version from A.
    func testPowerCutsWhileKeepingTheSiteDocumentLeaveTheOldOrTheNewOneWhole() throws {
        try Rig.require()
        let library = Repo.builtProgram("libFsyncDelay.so")
        XCTAssertTrue(FileManager.default.fileExists(atPath: library), "the test library is built: \(library)")
        let rooms = try CallRooms(["roomA", "roomB"])
        defer { rooms.stopAll() }
        let folder = rooms.dir + "/site"
        try SiteKit.create(folder, document: SiteKit.document(rooms))
        var versions: [UInt64: Data] = [2: try Data(contentsOf: URL(fileURLWithPath: folder + "/site.json"))]
        try SiteKit.start(rooms, "rooma", folder: folder)
        let a = rooms.room("rooma")
        let kept = "\(rooms.dir)/roomb-site.json", leftoverPrefix = ".roomb-site.json.tmp-"
        func leftovers() -> [String] {
            ((try? FileManager.default.contentsOfDirectory(atPath: rooms.dir)) ?? []).filter { $0.hasPrefix(leftoverPrefix) }
        }
        let fsyncMs = 200
        let environment = ["LD_PRELOAD": library, "FSYNC_DELAY_MS": "\(fsyncMs)"]
        var random = SplitMix64(seed: 5506)
        var newest: UInt64 = 2, onDisk: UInt64 = 2
        var cuts: [(ms: Int, landed: String)] = []
        let rounds = 8
        for round in 0...rounds {
            let b = try SiteKit.start(rooms, "roomb", folder: folder, environment: environment)
            let started = try XCTUnwrap(b.waitForStatistics(timeout: 10) { $0.site?.appliedAt != nil }?.site, "round \(round): B applies a document: \(b.log)")
            XCTAssertTrue(started.refused.isEmpty, "round \(round): B's kept document is whole: refused \(started.refused)")
            XCTAssertGreaterThanOrEqual(started.version, onDisk, "round \(round): B starts with the version on its disk, or newer")
            XCTAssertEqual(leftovers(), [], "round \(round): the temporary file the cut left is removed at start")
            XCTAssertNotNil(b.waitForStatistics(timeout: 20) { $0.site?.version == newest && $0.site?.appliedAt != nil },
                            "round \(round): B catches up with version \(newest) from A: \(b.log)")
            guard round < rounds else { break }

            // A new version (B's room renamed), handed to A; B hears of it, fetches it and keeps it.
            newest += 1
            try SiteKit.document(rooms, names: ["roomb": "Labor \(round)"]).write(toFile: folder + "/site.toml", atomically: true, encoding: .utf8)
            try SiteKit.sign(folder)
            versions[newest] = try Data(contentsOf: URL(fileURLWithPath: folder + "/site.json"))
            let published = try SiteKit.run(["publish", "--dir", folder, "--to", "127.0.0.1:\(a.signalling)"])
            XCTAssertEqual(published.status, 0, published.output)
            let deadline = Date().addingTimeInterval(20)
            while leftovers().isEmpty, Date() < deadline { usleep(1_000) }
            XCTAssertFalse(leftovers().isEmpty, "round \(round): B starts writing version \(newest): \(b.log)")
            // Half the cuts within the file's fsync (mid-write), half after its rename. (B may
            // begin before `publish` returns: A announces the version as soon as it holds it.)
            let cut = round % 2 == 0 ? Int.random(in: 0...(fsyncMs * 4 / 10), using: &random)
                                     : Int.random(in: (fsyncMs * 3 / 2)...(fsyncMs * 3), using: &random)
            usleep(UInt32(cut * 1000))
            let midWrite = !leftovers().isEmpty
            kill(b.process.processIdentifier, SIGKILL)
            b.process.waitUntilExit()
            let bytes = try Data(contentsOf: URL(fileURLWithPath: kept))
            onDisk = try XCTUnwrap(versions.first { $0.value == bytes }?.key, "round \(round): the kept document is a whole version, byte for byte")
            XCTAssertTrue([newest - 1, newest].contains(onDisk), "round \(round): the old version or the new one, not \(onDisk)")
            cuts.append((cut, midWrite && !leftovers().isEmpty ? "mid-write" : onDisk == newest ? "after" : "before"))
        }
        print("site document power cuts: \(rounds) cuts (ms after B began writing: where they landed): "
              + cuts.map { "\($0.ms): \($0.landed)" }.joined(separator: ", "))
        XCTAssertTrue(cuts.contains { $0.landed == "mid-write" }, "some cuts caught B mid-write")
        XCTAssertTrue(cuts.contains { $0.landed == "after" }, "some came after the new version was whole")
    }
}
