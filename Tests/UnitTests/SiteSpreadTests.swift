import Calls
import Foundation
import Site
import SignalTools
import SiteSecurity
import XCTest

/// Site documents spreading between terminals, simulated: each terminal a `SiteSpread` and a real
/// `SiteDocumentGate` (real signatures), hellos every second to every room over a lossy network,
/// fetches that take time and sometimes fail, a holder that serves 8 at once and answers the rest
/// `busy`, and each terminal looking at what its hellos said every tenth of a second, as the
/// daemon's follower does. Seeded: every run is the same.
final class SiteSpreadTests: XCTestCase {
    static let admin = try! AdministratorKey(seed: Array(repeating: 9, count: 32))
    static let site = "sim-praxis"

    static func document(_ version: UInt64, by key: AdministratorKey = admin) -> [UInt8] {
        SignedSiteDocument(site: site, version: version, body: Array("site v\(version)".utf8), signedWith: key).encoded()
    }

    struct Terminal {
        var spread: SiteSpread
        var gate: SiteDocumentGate<String>
        var on = true
        var nextHello: Double
        /// When the follower looks next, and what the hellos said since (as the calls side keeps it).
        var nextStep: Double
        var heard: [String: SiteStamp?] = [:]
        var appliedAt: [UInt64: Double] = [:]
    }

    /// A fetch under way: it ends at `due` with the peer's document, or fails.
    struct Fetch {
        var from: String
        var to: String
        var due: Double
        var fails: Bool
        var busy = false
    }

    struct Sim {
        var now = 0.0
        let step = 0.005
        var rng: SplitMix64
        var terminals: [String: Terminal] = [:]
        var hellos: [(to: String, from: String, stamp: SiteStamp?, due: Double)] = []
        var fetches: [Fetch] = []
        var loss: Double
        var fetchFailure: Double
        var datagrams = 0
        var fetchCount = 0
        var busyCount = 0
        /// Transfers a terminal serves at once (`SiteDocumentServer.Settings.connections`).
        let capacity = 8
        let followerInterval = 0.1

        init(count: Int, seed: UInt64, loss: Double = 0.05, fetchFailure: Double = 0.1) {
            rng = SplitMix64(seed: seed)
            self.loss = loss
            self.fetchFailure = fetchFailure
            for i in 0..<count {
                let id = String(format: "t%02d", i)
                var gate = SiteDocumentGate<String>(siteID: SiteSpreadTests.site, verifier: SiteSpreadTests.admin.verifier) {
                    .success(String(decoding: $0, as: UTF8.self))
                }
                guard case .adopt(let held) = gate.offer(SiteSpreadTests.document(1), from: "disk") else { fatalError() }
                terminals[id] = Terminal(spread: SiteSpread(me: id, holding: held.stamp), gate: gate,
                                         nextHello: Double(rng.next() % 1000) / 1000, nextStep: Double(rng.next() % 100) / 1000)
            }
        }

        var ids: [String] { terminals.keys.sorted() }

        mutating func random() -> Double { Double(rng.next() >> 11) / Double(1 << 53) }

        /// Hands `bytes` to a terminal's gate, as the administrator's tool or a fetch does.
        mutating func offer(_ id: String, _ bytes: [UInt8], from source: String, length: Int? = nil) -> SiteDocumentGate<String>.Decision {
            let decision = terminals[id]!.gate.offer(bytes, from: source, announcedLength: length)
            if case .adopt(let held) = decision {
                terminals[id]!.appliedAt[held.version] = now
                apply(id, terminals[id]!.spread.handle(.holding(held.stamp), now: now))
            }
            return decision
        }

        mutating func apply(_ id: String, _ effects: [SiteSpread.Effect]) {
            for effect in effects {
                switch effect {
                case .announce: sendHellos(from: id)
                case .fetch(let peer, _):
                    fetchCount += 1
                    let busy = fetches.filter { $0.from == peer && !$0.busy }.count >= capacity
                    if busy { busyCount += 1 }
                    fetches.append(Fetch(from: peer, to: id, due: now + (busy ? 0.001 : 0.005 + 0.02 * random()),
                                         fails: !busy && random() < fetchFailure, busy: busy))
                }
            }
        }

