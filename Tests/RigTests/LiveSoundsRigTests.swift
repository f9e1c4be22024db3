import Calls
import Control
import Foundation
import SignalTools
import TestSupport
import XCTest

/// What a reload (SIGHUP; a new site document applies the same way) does to a terminal's sounds
/// and audio devices during a call, through real daemons on the rig: a tone's new level is heard
/// at once and the call goes on; a WAV file that cannot be read and a voice espeak-ng does not
/// have are refused by name and the ones held stay; new audio devices wait until the call ends,
/// the status says so, and then the devices are opened again and the terminal is heard there.
final class LiveSoundsRigTests: XCTestCase {
    private static func peak(_ path: String) throws -> Int {
        try WAVAudio.read(path: path).samples.reduce(0) { max($0, abs(Int($1))) }
    }

    private static func heard(_ path: String) throws -> Set<String> {
        let notes = Tones.notes(in: try WAVAudio.read(path: path).samples)
        return Set(Cue.allCases.filter { c in
            !Tones.occurrences(of: c.notes.map { ($0.hz, $0.ms) }, in: notes).isEmpty
        }.map(\.rawValue))
    }

    func testTonesSpeechAndAudioDevicesFollowAReloadDuringACall() throws {
        try Rig.require()
        let rooms = try CallRooms(["roomA", "roomB"])
        defer { rooms.stopAll() }
        let types = """
            [notifications.material]
            label = "Material bringen"
            recipients = ["roomb"]
            text = "Material bitte"
            """
        try rooms.start("rooma", extra: types)
        let b = try rooms.start("roomb")
        let path = try XCTUnwrap(b.process.arguments?.last)
        let original = try String(contentsOfFile: path, encoding: .utf8)
        guard rooms.waitOnline("rooma", ["roomb"]) else { return XCTFail("A sees B online: \(b.log)") }
        var reloads = 0
        func reload(_ text: String) throws -> DaemonStatistics.Reload? {
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            kill(b.process.processIdentifier, SIGHUP)
            reloads += 1
            let n = reloads
            return b.waitForStatistics(timeout: 5) { $0.reload.count == n }?.reload
        }
        /// B's do-not-disturb cue, recorded at B's speaker (`rig` room).
        func dndOnAt(_ rig: String, _ name: String) throws -> String {
            let file = "\(rooms.dir)/\(name).wav"
            let recorder = try RoomRecorder(room: rig, path: file)
            defer { recorder.stop() }
            Thread.sleep(forTimeInterval: 0.3)
            _ = try rooms.control("roomb", .perform(.setDoNotDisturb(true)))
            Thread.sleep(forTimeInterval: 0.8)
            recorder.stop()
            _ = try rooms.control("roomb", .perform(.setDoNotDisturb(false)))
            Thread.sleep(forTimeInterval: 0.8)
            return file
        }

        _ = try rooms.control("rooma", .perform(.call(button: "roomb")))
        XCTAssertTrue(rooms.wait(5) { rooms.isConnected("rooma") && rooms.isConnected("roomb") })
        Thread.sleep(forTimeInterval: 1)  // the connected cue has played
        let before = try dndOnAt("roomB", "dnd-before")
        let framesBefore = try b.statistics().audio

        // 1. A tone 20 dB softer, during the call: heard so at once.
        let softer = original + "\n[tones]\ngain_db = { dnd_on = -20 }\n"
        let r1 = try XCTUnwrap(try reload(softer), b.log)
        XCTAssertEqual(r1.applied, ["tones.gain_db"], b.log)
        XCTAssertEqual(r1.notApplied, [])
        let after = try dndOnAt("roomB", "dnd-after")
        XCTAssertEqual(try Self.heard(before), ["dnd_on"])
        XCTAssertEqual(try Self.heard(after), ["dnd_on"], "the changed tone is still the tone")
        let (peakBefore, peakAfter) = (try Self.peak(before), try Self.peak(after))
        let dB = 20 * log10(Double(peakAfter) / Double(max(1, peakBefore)))
        XCTAssertEqual(dB, -20, accuracy: 2, "peaks \(peakBefore) → \(peakAfter)")

        // 2. A WAV file that is not there and a voice espeak-ng lacks: named, nothing of theirs changes.
        let broken = softer + "wav = { dnd_on = \"\(rooms.dir)/missing.wav\" }\n[speech]\nvoice = \"qq\"\n"
        let r2 = try XCTUnwrap(try reload(broken), b.log)
        XCTAssertEqual(r2.applied, [], b.log)
        XCTAssertEqual(r2.notApplied.count, 2, "\(r2.notApplied)")
        XCTAssertTrue(r2.notApplied.contains { $0.hasPrefix("tones: ") && $0.contains("missing.wav") }, "\(r2.notApplied)")
        XCTAssertTrue(r2.notApplied.contains { $0.hasPrefix("speech: ") }, "\(r2.notApplied)")
        let kept = try dndOnAt("roomB", "dnd-kept")
        let peakKept = try Self.peak(kept)
        XCTAssertEqual(20 * log10(Double(peakKept) / Double(max(1, peakBefore))), -20, accuracy: 2, "the tone held stays: \(peakKept)")

        // 3. Another voice and other devices: the voice now, the devices once the call ends.
        let moved = softer.replacingOccurrences(of: "capture_device = \"roomB\"", with: "capture_device = \"roomC\"")
            .replacingOccurrences(of: "playback_device = \"roomB\"", with: "playback_device = \"roomC\"")
            + "[speech]\nvoice = \"en\"\n"
        let r3 = try XCTUnwrap(try reload(moved), b.log)
        XCTAssertEqual(r3.applied, ["speech.voice"], b.log)
        XCTAssertEqual(r3.audioWaiting, ["audio.capture_device", "audio.playback_device"], b.log)
        XCTAssertEqual(r3.restartNeeded, [])
        XCTAssertEqual(r3.notApplied, [])
        Thread.sleep(forTimeInterval: 1)
        let inCall = try b.statistics()
        XCTAssertEqual(inCall.audio.captureDevice, "roomB", "the call keeps its devices")
        XCTAssertEqual(inCall.audio.sessions, framesBefore.sessions, "the devices were not opened again during the call")
        XCTAssertTrue(rooms.isConnected("rooma") && rooms.isConnected("roomb"), "the call goes on")
        XCTAssertGreaterThan(inCall.audio.frames, framesBefore.frames + 250, "the audio ran on")
        let status = try Command.run(Repo.builtProgram("intercomctl"), ["stats", "--socket", rooms.room("roomb").socket])
        XCTAssertTrue(status.contains("audio devices open again once no call runs, for audio.capture_device, audio.playback_device"), status)

        _ = try rooms.control("rooma", .perform(.hangUp))
        XCTAssertTrue(rooms.wait(5) { rooms.isIdle("roomb") })
        let reopened = b.waitForStatistics(timeout: 5) { $0.reload.audioReopens == 1 && $0.audio.running }
        XCTAssertEqual(reopened?.reload.audioWaiting, [], b.log)
        XCTAssertEqual(reopened?.audio.captureDevice, "roomC", b.log)
        XCTAssertEqual(reopened?.audio.playbackDevice, "roomC", b.log)
        XCTAssertEqual(reopened?.audio.sessions, framesBefore.sessions + 1, b.log)
        // B is heard in room C now, and no longer in room B.
        let inC = try dndOnAt("roomC", "dnd-roomc")
        XCTAssertEqual(try Self.heard(inC), ["dnd_on"], b.log)
        let inB = try dndOnAt("roomB", "dnd-roomb")
        XCTAssertEqual(try Self.heard(inB), [], "B's speaker left room B")

        // A notification, read with the new voice.
        _ = try rooms.control("rooma", .perform(.notify(type: "material")))
        XCTAssertTrue(rooms.wait(10) { (try? b.statistics())?.calls?.speech.spoken == 1 }, "read aloud: \(b.log)")
        XCTAssertEqual(try b.statistics().calls?.speech.failures, 0)
        _ = try rooms.control("roomb", .perform(.acknowledge(all: true)))
        print(String(format: "live sounds: the dnd_on tone %.1f dB after gain_db -20 in a call; devices roomB → roomC after the call, %d sessions",
                     dB, reopened?.audio.sessions ?? -1))
    }
    /// A reload that names devices which open, on a terminal whose devices did not and that is
    /// waiting out a long back-off, opens them at once: nobody waits half a minute after fixing
    /// a typo in the device name.
    func testNewDevicesReplaceOnesThatDoNotOpenAtOnceNotAfterTheBackOff() throws {
        try Rig.require()
        let path = try DaemonProcess.writeRoomConfig("roomB", extra: "[retry]\ninitial_ms = 30000\nmax_ms = 60000")
        let good = try String(contentsOfFile: path, encoding: .utf8)
        try good.replacingOccurrences(of: "\"roomB\"", with: "\"nosuchcard\"").write(toFile: path, atomically: true, encoding: .utf8)
        let d = try DaemonProcess(arguments: ["--config", path], name: "intercomd-reopen")
        defer { _ = d.terminate() }
        let failing = d.waitForStatistics(timeout: 10) { $0.audio.captureDevice == "nosuchcard" }
        XCTAssertEqual(failing?.audio.running, false, d.log)
        XCTAssertEqual(failing?.audio.sessions, 0, d.log)
        Thread.sleep(forTimeInterval: 0.5)  // well into the first back-off of 30 s
        try good.write(toFile: path, atomically: true, encoding: .utf8)
        let asked = Date()
        kill(d.process.processIdentifier, SIGHUP)
        let running = d.waitForStatistics(timeout: 5) { $0.reload.audioReopens == 1 && $0.audio.running }
        let took = Date().timeIntervalSince(asked)
        XCTAssertNotNil(running, "the new devices open before the back-off ends: \(d.log)")
        XCTAssertEqual(running?.audio.captureDevice, "roomB")
        XCTAssertEqual(running?.audio.sessions, 1)
        XCTAssertEqual(running?.reload.audioWaiting, [])
        print(String(format: "reopen during back-off: running %.2f s after the reload (back-off 30 s)", took))
    }
}
