import CallStore
import Calls
import Foundation
import Glibc
import XCTest

final class HistoryStoreTests: XCTestCase {
    private var directory = ""
    private var path: String { directory + "/history.json" }

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "callstore-\(getpid())-\(UInt32.random(in: .min ... .max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        _ = chmod(directory, 0o700)
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func room(_ s: String) -> RoomID { RoomID(s)! }

    private func entry(_ n: UInt64, direction: HistoryEntry.Direction = .incoming, outcome: CallOutcome = .finished,
                       reason: DeclineReason? = nil, started: Double? = nil) -> HistoryEntry {
        HistoryEntry(callID: CallID(n), direction: direction, caller: room("room-\(n % 5)"),
                     participants: [Participant(room: room("kitchen"), status: .declined(.doNotDisturb)),
                                    Participant(room: room("office"), status: .connected)],
                     outcome: outcome, reason: reason, started: started ?? Double(n) * 10, ended: (started ?? Double(n) * 10) + 3)
    }

    private func files() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
    }

    func testEntriesSurviveAReopenExactly() throws {
        let written = [entry(1, outcome: .missed), entry(2, direction: .outgoing, outcome: .notReached),
                       entry(3, outcome: .declined, reason: .doNotDisturb), entry(4)]
        let store = try HistoryStore(path: path)
        XCTAssertEqual(store.all(), [])
        for e in written { try store.append(e) }
        XCTAssertEqual(store.all(), written)

        let again = try HistoryStore(path: path)
        XCTAssertNil(again.loadProblem)
        XCTAssertEqual(again.all(), written)
        XCTAssertEqual(try files(), ["history.json"], "no temporary file is left behind")
    }

    /// One shape: the file holds each entry and notification exactly as the control socket and the
    /// site service send it (`Wire`), not a second spelling of its own.
    func testTheFileHoldsEntriesInTheirWireForm() throws {
        let n = StaffNotification(id: NotificationID(0xBEEF), sender: room("kitchen"), recipients: [room("office")], type: "material",
                                  label: "Material", text: "Bitte Material bringen", priority: .urgent, tone: .gong, readAloud: true, sent: 5)
        let record = NotificationRecord(notification: n, direction: .incoming, received: 6, heard: 6.5)
        let store = try HistoryStore(path: path)
        store.record(record)
        try store.append(entry(0x2A, outcome: .declined, reason: .doNotDisturb))
        let file = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
        XCTAssertEqual(file["format"] as? Int, 2)
        let entries = try XCTUnwrap(file["entries"] as? [Any])
        let notifications = try XCTUnwrap(file["notifications"] as? [Any])
        func same(_ stored: Any, _ wire: some Encodable) throws {
            let a = try JSONSerialization.data(withJSONObject: stored, options: .sortedKeys)
            let b = try JSONSerialization.data(withJSONObject: JSONSerialization.jsonObject(with: Data(Wire.encode(wire))), options: .sortedKeys)
            XCTAssertEqual(String(decoding: a, as: UTF8.self), String(decoding: b, as: UTF8.self))
        }
        try same(entries[0], entry(0x2A, outcome: .declined, reason: .doNotDisturb))
        try same(notifications[0], record)
        XCTAssertEqual((entries[0] as? [String: Any])?["call_id"] as? String, "2a")
        XCTAssertEqual((notifications[0] as? [String: Any])?["notification_id"] as? String, "beef")
    }

    /// A history written before 0.10 (format 1, Swift's own spelling) is read whole and written
    /// again in the wire form with the next change.
    func testAFormatOneFileIsReadAndRewritten() throws {
        let old = #"""
        {"entries":[{"callID":{"value":42},"caller":"kitchen","direction":"incoming","ended":13,"outcome":"declined",
        "participants":[{"room":"kitchen","status":{"declined":{"_0":"do_not_disturb"}}},{"room":"office","status":{"connected":{}}}],
        "reason":"do_not_disturb","started":10},
        {"acknowledged":false,"callID":{"value":43},"caller":"office","direction":"incoming","ended":21,"kind":"emergency","outcome":"missed",
        "participants":[{"room":"kitchen","status":{"unavailable":{}}}],"started":20}],
        "format":1,
        "notifications":[{"acknowledged":false,"acknowledgedBy":[],"delivered":[],"direction":"incoming","heard":6.5,"held":false,
        "notification":{"id":{"value":48879},"label":"Material","priority":"urgent","readAloud":true,"recipients":["office"],
        "sender":"kitchen","sent":5,"text":"Bitte","tone":"gong","type":"material"},"received":6}]}
        """#
        try Data(old.utf8).write(to: URL(fileURLWithPath: path))
        let store = try HistoryStore(path: path)
        XCTAssertNil(store.loadProblem)
        var missed = HistoryEntry(callID: CallID(43), direction: .incoming, caller: room("office"),
                                  participants: [Participant(room: room("kitchen"), status: .unavailable)], outcome: .missed,
                                  started: 20, ended: 21, acknowledged: false, kind: .emergency)
        missed.acknowledged = false
        XCTAssertEqual(store.all(), [HistoryEntry(callID: CallID(42), direction: .incoming, caller: room("kitchen"),
                                                  participants: [Participant(room: room("kitchen"), status: .declined(.doNotDisturb)),
                                                                 Participant(room: room("office"), status: .connected)],
                                                  outcome: .declined, reason: .doNotDisturb, started: 10, ended: 13), missed])
        XCTAssertEqual(store.notifications().map(\.notification.text), ["Bitte"])
        XCTAssertEqual(store.notifications().first?.id, NotificationID(48879))
        try store.append(entry(44))
        let again = try HistoryStore(path: path)
        XCTAssertNil(again.loadProblem)
        XCTAssertEqual(again.all().count, 3)
        XCTAssertEqual(again.notifications(), store.notifications())
        XCTAssertTrue(try String(contentsOfFile: path, encoding: .utf8).contains(#""format":2"#))
    }

    func testHistoryKeepsTheNewestEntriesUpToItsCapacity() throws {
        let capacity = 7
        let store = try HistoryStore(path: path, capacity: capacity)
        let total = capacity * 3 + 2
        for n in 1...total { try store.append(entry(UInt64(n))) }
        let expected = ((total - capacity + 1)...total).map { entry(UInt64($0)) }
        XCTAssertEqual(store.all(), expected)
        XCTAssertEqual(try HistoryStore(path: path, capacity: capacity).all(), expected)
        // A smaller capacity on the next start trims to the newest.
        XCTAssertEqual(try HistoryStore(path: path, capacity: 2).all(), Array(expected.suffix(2)))
        XCTAssertEqual(HistoryStore.defaultCapacity, 500)
    }

    func testQueriesNewestAndMissedSince() throws {
        let store = try HistoryStore(path: path)
        let es = [entry(1, outcome: .missed, started: 100), entry(2, outcome: .finished, started: 200),
                  entry(3, direction: .outgoing, outcome: .notReached, started: 300),
                  entry(4, outcome: .declined, reason: .doNotDisturb, started: 400), entry(5, outcome: .missed, started: 500)]
        for e in es { try store.append(e) }
        XCTAssertEqual(store.newest(2), [es[4], es[3]])
        XCTAssertEqual(store.newest(99), es.reversed())
        XCTAssertEqual(store.newest(0), [])
        XCTAssertEqual(store.missed(since: 0), [es[4], es[3], es[0]])
        XCTAssertEqual(store.missed(since: 400), [es[4], es[3]])
        XCTAssertEqual(store.missed(since: 501), [])
    }

    func testAgeLimitAcknowledgementAndEraseSurviveAReopen() throws {
        let day = 86400.0
        let now = 1_800_000_000.0
        var missed = entry(3, outcome: .missed, started: now - 2 * day)
        missed.acknowledged = false
        let es = [entry(1, started: now - 40 * day), missed, entry(2, started: now - 31 * day), entry(4, started: now - day)]
        let store = try HistoryStore(path: path, maxAge: 30 * day)
        for e in es { store.record(e) }
        XCTAssertEqual(store.prune(now: now), 2, "both entries older than 30 days, the late one too")
        store.acknowledge([CallID(3)])
        try store.persist()
        var acknowledged = missed
        acknowledged.acknowledged = true
        XCTAssertEqual(try HistoryStore(path: path, maxAge: 30 * day).all(), [acknowledged, es[3]])
        XCTAssertEqual(store.prune(now: now), 0)
        store.erase()
        try store.persist()
        XCTAssertEqual(try HistoryStore(path: path).all(), [])
        // Without an age limit nothing is pruned.
        try HistoryStore(path: path).append(es[0])
        XCTAssertEqual(try HistoryStore(path: path).prune(now: now), 0)
    }

    func testWrittenFileIsReadableByOwnerAndGroupOnly() throws {
        let old = umask(0) // the store must not depend on the process umask
        defer { umask(old) }
        let store = try HistoryStore(path: path)
        try store.append(entry(1))
        var s = stat()
        XCTAssertEqual(stat(path, &s), 0)
        XCTAssertEqual(s.st_mode & 0o777, 0o640)
    }

    func testGarbageOrTruncatedFileIsMovedAsideAndReported() throws {
        // A valid file cut in the middle, and plain garbage.
        let store = try HistoryStore(path: path)
        for n in 1...3 { try store.append(entry(UInt64(n))) }
        let valid = try Data(contentsOf: URL(fileURLWithPath: path))
        for content in [valid.prefix(valid.count / 2), Data("\u{0}\u{7}garbage{{".utf8), Data()] {
            try content.write(to: URL(fileURLWithPath: path))
            let recovered = try HistoryStore(path: path)
            let problem = try XCTUnwrap(recovered.loadProblem)
            XCTAssertEqual(recovered.all(), [])
            XCTAssertEqual(problem.path, path)
            XCTAssertTrue(problem.movedTo.hasPrefix(path + ".corrupt-"), problem.movedTo)
            XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: problem.movedTo)), content, "kept for a person to inspect")
            XCTAssertFalse(FileManager.default.fileExists(atPath: path))
            XCTAssertTrue(problem.description.contains(path) && problem.description.contains(problem.movedTo), problem.description)
            XCTAssertFalse(problem.reason.isEmpty)
            // The store works on after recovery.
            try recovered.append(entry(9))
            XCTAssertEqual(try HistoryStore(path: path).all(), [entry(9)])
        }
        XCTAssertEqual(try files().filter { $0.contains(".corrupt-") }.count, 3, "each bad file kept under its own name")
    }

    func testUnusableDirectoryIsAnErrorNamingThePathAndReason() throws {
        let missing = directory + "/no-such-dir/history.json"
        XCTAssertThrowsError(try HistoryStore(path: missing)) { error in
            let e = error as? StoreError
            XCTAssertEqual(e?.path, directory + "/no-such-dir")
            XCTAssertTrue(e?.problem.contains(String(cString: strerror(ENOENT))) ?? false, "\(error)")
        }
        guard geteuid() != 0 else { return } // root ignores permission bits
        XCTAssertEqual(chmod(directory, 0o500), 0)
        XCTAssertThrowsError(try HistoryStore(path: path)) { error in
            XCTAssertTrue("\(error)".contains(String(cString: strerror(EACCES))), "\(error)")
        }
    }

    func testUnreadableFileIsAnErrorNotAMoveAside() throws {
        XCTAssertEqual(mkdir(path, 0o700), 0) // a directory where the file should be: read fails
        XCTAssertThrowsError(try HistoryStore(path: path)) { error in
            XCTAssertEqual((error as? StoreError)?.path, path)
            XCTAssertTrue("\(error)".contains(String(cString: strerror(EISDIR))), "\(error)")
        }
        XCTAssertTrue(FileManager.default.fileExists(atPath: path))
    }

    func testRecordTouchesOnlyMemoryAndTheWriterThreadWritesTheNewestOnce() throws {
        let store = try HistoryStore(path: path)
        let failures = FailureLog()
        let writer = try StoreWriter { failures.add($0) }
        for n in 1...3 { store.record(entry(UInt64(n))) }
        XCTAssertEqual(store.all().count, 3, "readers see a recorded entry at once")
        XCTAssertFalse(FileManager.default.fileExists(atPath: path), "record does not write")
        for _ in 0..<5 { writer.persist(store) }
        writer.stop()
        XCTAssertEqual(try HistoryStore(path: path).all(), (1...3).map { entry(UInt64($0)) }, "stop writes what was asked for")
        XCTAssertEqual(failures.all, [])
        XCTAssertLessThanOrEqual(writer.statistics.written, 5)
        // Nothing new: persisting again leaves the file alone (same inode, no rename).
        var before = stat(), after = stat()
        XCTAssertEqual(stat(path, &before), 0)
        try store.persist()
        XCTAssertEqual(stat(path, &after), 0)
        XCTAssertEqual(before.st_ino, after.st_ino, "an unchanged history is not written again")
    }

    func testAFailedBackgroundWriteIsReportedAndTheNextRequestWritesTheEntry() throws {
        let store = try HistoryStore(path: path)
        let failures = FailureLog()
        let writer = try StoreWriter { failures.add($0) }
        XCTAssertEqual(mkdir(path, 0o700), 0)  // a directory where the file goes: the rename fails
        store.record(entry(1))
        writer.persist(store)
        let deadline = Date().addingTimeInterval(5)
        while failures.all.isEmpty, Date() < deadline { usleep(1000) }
        XCTAssertEqual(failures.all.first?.path, path, "the failure names the file: \(failures.all)")
        XCTAssertEqual(store.all(), [entry(1)], "the entry is kept in memory")
        XCTAssertEqual(rmdir(path), 0)
        store.record(entry(2))
        writer.persist(store)
        writer.stop()
        XCTAssertEqual(try HistoryStore(path: path).all(), [entry(1), entry(2)], "the next write has both")
        XCTAssertEqual(writer.statistics.failed, 1)
    }
}

private final class FailureLog: @unchecked Sendable {
    private let lock = NSLock()
    private var errors: [StoreError] = []
    func add(_ e: StoreError) { lock.withLock { errors.append(e) } }
    var all: [StoreError] { lock.withLock { errors } }
}
