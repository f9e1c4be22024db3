import Calls
import Control
@testable import SiteService
import XCTest

/// The site's history made one from every terminal's own: each call and each notification once,
/// from the side that placed it when that side answered, else from another; newest first, cut
/// to the limit; the rooms that gave nothing named.
final class SiteHistoryTests: XCTestCase {
    private func r(_ s: String) -> RoomID { RoomID(s)! }

    private func call(_ id: UInt64, _ direction: HistoryEntry.Direction, caller: String, to callees: [String], at: Double) -> HistoryEntry {
        HistoryEntry(callID: CallID(id), direction: direction, caller: r(caller),
                     participants: callees.map { Participant(room: r($0), status: .left) }, outcome: .finished, started: at, ended: at + 30)
    }

    private func note(_ id: UInt64, _ direction: HistoryEntry.Direction, from: String, to: [String], at: Double) -> NotificationRecord {
        NotificationRecord(notification: StaffNotification(id: NotificationID(id), sender: r(from), recipients: to.map(r), type: "material",
                                                           label: "Material", text: "", priority: .normal, tone: .bell, readAloud: true, sent: at),
                           direction: direction)
    }

    func testEachCallAndNotificationOnceFromItsSenderNewestFirst() {
        let empfang: ControlReply = .history([call(1, .outgoing, caller: "empfang", to: ["labor", "lager"], at: 100),
                                              call(3, .incoming, caller: "lager", to: ["empfang"], at: 300)],
                                             notifications: [note(7, .outgoing, from: "empfang", to: ["labor"], at: 150)])
        let labor: ControlReply = .history([call(1, .incoming, caller: "empfang", to: ["labor"], at: 100),
                                            call(2, .incoming, caller: "zimmer", to: ["labor"], at: 200)],
                                           notifications: [note(7, .incoming, from: "empfang", to: ["labor"], at: 150),
                                                           note(8, .incoming, from: "zimmer", to: ["labor"], at: 250)])
        let lager: ControlReply = .history([call(1, .incoming, caller: "empfang", to: ["lager"], at: 100),
                                            call(3, .outgoing, caller: "lager", to: ["empfang"], at: 300)], notifications: [])
        let h = SiteHistory(answers: [("labor", .success(labor)), ("empfang", .success(empfang)), ("lager", .success(lager)),
                                      ("zimmer", .failure(.init(room: "zimmer", detail: "not reached: timed out")))], limit: 10)
        XCTAssertEqual(h.calls.map(\.entry.callID), [CallID(3), CallID(2), CallID(1)], "newest first, each once")
        XCTAssertEqual(h.calls.map(\.room), ["lager", "labor", "empfang"], "from the caller's terminal where it answered")
        XCTAssertEqual(h.calls.map(\.entry.direction), [.outgoing, .incoming, .outgoing])
        XCTAssertEqual(h.notifications.map(\.record.notification.id), [NotificationID(8), NotificationID(7)])
        XCTAssertEqual(h.notifications.map(\.room), ["labor", "empfang"])
        XCTAssertEqual(h.unanswered.map(\.room), ["zimmer"], "its part may be missing, and the page says so")
        let cut = SiteHistory(answers: [("empfang", .success(empfang)), ("lager", .success(lager))], limit: 1)
        XCTAssertEqual(cut.calls.map(\.entry.callID), [CallID(3)])
        XCTAssertEqual(cut.notifications.count, 1)
        XCTAssertEqual(SiteHistory(answers: [("x", .success(.pong(protocolVersion: 1)))], limit: 5).unanswered.map(\.room), ["x"], "not a history: named")
    }
}
