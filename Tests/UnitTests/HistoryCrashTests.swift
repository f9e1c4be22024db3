import CallStore
import Calls
import Foundation
import Glibc
import XCTest

/// A writer process SIGKILLed at random moments never leaves a history that fails to load or
/// that differs from a prefix of what it wrote.
final class HistoryCrashTests: XCTestCase {
    private var directory = ""

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "callstore-crash-\(getpid())-\(UInt32.random(in: .min ... .max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Same as Tests/CallStoreCrashWriter/CrashEntry.swift.
    private func expected(_ n: UInt64) -> HistoryEntry {
        let rooms = (UInt64(0)..<4).map { RoomID("room-\((n + $0) % 9)")! }
        return HistoryEntry(callID: CallID(n), direction: n % 2 == 0 ? .incoming : .outgoing, caller: rooms[0],
                            participants: rooms.dropFirst().map { Participant(room: $0, status: .connected) },
                            outcome: .finished, started: Double(n), ended: Double(n) + 0.5)
    }

    private var writerBinary: String {
        let dir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for candidate in [dir, dir.deletingLastPathComponent()] {
            let path = candidate.appendingPathComponent("callstore-crash-writer").path
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        return dir.appendingPathComponent("callstore-crash-writer").path
    }

    func testKilledWriterLeavesALoadablePrefixOfWhatItWrote() throws {
        let path = directory + "/history.json"
        let capacity = 40 // small, so most kills land while older entries are being dropped too
        let runs = 20
        var lastID: UInt64 = 0
        var killedMidWrite = 0
        var killedBeforeRename = 0
        for run in 1...runs {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: writerBinary)
            process.arguments = [path, String(capacity)]
            let out = Pipe()
            let err = Pipe()
            process.standardOutput = out
            process.standardError = err
            try process.run()
            // Drain stdout meanwhile so a full pipe never blocks the writer.
            let acknowledged = DispatchSemaphore(value: 0)
            nonisolated(unsafe) var output = Data()
            DispatchQueue.global().async {
                output = out.fileHandleForReading.readDataToEndOfFile()
                acknowledged.signal()
            }
            // The kill must land while the writer writes: wait for its first complete write (on a
            // loaded machine the process may take longer to start than the random delay below).
            let firstWrite = Date().addingTimeInterval(10)
            while !FileManager.default.fileExists(atPath: path), Date() < firstWrite { usleep(2_000) }
            usleep(UInt32.random(in: 30_000...250_000))
            XCTAssertTrue(process.isRunning, "writer exited early: \(String(decoding: err.fileHandleForReading.availableData, as: UTF8.self))")
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            acknowledged.wait()
            XCTAssertEqual(process.terminationReason, .uncaughtSignal)

            let acked = String(decoding: output, as: UTF8.self).split(separator: "\n").compactMap { UInt64($0) }
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.contains(".tmp-") }
            if !leftovers.isEmpty { killedBeforeRename += 1 }
            let store = try HistoryStore(path: path, capacity: capacity)
            XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: directory), ["history.json"],
                           "run \(run): a crashed writer's temporary file is removed on load")
            XCTAssertNil(store.loadProblem, "run \(run): \(store.loadProblem.map { "\($0)" } ?? "")")
            let ids = store.all().map(\.callID.value)
            let newest = try XCTUnwrap(ids.last, "run \(run): nothing survived")
            // A prefix of the writes: contiguous ids up to the newest, each entry exactly as written.
            XCTAssertEqual(ids, Array((newest - UInt64(ids.count) + 1)...newest), "run \(run)")
            XCTAssertEqual(ids.count, min(capacity, Int(newest)), "run \(run)")
            XCTAssertEqual(store.all(), ids.map(expected), "run \(run)")
            // Everything acknowledged is there; at most the one append in flight beyond it.
            let lastAcked = acked.last ?? lastID
            XCTAssertTrue(newest == lastAcked || newest == lastAcked + 1,
                          "run \(run): file ends at \(newest), writer acknowledged \(lastAcked)")
            XCTAssertGreaterThanOrEqual(newest, lastID, "run \(run): history went backwards")
            if newest == lastAcked + 1 { killedMidWrite += 1 }
            lastID = newest
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.contains("corrupt") }, [])
        print("HistoryCrashTests: \(runs) kills, \(lastID) entries written in all, \(killedBeforeRename) left a temporary file, \(killedMidWrite) came after the rename but before the acknowledgement")
    }
}
