import Calls
import Control
import Foundation
import Glibc
import SiteService
import TestSupport
import XCTest

/// The site service changing a running site: the practice manager's change (a notification type
/// for one room, on every terminal's first key) goes through the API over TLS, is signed as the
/// next version and handed to the terminals, which take it; then a key press at one terminal
/// sends the new type and the other reads it aloud. Real daemons on the rig, the built service,
/// curl as the client; every fact from typed replies.
final class SiteServiceRigTests: XCTestCase {
    func testAChangeMadeThroughTheServiceReachesTheTerminalsAndItsKeySendsTheNewNotification() throws {
        let rooms = try CallRooms(["roomA", "roomB"])
        defer { rooms.stopAll() }
        let folder = rooms.dir + "/site"
        try SiteKit.create(folder, document: SiteKit.document(rooms))
        let fifo = "\(rooms.dir)/roomA-keys"
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        let a = try SiteKit.start(rooms, "rooma", folder: folder, own: "[keys]\ndevice = \"\(fifo)\"")
        let b = try SiteKit.start(rooms, "roomb", folder: folder)
        XCTAssertTrue(rooms.waitOnline("rooma", ["roomb"]), a.log)

        let service = SiteServiceProcess(dir: folder)
        defer { service.stop() }
        XCTAssertEqual(try service.addAccount("anna", role: "manager", password: "Empfang-2026!").status, 0)
        try service.start()
        let anna = try XCTUnwrap(try service.login("anna", password: "Empfang-2026!"))
        let view = try service.request("GET", "/api/v1/site", as: anna).decode(SiteEditor.View.self)
        XCTAssertEqual(view.version, 2)

        let edits = """
            {"version":2,"edits":[
             {"path":["notifications","material"],"value":{"label":"Material bringen","recipients":["roomb"],"text":"Bitte Material bringen","tone":"bell"}},
             {"path":["keys","map","KEY_1"],"value":"notify:material"}]}
            """
        let t0 = Date()
        let reply = try service.request("PATCH", "/api/v1/site", as: anna, json: edits)
        XCTAssertEqual(reply.status, 200, reply.text)
        let outcome = try reply.decode(SiteEditor.Outcome.self)
        print("site service: version \(outcome.plan.version) applied in \(String(format: "%.0f", Date().timeIntervalSince(t0) * 1000)) ms; "
              + "published: \(outcome.published.map { "\($0.room) \($0.result.rawValue)" }.joined(separator: ", "))")
        XCTAssertTrue(outcome.applied)
        XCTAssertEqual(outcome.plan.version, 3)
        XCTAssertEqual(outcome.published.map(\.result), [.took, .took], "each terminal took it from the service")
        for (id, daemon) in [("rooma", a), ("roomb", b)] {
            XCTAssertNotNil(daemon.waitForStatistics(timeout: 10) { $0.site?.version == 3 && $0.reload.waitingForCallEnd.isEmpty },
                            "\(id) runs version 3: \(daemon.log)")
        }

        // The key the change put there sends the type the change made; B reads it aloud.
        let before = try b.statistics().calls?.speech.spoken ?? 0
        let keys = try FIFOKeyWriter(path: fifo)
        keys.press(2)  // KEY_1
        XCTAssertTrue(rooms.wait(5) {
            rooms.notifications("rooma").contains { $0.direction == .outgoing && $0.notification.type == "material" && $0.delivered == [RoomID("roomb")!] }
        }, "A sent it and B has it: \(a.log)")
        XCTAssertNotNil(b.waitForStatistics(timeout: 8) { ($0.calls?.speech.spoken ?? 0) > before }, "B read it aloud: \(b.log)")
        XCTAssertEqual(rooms.notifications("roomb").last?.notification.type, "material")
    }
}