        mutating func sendHellos(from id: String) {
            let stamp = terminals[id]!.gate.held?.stamp
            for other in ids where other != id {
                datagrams += 1
                guard random() >= loss else { continue }
                hellos.append((other, id, stamp, now + 0.0005 + 0.002 * random()))
            }
        }

        mutating func run(until end: Double) {
            while now < end {
                now += step
                for id in ids where terminals[id]!.on && now >= terminals[id]!.nextHello {
                    terminals[id]!.nextHello += 1
                    sendHellos(from: id)
                }
                let due = hellos.filter { $0.due <= now }
                hellos.removeAll { $0.due <= now }
                for h in due where terminals[h.to]!.on { terminals[h.to]!.heard[h.from] = .some(h.stamp) }
                let ended = fetches.filter { $0.due <= now }
                fetches.removeAll { $0.due <= now }
                for f in ended where terminals[f.to]!.on {
                    var outcome = SiteSpread.FetchOutcome.failed
                    if f.busy {
                        outcome = .busy
                    } else if !f.fails, terminals[f.from]!.on, let bytes = terminals[f.from]!.gate.held?.encoded {
                        switch offer(f.to, bytes, from: f.from, length: bytes.count) {
                        case .adopt: outcome = .adopted
                        case .alreadyHeld: outcome = .adopted
                        case .refuse: outcome = .refused
                        }
                    }
                    apply(f.to, terminals[f.to]!.spread.handle(.fetchEnded(peer: f.from, outcome: outcome), now: now))
                }
                for id in ids where terminals[id]!.on && now >= terminals[id]!.nextStep {
                    terminals[id]!.nextStep += followerInterval
                    let heard = terminals[id]!.heard
                    terminals[id]!.heard = [:]
                    for (peer, stamp) in heard.sorted(by: { $0.key < $1.key }) {
                        apply(id, terminals[id]!.spread.handle(.heard(peer: peer, stamp: stamp), now: now))
                    }
                    apply(id, terminals[id]!.spread.handle(.tick, now: now))
                }
            }
        }

        func holding(_ version: UInt64) -> [String] { ids.filter { terminals[$0]!.gate.held?.version == version } }
    }

    /// A change published at one terminal reaches all, at 5, 20 and 50 terminals, with 5 % of
    /// hellos lost and 10 % of fetches failing.
    func testANewVersionReachesEveryTerminalWithinSecondsAtEachSize() {
        for count in [5, 20, 50] {
            var sim = Sim(count: count, seed: UInt64(count))
            sim.run(until: 3)
            let published = sim.now
            guard case .adopt = sim.offer("t00", SiteSpreadTests.document(2), from: "intercom-site") else { return XCTFail() }
            sim.run(until: published + 5)
            XCTAssertEqual(sim.holding(2).count, count, "\(count) terminals")
            let times = sim.ids.compactMap { sim.terminals[$0]!.appliedAt[2] }.map { $0 - published }.sorted()
            let worst = times.last ?? .infinity
            print("site spread, \(count) terminals: applied everywhere after median \(String(format: "%.3f", times[times.count / 2])) s, worst \(String(format: "%.3f", worst)) s; \(sim.fetchCount - (count - 1)) fetches beyond one each, \(sim.busyCount) answered busy")
            XCTAssertLessThan(worst, 2, "\(count) terminals: everywhere within 2 s")
            XCTAssertTrue(sim.ids.allSatisfy { sim.terminals[$0]!.spread.behind(now: sim.now).isEmpty }, "nobody behind")
        }
    }

    /// A terminal that was off while the site changed twice catches up from the first hellos it
    /// hears; the administrator's machine plays no part.
    func testATerminalThatWasOffCatchesUpOnReturn() {
        var sim = Sim(count: 10, seed: 7)
        sim.terminals["t05"]!.on = false
        sim.run(until: 2)
        _ = sim.offer("t00", SiteSpreadTests.document(2), from: "intercom-site")
        sim.run(until: 5)
        _ = sim.offer("t03", SiteSpreadTests.document(3), from: "intercom-site")
        sim.run(until: 8)
        XCTAssertEqual(sim.holding(3).count, 9)
        XCTAssertEqual(sim.terminals["t05"]!.gate.held?.version, 1)
        XCTAssertTrue(sim.terminals["t00"]!.spread.behind(now: sim.now).isEmpty, "t05 is silent: not counted behind")
        sim.terminals["t05"]!.on = true
        sim.terminals["t05"]!.nextHello = sim.now
        let back = sim.now
        sim.run(until: back + 4)
        let caughtUp = sim.terminals["t05"]!.appliedAt[3].map { $0 - back }
        XCTAssertNotNil(caughtUp)
        XCTAssertLessThan(caughtUp ?? .infinity, 2.5, "hellos come every second")
        XCTAssertNil(sim.terminals["t05"]!.appliedAt[2], "straight to the newest")
    }

