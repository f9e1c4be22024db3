import Configuration
import Control
import Foundation
import Jitter
import SignalTools
import TestSupport
import XCTest

/// Issue 18, point 2: the delay heard holds still while someone talks. Two rooms in a call both
/// ways at the defaults (each room's echo present), natural speech from room A's air to room B's
/// speaker. quality.py aligns every half second of the clip on its own: their delays may spread
/// by 2 ms beyond what a change of the path made them move (none on a clean path), and the clip
/// aligned once must be as intelligible as aligned piece by piece (a delay that moved mid-talk
/// costs the single alignment). The jitter
/// buffer's target may rise with the path's jitter at any time; it shrinks only in a pause of a
/// second, and the drift corrector makes what it has not slewed in the next pause.
final class SteadyDelayTests: XCTestCase {
    func testTheDelayHeardHoldsWithin2msWhileSomeoneTalks() throws {
        try Rig.require()
        let clip = try Speech.naturalNearEnd()
        try measureWithRetries("steady delay") { c in
            let portA = try FreePort.udp(), portB = try FreePort.udp()
            let a = try startRoom("roomA", listen: portA, peers: ["127.0.0.1:\(portB)"])
            let b = try startRoom("roomB", listen: portB, peers: ["127.0.0.1:\(portA)"])
            defer { a.terminate(); b.terminate() }
            waitUntilStreaming([a, b])
            let dir = try Repo.scratchFolder("steady-delay")
            let before = try b.statistics(), aBefore = try a.statistics()
            let trace = StreamTrace(b)
            let r = try c.probed(TalkerProbe(mouth: "roomA", ear: "roomB").run(clipPath: clip, folder: dir, name: "roomB-speaker"))
            let after = try b.statistics(), aAfter = try a.statistics()
            let story = trace.story()
            let q = try Quality.measure(reference: clip, recording: r.recordingPath, pesq: false)
            let spread = q.delayMaxMs - q.delayMinMs
            let s0 = before.network?.streams.first, s1 = after.network?.streams.first
            let moved = s0.flatMap { s0 in s1.map { s1 in
                (dropped: s1.dropped - s0.dropped, inserted: s1.inserted - s0.inserted, slewedMs: s1.slewedMs - s0.slewedMs)
            } }
            print(String(format: "steady delay: the pieces' delays spread %.2f ms; STOI %.3f piecewise, %.3f aligned once; B's buffer during the talk: %@",
                         spread, q.stoi, q.stoiFixed, moved.map { "dropped \($0.dropped), inserted \($0.inserted), slewed \(String(format: "%.1f", $0.slewedMs)) ms" } ?? "no stream"))
            print("steady delay: B's stream during the talk: \(story)")
            print("steady delay: A's capture during the talk: gaps \(aAfter.audio.captureGapFrames - aBefore.audio.captureGapFrames) frames, stale \(aAfter.audio.staleCaptureFrames - aBefore.audio.staleCaptureFrames); before it: gaps \(aBefore.audio.captureGapFrames), stale \(aBefore.audio.staleCaptureFrames)")
            c.check(r.mouthToEarMs != nil, "the clip is found in room B: \(r.summary)")
            // The claim is about room B's playout (jitter buffer and drift corrector): the delay
            // heard moves by at most 2 ms beyond what the path itself made it move. Where the path
            // changed during the talk, the delay had to follow, and by how much is in B's typed
            // counters: its target rose (the path's jitter grew) or fell (it shrinks only in a
            // pause of a second, which a natural talker makes between sentences), the sender's timeline shifted
            // (B's fastest transit moved by a quarter frame or more), an underrun's concealment
            // grew it by a frame. That allowance is part of the verdict, not a reason to measure
            // again (issue 51: two repeats for a path that changed, the behaviour under test).
            // An attempt is repeated only for xruns (the daemons' or the probe's), or when B's
            // playout itself (typed: slewed, jumped in pauses, no frame dropped or inserted)
            // moved the delay by less than the spread less 2 ms: the rest moved in the sound
            // server's queues between B's speaker and the probe's ear, the instrument's path.
            let (rise, fall, range) = trace.targetMoves(), queue = trace.playbackQueueRangeMs()
            var allowed = 2.0, allowance = "none", pathGrew = false, pathMoved = false
            if let s0, let s1 {
                let underruns = s1.underruns - s0.underruns, shiftMs = s1.pathShiftMs - s0.pathShiftMs
                // A delay that follows the target moves within its range, up or down.
                allowed += range + shiftMs + Double(underruns) * DaemonConfig.default.audio.periodMs
                pathGrew = rise > 0.5 || underruns > 0
                pathMoved = pathGrew || fall > 0.5
                allowance = String(format: "the target rose %.1f ms and fell %.1f ms (range %.1f ms), the sender's timeline shifted %.1f ms, %d underruns, %d late packets",
                                   rise, fall, range, shiftMs, underruns, s1.late - s0.late)
            }
            // The machine held B's reader up (its sound server stopped asking for sound) or held
            // A's packets back (A's capture, sending or B's network thread were not run in time):
            // typed counts of B's stream; a sound card on a machine of its own does neither.
            let heldUp = (s1?.readerHeldUp ?? 0) - (s0?.readerHeldUp ?? 0)
            let stalls = (s1?.arrivalStalls ?? 0) - (s0?.arrivalStalls ?? 0)
            let wouldFail = spread > allowed || !(moved.map { $0.dropped == 0 && ($0.inserted == 0 || pathGrew) } ?? false)
            print("steady delay: during the talk B's reads were held up \(heldUp) times and A's packets arrived held back \(stalls) times (more than \(JitterBuffer.heldUpFrames) frames late)")
            if wouldFail && heldUp + stalls > 0 {
                c.rigFault("the machine held B's reads up \(heldUp) times and A's packets back \(stalls) times by more than \(JitterBuffer.heldUpFrames) frames")
            }
            if spread > allowed, let moved {
                let jumpedMs = (s1?.pauseJumpedMs ?? 0) - (s0?.pauseJumpedMs ?? 0)
                let playoutMs = moved.slewedMs + jumpedMs
                if moved.dropped + moved.inserted == 0 && playoutMs + 2 < spread {
                    c.rigFault(String(format: "B's playout moved the delay by at most %.1f ms (slewed %.1f, jumped in pauses %.1f, no frame "
                                      + "dropped or inserted): the other %.1f ms moved in the sound server's queues (B's playback "
                                      + "queue read %.1f-%.1f ms)", playoutMs, moved.slewedMs, jumpedMs, spread - playoutMs, queue.low, queue.high))
                }
            }
            print(String(format: "steady delay: spread %.2f ms allowed %.2f ms (2 ms and what the path made it move: %@)", spread, allowed, allowance))
            c.check(spread <= allowed, String(format: "the delay heard moved by %.2f ms during the talk (≤ %.2f: 2 ms and what the path made it move: %@): %@; B's stream: %@",
                                               spread, allowed, allowance, q.description, story))
            // Where the path moved, the delay moved with it on purpose and one alignment costs what
            // it moved (STOI 0.985 against 0.997 after a 3 ms rise); the spread above bounds it.
            c.check(pathMoved || q.stoiFixed >= q.stoi - 0.01, "one alignment scores as the piecewise one: \(q.description)")
            // A frame inserted is how the buffer follows a target that rose; otherwise none moves.
            c.check(moved.map { $0.dropped == 0 && ($0.inserted == 0 || pathGrew) } ?? false,
                    "B's jitter buffer dropped no frame during the talk and inserted none unless the path grew (\(allowance)): \(moved.map { "\($0)" } ?? "no stream from A")")
            return [a, b]
        }
    }
}
