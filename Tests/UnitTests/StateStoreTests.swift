import CallStore
import Foundation
import Glibc
import XCTest

final class StateStoreTests: XCTestCase {
    private var directory = ""
    private var path: String { directory + "/state.json" }

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "statestore-\(getpid())-\(UInt32.random(in: .min ... .max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
    }

    func testDoNotDisturbSurvivesARestart() throws {
        let store = try StateStore(path: path, default: TerminalState())
        XCTAssertFalse(store.value.doNotDisturb)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path), "nothing written until something changes")
        try store.update { $0.doNotDisturb.toggle() }
        XCTAssertTrue(try StateStore(path: path, default: TerminalState()).value.doNotDisturb)
        try store.set(TerminalState(doNotDisturb: false))
        XCTAssertFalse(try StateStore(path: path, default: TerminalState(doNotDisturb: true)).value.doNotDisturb)
        var s = stat()
        XCTAssertEqual(stat(path, &s), 0)
        XCTAssertEqual(s.st_mode & 0o777, 0o640)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: directory), ["state.json"])
    }

    func testMissingFieldsReadAsDefaultsAndGarbageIsMovedAside() throws {
        try Data("{}".utf8).write(to: URL(fileURLWithPath: path))
        let lenient = try StateStore(path: path, default: TerminalState(doNotDisturb: true))
        XCTAssertNil(lenient.loadProblem)
        XCTAssertFalse(lenient.value.doNotDisturb, "an older file without the field is valid")

        try Data("{\"doNotDisturb\": tru".utf8).write(to: URL(fileURLWithPath: path))
        let recovered = try StateStore(path: path, default: TerminalState(doNotDisturb: true))
        XCTAssertTrue(recovered.value.doNotDisturb, "falls back to the default")
        let problem = try XCTUnwrap(recovered.loadProblem)
        XCTAssertTrue(FileManager.default.fileExists(atPath: problem.movedTo))
    }
}