    /// A terminal that announces a document nobody signed (a member of the site turned bad, or a
    /// bug): each terminal fetches it once, its gate refuses it, and the site keeps the good one.
    func testAForgedDocumentIsFetchedOnceRefusedAndTheSiteStaysPut() {
        var sim = Sim(count: 8, seed: 11, loss: 0, fetchFailure: 0)
        let forger = try! AdministratorKey(seed: Array(repeating: 66, count: 32))
        let forged = SiteSpreadTests.document(9, by: forger)
        // t07 trusts the forger's key, so it holds the document and its hellos announce it.
        sim.terminals["t07"]!.gate = SiteDocumentGate(siteID: SiteSpreadTests.site, verifier: forger.verifier) {
            .success(String(decoding: $0, as: UTF8.self))
        }
        guard case .adopt = sim.offer("t07", forged, from: "forger") else { return XCTFail("the forger's own gate takes it") }
        sim.run(until: 6)
        for id in sim.ids where id != "t07" {
            XCTAssertEqual(sim.terminals[id]!.gate.held?.version, 1, id)
            XCTAssertEqual(sim.terminals[id]!.gate.refusals[.badSignature], 1, "\(id): fetched once, refused, not again")
        }
    }

    /// A holder that answers `busy` is there and answering, only full: asked again after a
    /// quarter of a second, where one that failed waits 2 s.
    func testABusyHolderIsAskedAgainSoonAFailedOneLater() {
        let v2 = SiteStamp(version: 2, digest: 2, length: 10)
        for (outcome, wait) in [(SiteSpread.FetchOutcome.busy, 0.25), (.failed, 2.0)] {
            var spread = SiteSpread(me: "t09", holding: SiteStamp(version: 1, digest: 1, length: 10))
            XCTAssertEqual(spread.handle(.heard(peer: "t01", stamp: v2), now: 0), [], "a fetch starts at the tick")
            XCTAssertEqual(spread.handle(.tick, now: 0), [.fetch(peer: "t01", stamp: v2)])
            XCTAssertEqual(spread.handle(.fetchEnded(peer: "t01", outcome: outcome), now: 0.01), [])
            XCTAssertEqual(spread.handle(.tick, now: 0.01 + wait - 0.001), [], "\(outcome): not before \(wait) s")
            XCTAssertEqual(spread.handle(.tick, now: 0.01 + wait), [.fetch(peer: "t01", stamp: v2)], "\(outcome): again after \(wait) s")
        }
    }

    /// 42 terminals hear at once that 8 hold a new version: their asking spreads over the 8 (by a
    /// hash of each one's name), not 42 at the first after them in name order.
    func testTerminalsThatHearAtOnceSpreadTheirAskingOverTheHolders() {
        let v2 = SiteStamp(version: 2, digest: 2, length: 10)
        let holders = (1...8).map { String(format: "t%02d", $0) }
        var asked: [String: Int] = [:]
        for n in 9...50 {
            var spread = SiteSpread(me: String(format: "t%02d", n), holding: SiteStamp(version: 1, digest: 1, length: 10))
            for h in holders { _ = spread.handle(.heard(peer: h, stamp: v2), now: 0) }
            _ = spread.handle(.tick, now: 0)
            guard let f = spread.fetching else { return XCTFail("t\(n) fetches") }
            asked[f.peer, default: 0] += 1
        }
        XCTAssertEqual(asked.values.reduce(0, +), 42)
        XCTAssertGreaterThanOrEqual(asked.count, 7, "nearly every holder is asked: \(asked)")
        XCTAssertLessThanOrEqual(asked.values.max() ?? 0, 12, "none by more than 12 of 42: \(asked)")
    }
}
