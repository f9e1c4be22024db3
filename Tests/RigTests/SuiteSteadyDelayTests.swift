import IntercomConfig
import Control
import Foundation
import Jitter
import RigKit
import SignalTools
import TestSupport
import XCTest

/// The suite's steady delay (issue 18, point 2): the delay heard holds still while someone talks.
/// Two rooms in a call both ways at the defaults (each room's echo present), natural speech from
/// room A's air to room B's speaker, a fresh pair of daemons per talk. quality.py aligns every
/// half second of the clip on its own; how far their delays spread, beyond what a change of the
/// path made the delay move (typed: the range B's target moved over, the sender's timeline shift,
/// a frame per underrun), is the figure; the goal is 2 ms. A delay goal lives here, not in a timed
/// test: on a shared two-core machine the sound server holding a read up for 30 ms moves it by
/// that much, and how often the machine does that is not intercomd's to decide. Each talk's row
/// says what the machine did (xruns, B's reads held up, A's packets held back, real-time watchers
/// woken late); the median is over the talks it left alone. The playout's own rules (no frame
/// dropped or inserted without drift, the delay moved only in pauses) are verdicts of the test
/// command on simulated clocks (`DriftTraceTests`).
final class SuiteSteadyDelayTests: XCTestCase {
    struct Talk {
        let spreadMs: Double
        let allowedMs: Double
        let stoi: Double
        let stoiOnce: Double
        let dropped: Int
        let inserted: Int
        let pathGrew: Bool
        let spoiled: String?
        var met: Bool { spreadMs <= allowedMs && dropped == 0 && (inserted == 0 || pathGrew) }
    }

    func testSuiteTheDelayHeardHoldsStillWhileSomeoneTalks() throws {
        let mode = try SuiteMode.require()
        try Rig.require()
        let clip = try Speech.naturalNearEnd()
        let count = mode.isSmoke ? 1 : 7
        SuiteMode.emit("### Steady delay while someone talks (rig, natural speech, both ways at the defaults)")
        SuiteMode.emit("")
        SuiteMode.emitTable(intro: "Room A's air to room B's speaker, \(count) talk\(count == 1 ? "" : "s") of about 14 s, a fresh pair of daemons each. The delays of the clip's half-second pieces (quality.py) may spread by 2 ms beyond what the path made the delay move (B's target's range, the sender's timeline shift, a frame per underrun; none on a clean path), and B's jitter buffer drops no frame and inserts none unless the path grew (issue 18). Lower spread is better. A talk the machine spoiled is shown with what spoiled it and left out of the median: xruns, B's reads held up or A's packets held back by more than \(JitterBuffer.heldUpFrames) frames (typed `reader_held_up`, `arrival_stalls`), real-time watchers on every core woken a frame late.",
                            columns: ["talk", "spread of the pieces' delays", "allowed", "STOI piecewise / aligned once", "B's buffer: dropped / inserted", "the machine", "goal"])
        var talks: [Talk] = []
        for n in 1...count {
            guard let talk = try measureOneTalk(clip: clip) else {
                SuiteMode.emit("| \(n) | not measured: the clip was not found in room B | | | | | |")
                continue
            }
            talks.append(talk)
            SuiteMode.emit(String(format: "| %d | %.2f ms | %.2f ms | %.3f / %.3f | %d / %d | %@ | %@ |", n, talk.spreadMs, talk.allowedMs,
                                  talk.stoi, talk.stoiOnce, talk.dropped, talk.inserted, talk.spoiled ?? "left it alone",
                                  talk.spoiled != nil ? "not judged" : talk.met ? "met" : "not met"))
        }
        let clean = talks.filter { $0.spoiled == nil }
        SuiteMode.emit("")
        if clean.isEmpty {
            SuiteMode.emit("Every talk was spoiled by the machine: no median (goal not judged).")
        } else {
            let spreads = clean.map(\.spreadMs).sorted(), over = clean.map { $0.spreadMs - ($0.allowedMs - 2) }.sorted()
            SuiteMode.emit(String(format: "Talks the machine left alone: %d of %d; the pieces' delays spread %.2f ms (median; %.2f-%.2f), %.2f ms beyond what the path moved (median); goal met in %d of them (≤ 2 ms beyond the path, no frame dropped).",
                                  clean.count, talks.count, spreads[spreads.count / 2], spreads.first!, spreads.last!, over[over.count / 2], clean.filter(\.met).count))
        }
        SuiteMode.emit("")
        XCTAssertEqual(talks.count, count, "every talk was found in room B")
    }

    /// One talk from A to B; nil when the clip is not found in B's recording.
    private func measureOneTalk(clip: String) throws -> Talk? {
        let watch = MachineStalls()
        let portA = try FreePort.udp(), portB = try FreePort.udp()
        let a = try startRoom("roomA", listen: portA, peers: ["127.0.0.1:\(portB)"])
        let b = try startRoom("roomB", listen: portB, peers: ["127.0.0.1:\(portA)"])
        defer { a.terminate(); b.terminate() }
        waitUntilStreaming([a, b])
        let dir = try Repo.scratchFolder("steady-delay")
        let before = try b.statistics()
        let trace = StreamTrace(b)
        let r = try TalkerProbe(mouth: "roomA", ear: "roomB").run(clipPath: clip, folder: dir, name: "roomB-speaker")
        let after = try b.statistics()
        let story = trace.story()
        let stalls = watch.stop()
        _ = a.terminate()
        _ = b.terminate()
        guard r.mouthToEarMs != nil else { return nil }
        let q = try Quality.measure(reference: clip, recording: r.recordingPath, pesq: false)
        guard let s0 = before.network?.streams.first, let s1 = after.network?.streams.first else { return nil }
        let (rise, _, range) = trace.targetMoves()
        let underruns = s1.underruns - s0.underruns, shiftMs = s1.pathShiftMs - s0.pathShiftMs
        // A delay that follows the target moves within its range, up or down.
        let allowed = 2 + range + shiftMs + Double(underruns) * DaemonConfig.default.audio.periodMs
        let heldUp = s1.readerHeldUp - s0.readerHeldUp, heldBack = s1.arrivalStalls - s0.arrivalStalls
        let xruns = [a.finalXruns ?? 0, b.finalXruns ?? 0]
        var spoiled: [String] = []
        if xruns.contains(where: { $0 > 0 }) || r.xruns > 0 { spoiled.append("xruns \(xruns), probe \(r.xruns)") }
        if heldUp + heldBack > 0 { spoiled.append("B's reads held up \(heldUp), A's packets held back \(heldBack)") }
        if stalls.proves { spoiled.append("\(stalls)") }
        print("suite steady delay: \(q.description); B's stream: \(story)")
        return Talk(spreadMs: q.delayMaxMs - q.delayMinMs, allowedMs: allowed, stoi: q.stoi, stoiOnce: q.stoiFixed,
                    dropped: s1.dropped - s0.dropped, inserted: s1.inserted - s0.inserted, pathGrew: rise > 0.5 || underruns > 0,
                    spoiled: spoiled.isEmpty ? nil : spoiled.joined(separator: "; "))
    }
}
