import Calls
import Control
import Foundation
import TestSupport
import XCTest

/// A practice of 31 rooms through real daemons (all on this host, each with its own ports and
/// control socket, none with a sound card: this is about signalling): one key's notification and
/// one emergency call reach all 30 other rooms.
final class SiteScaleTests: XCTestCase {
    func testANotificationAndAnEmergencyCallReachThirtyRooms() throws {
        let names = (1...31).map { String(format: "r%02d", $0) }
        let rooms = try CallRooms(names, soundCards: false)
        defer { rooms.stopAll() }
        let sender = "r01", others = Array(names.dropFirst())
        let list = others.map { "\"\($0)\"" }.joined(separator: ", ")
        let extra = """
            [buttons.alarm]
            rooms = [\(list)]
            kind = "emergency"
            [notifications.alarm]
            label = "Alarm"
            recipients = [\(list)]
            read_aloud = false
            """
        let t0 = Date()
        for id in names { try rooms.start(id, extra: id == sender ? extra : "") }
        print(String(format: "site scale: %d daemons started in %.1f s", names.count, Date().timeIntervalSince(t0)))
        XCTAssertTrue(rooms.waitOnline(sender, others, timeout: 15), "r01 sees all 30 others online")

        // The notification: each of the 30 acknowledges its delivery to the sender, and has it.
        guard case .success = try rooms.control(sender, .perform(.notify(type: "alarm"))) else { return XCTFail("notify refused") }
        let t1 = Date()
        XCTAssertTrue(rooms.wait(10) { rooms.notifications(sender).last?.delivered.count == 30 },
                      "delivered to \(rooms.notifications(sender).last?.delivered.count ?? 0) of 30")
        print(String(format: "site scale: the notification delivered to all 30 rooms within %.2f s (acknowledged deliveries seen by the sender)", Date().timeIntervalSince(t1)))
        for id in others {
            XCTAssertEqual(rooms.notifications(id).last?.notification.type, "alarm", "\(id) has the notification")
        }

        // The emergency call: every one of the 30 is in it.
        let t2 = Date()
        guard case .success = try rooms.control(sender, .perform(.call(button: "alarm"))) else { return XCTFail("emergency call refused") }
        var reached: [String] = []
        XCTAssertTrue(rooms.wait(10) {
            reached = others.filter { rooms.status($0)?.call?.kind == .emergency }
            return reached.count == 30
        }, "the emergency call reached \(reached.count) of 30: missing \(Set(others).subtracting(reached).sorted())")
        print(String(format: "site scale: the emergency call reached all 30 rooms within %.2f s", Date().timeIntervalSince(t2)))
        _ = try rooms.control(sender, .perform(.hangUp))
        XCTAssertTrue(rooms.wait(10) { others.allSatisfy { rooms.isIdle($0) } }, "all 30 idle after the hang-up")
    }
}
