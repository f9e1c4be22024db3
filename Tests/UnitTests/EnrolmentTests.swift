import Foundation
import SignalTools
import SiteSecurity
import TestSupport
import XCTest

/// A terminal's key file and enrolment code, the request it sends, and the administrator's
/// decisions (`Enrolment`), the last in a seeded simulation of installers, strangers and an
/// administrator.
final class EnrolmentTests: XCTestCase {
    private func folder() -> String {
        let dir = NSTemporaryDirectory() + "enrolment-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try! FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }

    private func mode(_ path: String) -> mode_t {
        var st = stat()
        XCTAssertEqual(stat(path, &st), 0)
        return st.st_mode & 0o777
    }

    func testTheFirstStartMakesTheKeyOnceWithMode0600AndLaterStartsReadTheSameKey() throws {
        let path = folder() + "/terminal.key"
        let first = try TerminalIdentity.loadOrCreate(path: path)
        XCTAssertTrue(first.created)
        XCTAssertEqual(mode(path), 0o600)
        let second = try TerminalIdentity.loadOrCreate(path: path)
        XCTAssertFalse(second.created)
        XCTAssertEqual(second.identity.publicIdentity, first.identity.publicIdentity)
    }

    /// The start count beside the key only rises (announcements are ordered by it), is 0600, and
    /// a file that is not a count stops the start with its path rather than counting from 1 again.
    func testTheStartCountRisesAtEachStartAndABrokenOneIsNamedNotReplaced() throws {
        let path = BootCount.path(besideKey: folder() + "/terminal.key")
        XCTAssertEqual(try BootCount.next(path: path), 1)
        XCTAssertEqual(try BootCount.next(path: path), 2)
        XCTAssertEqual(mode(path), 0o600)
        XCTAssertEqual(try String(contentsOfFile: path, encoding: .utf8), "2\n")
        try "two\n".write(toFile: path, atomically: false, encoding: .utf8)
        XCTAssertThrowsError(try BootCount.next(path: path)) { error in
            XCTAssertTrue("\(error)".contains("\(path): not a count of starts"), "\(error)")
        }
        XCTAssertEqual(try String(contentsOfFile: path, encoding: .utf8), "two\n", "left for the administrator")
    }

    func testAKeyFileOthersMayReadOrThatIsNotAKeyIsRefusedAndNeverReplaced() throws {
        let path = folder() + "/terminal.key"
        _ = try TerminalIdentity.loadOrCreate(path: path)
        chmod(path, 0o640)
        XCTAssertThrowsError(try TerminalIdentity.loadOrCreate(path: path)) { error in
            XCTAssertTrue("\(error)".contains("mode 640 is too open; chmod 0600 it"), "\(error)")
        }
        try "not a key\n".write(toFile: path, atomically: false, encoding: .utf8)
        chmod(path, 0o600)
        XCTAssertThrowsError(try TerminalIdentity.loadOrCreate(path: path)) { error in
            XCTAssertTrue("\(error)".contains("not base64"), "\(error)")
        }
        XCTAssertEqual(try String(contentsOfFile: path, encoding: .utf8), "not a key\n", "a broken key file is left for the administrator, not replaced")
    }

    func testTheCodeIsTwelveDigitsInGroupsStableForAKeyAndDifferentForOtherKeysAndSites() throws {
        var rng = SplitMix64(seed: 53)
        let key = try identity(&rng).publicIdentity
        let code = key.enrolmentCode(site: "praxis")
        XCTAssertEqual(code, key.enrolmentCode(site: "praxis"))
        XCTAssertNotEqual(code, key.enrolmentCode(site: "praxis-2"))
        XCTAssertTrue(code.description.wholeMatch(of: /[0-9]{3} [0-9]{3} [0-9]{3} [0-9]{3}/) != nil, code.description)
        XCTAssertEqual(EnrolmentCode(typed: code.description), code)
        XCTAssertEqual(EnrolmentCode(typed: code.description.replacingOccurrences(of: " ", with: "-")), code)
        XCTAssertNil(EnrolmentCode(typed: String(code.description.dropLast())))
        XCTAssertNil(EnrolmentCode(typed: "12a 456 789 012"))
        XCTAssertEqual(code.spoken.split(separator: ",").count, 4)
        var codes: Set<EnrolmentCode> = []
        for _ in 0..<200 { codes.insert(try identity(&rng).publicIdentity.enrolmentCode(site: "praxis")) }
        XCTAssertEqual(codes.count, 200, "200 keys, 200 codes")
    }

    func testARequestOpensOnlyWhole() throws {
        var rng = SplitMix64(seed: 7)
        let key = try identity(&rng)
        let request = EnrolmentRequest(site: "praxis", room: "labor", software: "0.9.0", signedWith: key)
        guard case .success(let opened) = EnrolmentRequest.open(request.encoded(), site: "praxis") else {
            return XCTFail("a good request was refused")
        }
        XCTAssertEqual(opened.identity, key.publicIdentity)
        XCTAssertEqual(opened.request.room, "labor")

        func refusal(_ bytes: [UInt8], site: String = "praxis") -> EnrolmentRefusal? {
            if case .failure(let r) = EnrolmentRequest.open(bytes, site: site) { return r }
            return nil
        }
        var otherRoom = request
        otherRoom.room = "empfang"
        XCTAssertEqual(refusal(otherRoom.encoded()), .badSignature, "the room is signed")
        var otherKey = request
        otherKey.identity = Data(try identity(&rng).publicIdentity.key)
        XCTAssertEqual(refusal(otherKey.encoded()), .badSignature, "the key must have signed it")
        XCTAssertEqual(refusal(request.encoded(), site: "elsewhere"), .otherSite)
        var future = request
        future.format = 2
        XCTAssertEqual(refusal(future.encoded()), .unknownFormat)
        var notAKey = request
        notAKey.identity = Data([1, 2, 3])
        XCTAssertEqual(refusal(notAKey.encoded()), .malformed)
        XCTAssertEqual(refusal(Array("{}".utf8)), .malformed)
        XCTAssertEqual(refusal([UInt8](repeating: 0x20, count: EnrolmentRequest.maximumBytes + 1)), .malformed)
    }

    func testTheAdministratorsDecisionsOneByOne() throws {
        var rng = SplitMix64(seed: 11)
        let a = try identity(&rng), b = try identity(&rng)
        var e = Enrolment(site: "praxis", rooms: ["empfang", "labor"])
        let code = a.publicIdentity.enrolmentCode(site: "praxis")
        XCTAssertEqual(e.apply(.approve(room: "labor", code: code)), .refused(.noRequest))
        XCTAssertEqual(e.apply(heard(a, room: "labor")), .pending(a.publicIdentity, room: "labor"))
        XCTAssertEqual(e.apply(heard(a, room: "labor")), .pending(a.publicIdentity, room: "labor"))
        XCTAssertEqual(e.pending.count, 1, "a request heard again is one request")
        XCTAssertEqual(e.apply(.approve(room: "keller", code: code)), .refused(.unknownRoom))
        XCTAssertEqual(e.apply(.approve(room: "labor", code: b.publicIdentity.enrolmentCode(site: "praxis"))), .refused(.wrongCode))
        XCTAssertEqual(e.apply(.approve(room: "labor", code: code)), .approved(a.publicIdentity, room: "labor", replaced: nil, movedFrom: nil))
        XCTAssertEqual(e.apply(heard(a, room: "labor")), .alreadyApproved(room: "labor"))
        XCTAssertEqual(Enrolment.standing(of: a.publicIdentity, approved: e.approved, revoked: e.revoked), .approved(room: "labor"))
        XCTAssertEqual(Enrolment.standing(of: b.publicIdentity, approved: e.approved, revoked: e.revoked), .pending)
        // A box swapped after a fault: the new key replaces the old in the room.
        _ = e.apply(heard(b, room: "labor"))
        XCTAssertEqual(e.apply(.approve(room: "labor", code: b.publicIdentity.enrolmentCode(site: "praxis"))),
                       .approved(b.publicIdentity, room: "labor", replaced: a.publicIdentity, movedFrom: nil))
        XCTAssertEqual(e.retired, [a.publicIdentity])
        // The old box's code claims nothing until the box asks again; then it can take another room.
        XCTAssertEqual(e.apply(.approve(room: "empfang", code: code)), .refused(.noRequest))
        _ = e.apply(heard(a, room: "labor"))
        XCTAssertEqual(e.apply(.approve(room: "empfang", code: code)), .approved(a.publicIdentity, room: "empfang", replaced: nil, movedFrom: nil))
        XCTAssertEqual(e.retired, [])
        // Its code again for the room it holds: nothing to do.
        XCTAssertEqual(e.apply(.approve(room: "empfang", code: code)), .alreadyApproved(room: "empfang"))
        XCTAssertEqual(e.apply(.revoke(room: "empfang")), .revoked(a.publicIdentity, room: "empfang"))
        XCTAssertEqual(e.apply(.approve(room: "empfang", code: code)), .refused(.revokedIdentity))
        XCTAssertEqual(e.apply(.revoke(room: "empfang")), .refused(.notApproved))
        XCTAssertEqual(e.apply(.revoke(room: "labor")), .revoked(b.publicIdentity, room: "labor"))
        XCTAssertEqual(e.apply(heard(b, room: "labor")), .refused(.revokedIdentity))
        XCTAssertEqual(Enrolment.standing(of: b.publicIdentity, approved: e.approved, revoked: e.revoked), .revoked)
        XCTAssertEqual(e.apply(.heard(EnrolmentRequest(site: "other", room: "", software: "", signedWith: a), a.publicIdentity)), .refused(.otherSite))
    }

    func testAFloodOfRequestsKeepsTheNewestAndCountsWhatItDropped() throws {
        var rng = SplitMix64(seed: 3)
        var e = Enrolment(site: "praxis", rooms: ["labor"])
        var last: TerminalIdentity?
        for _ in 0..<(Enrolment.maximumPending + 10) {
            let k = try identity(&rng)
            _ = e.apply(heard(k, room: "labor"))
            last = k
        }
        XCTAssertEqual(e.pending.count, Enrolment.maximumPending)
        XCTAssertEqual(e.droppedPending, 10)
        XCTAssertEqual(e.pending.last?.identity, last?.publicIdentity)
    }

    /// Installers set up boxes, each reads its box's code to the administrator, who approves it for
    /// the box's room; strangers' boxes send requests for any room, some with a key made to have a
    /// real box's code (the simulation's code function stands for the days of work that takes);
    /// the administrator also mistypes codes, swaps and moves boxes and revokes some. After every
    /// step: no stranger holds a room whose real box had been heard before its approval, no revoked
    /// key holds a room, a room has one key and a key one room, and the same seed decides the same.
    func testASeededSimulationOfInstallersStrangersAndTheAdministrator() throws {
        for seed in UInt64(1)...40 {
            let first = try simulate(seed: seed)
            XCTAssertEqual(first, try simulate(seed: seed), "seed \(seed): the same commands decide the same")
        }
    }

    /// Runs one simulation and returns its outcomes (checked on the way).
    private func simulate(seed: UInt64) throws -> [Enrolment.Outcome] {
        var rng = SplitMix64(seed: seed)
        let rooms = (1...8).map { "raum\($0)" }
        // Codes a stranger made its key to have: the stranger's key → the real box's key.
        let forged = Locked<[PublicIdentity: PublicIdentity]>([:])
        var e = Enrolment(site: "praxis", rooms: Set(rooms), codeOf: { key in
            (forged.value[key] ?? key).enrolmentCode(site: "praxis")
        })
        var boxes: [TerminalIdentity] = []          // real boxes, in the order installed
        var roomOf: [PublicIdentity: String] = [:]  // the room each real box was set up for
        var heardBefore: Set<PublicIdentity> = []   // real boxes whose request the administrator had
        var strangers: Set<PublicIdentity> = []
        var outcomes: [Enrolment.Outcome] = []
        for _ in 0..<300 {
            let roll = Int.random(in: 0..<100, using: &rng)
            var outcome: Enrolment.Outcome?
            switch roll {
            case 0..<25:  // a new box is installed and its request heard (or lost on the way)
                let box = try identity(&rng)
                let room = rooms.randomElement(using: &rng)!
                boxes.append(box)
                roomOf[box.publicIdentity] = room
                if Bool.random(using: &rng) {
                    outcome = e.apply(heard(box, room: room))
                    heardBefore.insert(box.publicIdentity)
                }
            case 25..<40:  // a box asks again
                if let box = boxes.randomElement(using: &rng) {
                    outcome = e.apply(heard(box, room: roomOf[box.publicIdentity]!))
                    heardBefore.insert(box.publicIdentity)
                }
            case 40..<55:  // a stranger asks, sometimes with a key made to have a real box's code
                let stranger = try identity(&rng).publicIdentity
                strangers.insert(stranger)
                if let victim = boxes.randomElement(using: &rng), Bool.random(using: &rng) {
                    forged.value[stranger] = victim.publicIdentity
                }
                let request = EnrolmentRequest(site: "praxis", room: rooms.randomElement(using: &rng)!, software: "x", signedWith: try identity(&rng))
                outcome = e.apply(.heard(request, stranger))
            case 55..<85:  // the administrator approves a real box with the code read at it (or mistyped)
                if let box = boxes.randomElement(using: &rng) {
                    var code = box.publicIdentity.enrolmentCode(site: "praxis")
                    if Int.random(in: 0..<10, using: &rng) == 0 { code = EnrolmentCode(typed: String(repeating: "1", count: 12))! }
                    let room = Int.random(in: 0..<10, using: &rng) == 0 ? rooms.randomElement(using: &rng)! : roomOf[box.publicIdentity]!
                    let o = e.apply(.approve(room: room, code: code))
                    if case .approved(let key, _, _, _) = o, strangers.contains(key) {
                        XCTAssertFalse(heardBefore.contains(box.publicIdentity),
                                       "seed \(seed): a stranger took \(room) although its real box had been heard")
                    }
                    outcome = o
                }
            default:  // a room's terminal is revoked
                outcome = e.apply(.revoke(room: rooms.randomElement(using: &rng)!))
            }
            if let outcome { outcomes.append(outcome) }
            // After every step.
            XCTAssertTrue(e.revoked.isDisjoint(with: e.approved.values), "seed \(seed): a revoked key holds a room")
            XCTAssertEqual(Set(e.approved.values).count, e.approved.count, "seed \(seed): a key holds two rooms")
            XCTAssertTrue(e.pending.allSatisfy { !e.revoked.contains($0.identity) }, "seed \(seed): a revoked key is pending")
            XCTAssertTrue(e.retired.isDisjoint(with: e.approved.values), "seed \(seed): a retired key holds a room")
            for (room, key) in e.approved {
                XCTAssertEqual(Enrolment.standing(of: key, approved: e.approved, revoked: e.revoked), .approved(room: room))
            }
        }
        return outcomes
    }

    private func heard(_ key: TerminalIdentity, room: String) -> Enrolment.Command {
        .heard(EnrolmentRequest(site: "praxis", room: room, software: "0.9.0", signedWith: key), key.publicIdentity)
    }

    private func identity(_ rng: inout SplitMix64) throws -> TerminalIdentity {
        try TerminalIdentity(seed: (0..<4).flatMap { _ in withUnsafeBytes(of: rng.next()) { Array($0) } })
    }
}
