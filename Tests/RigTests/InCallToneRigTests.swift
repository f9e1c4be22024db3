import Calls
import Control
import Foundation
import RigKit
import SignalTools
import TestSupport
import XCTest

/// A terminal's own tones during a call (a participant leaving, its microphone muted and back)
/// are echo to its canceller, not sent: none of their notes reaches the other side's speaker,
/// even 20 dB under what a listener picks out. An acoustic bar that rests on the canceller's
/// model of the echo path, so a machine stop (which moves the rig's path) spoils an attempt.
final class InCallToneRigTests: XCTestCase {
    /// What `Tones.notes` listens for by default, less 20 dB.
    private static let floorDBFS = -75.0

    func testATerminalsOwnTonesInACallDoNotReachTheOtherSide() throws {
        try Rig.require()
        let inCall = [Cue.participantLeft, .microphoneMuted, .microphoneUnmuted].flatMap { $0.notes.map(\.hz) }.filter { $0 > 0 }
        try measureWithRetries("in-call tones") { c in
            let rooms = try CallRooms(["roomA", "roomB", "roomC"])
            defer { rooms.stopAll() }
            for id in ["rooma", "roomb", "roomc"] { try rooms.start(id) }
            guard c.require(rooms.waitOnline("rooma", ["roomb", "roomc"]), "A sees B and C online") else { return [] }
            let path = "\(rooms.dir)/roomb-speaker.wav"
            var recorder: RoomRecorder?
            var before: DaemonStatistics.Audio?
            func pause() { Thread.sleep(forTimeInterval: 0.7) }
            // Round 1 lets A's canceller learn the path at these tones' frequencies, as a terminal
            // in service has; round 2 is judged. (A fresh canceller has nothing to cancel a tone
            // with: here the first unmute tone after the start reached B at up to -40 dBFS.)
            for round in 1...2 {
                if round == 2 {
                    before = try rooms.daemons["rooma"]?.statistics().audio
                    recorder = try RoomRecorder(room: rooms.room("roomb").rig, path: path)
                }
                _ = try rooms.control("rooma", .perform(.call(button: "all")))
                guard c.require(rooms.wait(5) { rooms.isConnected("roomb") && rooms.isConnected("roomc") },
                                "round \(round): B and C answer A") else { break }
                pause()
                _ = try rooms.control("rooma", .perform(.setMicrophoneMuted(true)))
                pause()
                _ = try rooms.control("rooma", .perform(.setMicrophoneMuted(false)))
                pause()
                _ = try rooms.control("roomc", .perform(.hangUp))  // A plays participant_left, still talking with B
                pause()
                _ = try rooms.control("rooma", .perform(.hangUp))
                c.check(rooms.wait(3) { ["rooma", "roomb", "roomc"].allSatisfy(rooms.isIdle) }, "round \(round): all idle")
                pause()
            }
            recorder?.stop()
            let after = try rooms.daemons["rooma"]?.statistics().audio
            let daemons = ["rooma", "roomb", "roomc"].compactMap { rooms.daemons[$0] }
            rooms.stopAll()
            guard let before, let after else {
                c.check(false, "A answered stats before and after the judged round")
                return daemons
            }

            let samples = try WAVAudio.read(path: path).samples
            func leaks(_ floor: Double) -> [Tones.HeardNote] {
                Tones.notes(in: samples, floorDBFS: floor).filter { n in inCall.contains { abs($0 - n.hz) <= 20 } }
            }
            let leaked = leaks(Self.floorDBFS)
            // How loud the loudest leak was, to 5 dB: the highest floor that still finds one.
            let loudest = stride(from: -40.0, through: Self.floorDBFS, by: -5).first { !leaks($0).isEmpty }
            let moves = after.echoReferenceMoves - before.echoReferenceMoves
            let repairs = after.echoCancellerRealignments - before.echoCancellerRealignments
            print("in-call tones: B's speaker holds \(leaked.count) of A's in-call notes above \(Self.floorDBFS) dBFS"
                  + (loudest.map { " (the loudest above \($0) dBFS)" } ?? "")
                  + "; A in the judged round: echo reference moves \(moves), re-pairings \(repairs), xruns \(after.xruns - before.xruns)")
            // The canceller's model is of the path before the move: it learns the new one anew.
            if !leaked.isEmpty && moves + repairs > 0 {
                c.rigFault("A's echo path moved in the judged round (reference moves \(moves), re-pairings \(repairs))")
            }
            c.check(leaked.isEmpty, "A's in-call tones reached B's speaker: \(leaked) in \(path)")
            return daemons
        }
    }
}
