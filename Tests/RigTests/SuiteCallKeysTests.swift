import Calls
import Control
import Foundation
import Glibc
import SignalTools
import TestSupport
import XCTest

/// The suite's figure for keys agreed per call (issue 53): call set-up, 1:1 and 1:8, with
/// signalling sealed by the site key (each stream's key derived from it) against terminal keys
/// (each stream's key drawn by its sender and sent in the sealed invite or accept). Nine intercomd
/// on loopback without sound cards: what is measured is signalling.
final class SuiteCallKeysTests: XCTestCase {
    func testSuiteCallSetUpWithKeysPerCallAgainstTheSiteKey() throws {
        let mode = try SuiteMode.require()
        try Rig.require()
        let calls = mode.isSmoke ? 2 : 15
        SuiteMode.emit("### Call set-up with keys agreed per call: 1:1 and 1:8, site key against terminal keys (nine intercomd on loopback, no sound cards)")
        SuiteMode.emit("")
        SuiteMode.emitTable(intro: "From the `call` command on the caller's control socket to its `status` showing every callee `connected` (the invite out, each callee's accept back; ring time 0), asked again at once on one open connection (a reply takes a fraction of a millisecond); \(calls) calls of each size, the caller idle in between. Site key: every datagram sealed by the one site key, each stream's SRTP key derived from it. Terminal keys: the same site with every terminal's key approved and no site key; signalling sealed per pair of terminals, each stream's key drawn by its sender and carried in the invite (the caller's) and each accept (the callee's). Goal (issue 53): at most 5 ms more at 1:1 and 1:8.",
                            columns: ["signalling sealed by", "1:1 connected: median [range]", "1:8 connected: median [range]"])
        var figures: [Bool: (one: [Double], eight: [Double])] = [:]
        for terminalKeys in [false, true] {
            let f = try measure(terminalKeys: terminalKeys, calls: calls)
            XCTAssertEqual(f.one.count, calls, "every 1:1 call connected")
            XCTAssertEqual(f.eight.count, calls, "every 1:8 call connected")
            figures[terminalKeys] = f
            func cell(_ v: [Double]) -> String {
                String(format: "%.1f ms [%.1f-%.1f]", Levels.median(v), v.min() ?? .nan, v.max() ?? .nan)
            }
            SuiteMode.emit("| \(terminalKeys ? "terminal keys, keys per call" : "site key, keys derived") | \(cell(f.one)) | \(cell(f.eight)) |")
        }
        if let before = figures[false], let after = figures[true] {
            SuiteMode.emit(String(format: "| difference of the medians | %+.1f ms | %+.1f ms |",
                                  Levels.median(after.one) - Levels.median(before.one), Levels.median(after.eight) - Levels.median(before.eight)))
        }
        SuiteMode.emit("")
    }

    private func measure(terminalKeys: Bool, calls: Int) throws -> (one: [Double], eight: [Double]) {
        let names = (1...9).map { "t\($0)" }
        let rooms = try CallRooms(names, ringMs: 0, soundCards: false)
        defer { rooms.stopAll() }
        let ids = rooms.rooms.map(\.id)
        let caller = ids[0], callees = Array(ids.dropFirst())
        let folder = rooms.dir + "/site"
        try SiteKit.create(folder, document: SiteKit.document(rooms))
        var own = ""
        if !terminalKeys {
            let key = try SiteKit.siteKeyFile(in: rooms.dir)
            own = "[security]\nsite_key = \"\(key)\"\n"
        }
        for id in ids { try SiteKit.start(rooms, id, folder: folder, own: own) }
        if terminalKeys {
            try SiteKit.approveAll(rooms, ids, folder: folder, version: 3)
        } else {
            for id in ids { XCTAssertNotNil(rooms.daemons[id]!.waitForStatistics(timeout: 10) { $0.calls?.protection == .siteKey }, id) }
        }
        XCTAssertTrue(rooms.waitOnline(caller, callees, timeout: 15), "the caller sees every callee online")

        // The caller's status, asked again at once on one open connection: a reply takes a
        // fraction of a millisecond (an event read with a timeout would wait a kernel tick, 4 ms).
        let watch = try ControlClient(path: rooms.room(caller).socket, timeout: 5)
        defer { watch.close() }
        func connected(_ targets: [RoomID]) -> Bool {
            guard case .success(.status(let s))? = try? watch.run(.status), let call = s.call else { return false }
            return targets.allSatisfy { t in call.participants.contains { $0.room == t && $0.status == .connected } }
        }
        var one: [Double] = [], eight: [Double] = []
        for group in [[callees[0]], callees] {
            for _ in 0..<calls {
                let targets = group.map { RoomID($0)! }
                let t0 = Date()
                guard case .success(.callPlaced) = try rooms.control(caller, .perform(.callRooms(targets))) else {
                    XCTFail("call \(group)")
                    continue
                }
                var connectedMs: Double?
                while connectedMs == nil, Date().timeIntervalSince(t0) < 2 {
                    if connected(targets) { connectedMs = Date().timeIntervalSince(t0) * 1000 }
                }
                XCTAssertNotNil(connectedMs, "\(group.count) callee(s) connected within 2 s")
                if let connectedMs { group.count == 1 ? one.append(connectedMs) : eight.append(connectedMs) }
                _ = try rooms.control(caller, .perform(.hangUp))
                XCTAssertTrue(rooms.wait(3) { ids.allSatisfy(rooms.isIdle) })
            }
        }
        return (one, eight)
    }
}
