import Posix
import Synchronization
import XCTest

/// The daemon's parts start from one ordered list and stop in the reverse order; a part that
/// fails to start is named, the parts after it are not started, and every part given is stopped.
final class ServiceListTests: XCTestCase {
    final class Journal: Sendable {
        let lines = Mutex<[String]>([])
        func note(_ line: String) { lines.withLock { $0.append(line) } }
        var all: [String] { lines.withLock { $0 } }
    }

    final class Part: Service {
        let serviceName: String
        let journal: Journal
        let fails: Bool
        init(_ name: String, _ journal: Journal, fails: Bool = false) {
            serviceName = name
            self.journal = journal
            self.fails = fails
        }
        func start() throws(SystemError) {
            if fails { throw SystemError("pthread_create", .resourceTemporarilyUnavailable) }
            journal.note("start \(serviceName)")
        }
        func stop() { journal.note("stop \(serviceName)") }
    }

    func testPartsStartInOrderAndStopInTheReverseOrder() throws {
        let journal = Journal()
        var list = ServiceList()
        try list.start([Part("network", journal), Part("calls", journal), Part("control", journal)])
        try list.start([Part("health", journal)])  // started later, after the rest (the watchdog)
        XCTAssertEqual(list.names, ["network", "calls", "control", "health"])
        var stopped: [String] = []
        list.stopAll { name, seconds in
            stopped.append(name)
            XCTAssertGreaterThanOrEqual(seconds, 0)
        }
        XCTAssertEqual(stopped, ["health", "control", "calls", "network"])
        XCTAssertEqual(journal.all, ["start network", "start calls", "start control", "start health",
                                     "stop health", "stop control", "stop calls", "stop network"])
        XCTAssertEqual(list.names, [], "nothing is stopped twice")
        list.stopAll()
        XCTAssertEqual(journal.all.count, 8)
    }

    func testAFailedStartNamesThePartAndEveryPartGivenIsStopped() {
        let journal = Journal()
        var list = ServiceList()
        XCTAssertThrowsError(try list.start([Part("network", journal), Part("calls", journal, fails: true), Part("control", journal)])) { error in
            guard let failure = error as? ServiceList.StartFailure else { return XCTFail("\(error)") }
            XCTAssertEqual(failure.part, "calls")
            XCTAssertEqual(failure.error.errno, .resourceTemporarilyUnavailable)
            XCTAssertTrue(failure.description.hasPrefix("calls: pthread_create failed"), failure.description)
        }
        XCTAssertEqual(journal.all, ["start network"], "the parts after the failed one are not started")
        list.stopAll()
        // Stopped too, though never started: a stop releases what the part took when it was made.
        XCTAssertEqual(journal.all, ["start network", "stop control", "stop calls", "stop network"])
    }
}
