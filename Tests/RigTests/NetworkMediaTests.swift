import Control
import Foundation
import SignalTools
import TestSupport
import XCTest

/// Network media between intercomd processes on the rig: a talker in one room's air is heard
/// from another room's speaker (air → microphone → echo canceller → Opus → RTP/UDP → jitter buffer
/// → mix → speaker), checked by cross-correlation with the clip, by STOI (speech intelligibility,
/// scripts/quality.py) and by the measured mouth-to-ear delay (TalkerProbe).
///
/// Thresholds, from measurements on the rig (printed by every run; see README "Tests"):
/// - STOI >= `minSTOI` (0.80). Measured 0.93-0.96 on the clean path and 0.87-0.92 through 30 ms of
///   jitter and 5 % loss; a room nobody talks to gives about 0.4 (STOI's floor for noise) and
///   the other room's talker (wrong speech) about 0.25. Both controls are asserted below `maxSTOIOfNoSpeech`.
/// - Correlation peak >= 0.5 for the 1 s stretch where talk starts: its waveform is found, so its
///   position (the delay) is real. Whole-clip correlation is no gate: when the jitter buffer drops
///   or inserts a frame mid-clip the halves no longer line up (STOI is robust to that).
/// - Mouth-to-ear < 400 ms for now: the jitter buffer sometimes starts ~200 ms too late and
///   shrinks slowly (being fixed in Sources/Jitter); the measured values are printed.
/// - Clean start and stop (status 0 on SIGTERM, final statistics) are asserted at once. The
///   measurements are repeated (at most 3 runs) only when a daemon reported xruns, i.e. the
///   machine starved its audio thread: see `measureWithRetries`.
final class NetworkMediaTests: XCTestCase {
    static let minSTOI = 0.80
    static let maxSTOIOfNoSpeech = 0.60
    static let maxMouthToEarMs = 400.0

    /// Stops a daemon with SIGTERM and asserts a clean exit (status 0) and that it answered `stats`
    /// with its network counters just before: never repeated.
    @discardableResult
    private func stopCleanly(_ d: DaemonProcess, _ what: String) -> DaemonStatistics.Network? {
        XCTAssertEqual(d.terminate(), 0, "\(what) exits cleanly on SIGTERM: \(d.log)")
        let stats = d.finalNetwork
        XCTAssertNotNil(stats, "\(what) answered stats with its network counters before it stopped: \(d.log)")
        return stats
    }

    /// Checks that the probe heard the clip intelligibly with a bounded delay, and prints the figures.
    private func checkHeard(_ c: Checks, _ r: TalkerProbe.Result, _ quality: Quality, _ what: String,
                            maxDelayMs: Double = maxMouthToEarMs, logs: [DaemonProcess]) {
        let context = "\n" + logs.map { d in "\(d.logPath): \(d.finalNetwork?.summary ?? "no network statistics (still running)")" }.joined(separator: "\n")
        print(String(format: "network media: %@: mouth-to-ear %@ ms at the start of talk (%@ over the clip: %@), %@ (recording %@)",
                     what, r.mouthToEarMs.map { String(format: "%.1f", $0) } ?? "-",
                     r.delayRangeMs.map { String(format: "%.0f-%.0f ms", $0.lowerBound, $0.upperBound) } ?? "-",
                     r.summary, quality.description, r.recordingPath))
        c.check(quality.stoi >= Self.minSTOI, "\(what): STOI \(quality.stoi) < \(Self.minSTOI): not intelligible (\(quality)); stretches \(r.summary)\(context)")
        guard let onset = c.require(r.onset, "\(what): the clip's start is not in the recording (\(quality)); stretches \(r.summary)\(context)"),
              let range = r.delayRangeMs else { return }
        c.check(onset.delayMs > 0, "\(what): negative delay \(onset.delayMs) ms")
        c.check(range.upperBound < maxDelayMs, "\(what): mouth-to-ear delay up to \(range.upperBound) ms, bound \(maxDelayMs) ms; stretches \(r.summary)\(context)")
        if let found = r.found, found.peak >= TalkerProbe.minPeak {
            // Two independent alignments of the whole clip (Swift FFT correlation, numpy) agree.
            c.check(abs(quality.lagMs - Double(found.lagSamples) / 48) <= 1.0,
                    "\(what): alignments disagree: \(quality.lagMs) ms and \(Double(found.lagSamples) / 48) ms")
        }
    }

    // MARK: Tests

    /// Two rooms, A ↔ B by unicast: room A's talker is heard from room B's speaker, then room B's
    /// talker from room A's speaker. Controls that prove the measure can fail: the recording of
    /// a room nobody talks to, and A's clip against B's talker, both score low.
    func testSpeechInEachRoomIsHeardIntelligiblyFromTheOtherRoomsSpeaker() throws {
        try Rig.require()
        try measureWithRetries("A ↔ B") { c in
            let dir = try Repo.scratchFolder("net-two-rooms")
            let portA = try FreePort.udp(), portB = try FreePort.udp()
            let a = try startRoom("roomA", listen: portA, peers: ["127.0.0.1:\(portB)"])
            let b = try startRoom("roomB", listen: portB, peers: ["127.0.0.1:\(portA)"])
            defer { a.terminate(); b.terminate() }
            waitUntilStreaming([a, b])

            let nobody = try RoomRecorder(room: "roomC", path: "\(dir)/roomC-nobody-talks.wav")
            let ab = try c.probed(TalkerProbe(mouth: "roomA", ear: "roomB").run(clipPath: Speech.roomA(), folder: dir, name: "roomB-speaker"))
            nobody.stop()
            let ba = try c.probed(TalkerProbe(mouth: "roomB", ear: "roomA").run(clipPath: Speech.roomB(), folder: dir, name: "roomA-speaker"))
            let statsA = stopCleanly(a, "room A"), statsB = stopCleanly(b, "room B")
            XCTAssertEqual(statsA?.malformed, 0, statsA?.summary ?? "")
            XCTAssertEqual(statsB?.malformed, 0, statsB?.summary ?? "")
            // Two talkers and no acoustic loop: the loop canceller never subtracts anything.
            for (d, name) in [(a, "A"), (b, "B")] {
                XCTAssertEqual(d.finalStatistics?.audio.loopEngagements, 0, "room \(name)'s loop canceller never engaged without a loop")
            }
            c.checkNoDrift([(a.finalStatistics, "A", a), (b.finalStatistics, "B", b)])

            let q = try Quality.measure([(ab.clipPath, ab.recordingPath), (ba.clipPath, ba.recordingPath),
                                         (ab.clipPath, nobody.path), (ab.clipPath, ba.recordingPath)])
            checkHeard(c, ab, q[0], "A → B", logs: [a, b])
            checkHeard(c, ba, q[1], "B → A", logs: [a, b])
            let silent = q[2], wrong = q[3]
            print(String(format: "network media: controls: room nobody talks to STOI %.3f, other talker STOI %.3f", silent.stoi, wrong.stoi))
            // The controls do not depend on the machine's load: asserted at once.
            XCTAssertLessThan(silent.stoi, Self.maxSTOIOfNoSpeech, "a room nobody talks to is not intelligible speech: \(silent)")
            XCTAssertLessThan(wrong.stoi, Self.maxSTOIOfNoSpeech, "the other talker is not A's speech: \(wrong)")
            return [a, b]
        }
    }

    /// A → B through the impairment relay (30 ms jitter, 5 % random loss, seeded): the speech stays
    /// intelligible, B's final statistics show FEC recoveries and concealment, the delay stays
    /// bounded by the jitter buffer's maximum, and both daemons stop cleanly. Room C, with FEC
    /// off, sends to B through a second lossy relay: its losses are all concealed, none counted
    /// as recovered.
    func testSpeechStaysIntelligibleThrough30msJitterAnd5PercentLossAndOnlyRealFECCounts() throws {
        try Rig.require()
        try measureWithRetries("A → relay → B") { c in
            let dir = try Repo.scratchFolder("net-impaired")
            let portB = try FreePort.udp()
            let maxJitterBufferMs = 200.0
            let b = try startRoom("roomB", listen: portB, peers: [], other: "[jitter]\nmax_delay_ms = \(Int(maxJitterBufferMs))")
            let relay = try ImpairmentRelayProcess(targetPort: portB, options: ["--jitter", "30", "--loss", "5", "--seed", "3"])
            let a = try startRoom("roomA", listen: 0, peers: ["127.0.0.1:\(relay.port)"])
            let relayC = try ImpairmentRelayProcess(targetPort: portB, options: ["--loss", "5", "--seed", "4"])
            let cRoom = try startRoom("roomC", listen: 0, peers: ["127.0.0.1:\(relayC.port)"], other: "[opus]\nfec = false")
            defer { a.terminate(); b.terminate(); cRoom.terminate(); relay.stop(); relayC.stop() }
            waitUntilStreaming([a, b, cRoom])

            let ab = try c.probed(TalkerProbe(mouth: "roomA", ear: "roomB").run(clipPath: Speech.roomA(), folder: dir, name: "roomB-speaker"))
            // B first, while A still sends: its stream is still active in the final statistics.
            let stats = stopCleanly(b, "room B")
            stopCleanly(a, "room A")
            stopCleanly(cRoom, "room C")
            relayC.stop()
            XCTAssertEqual(relay.stop(), 0, "the relay stops cleanly: \(relay.log)")
            XCTAssertTrue(relay.log.contains("forward:"), "the relay ran: \(relay.log)")
            print("network media: impaired: B \(stats?.summary ?? "-")\nnetwork media: relay: \(relay.log.split(separator: "\n").filter { $0.contains("forward") }.joined())")

            // Bound: the jitter buffer's maximum + the relay's 30 ms + A's capture period, echo
            // canceller frame and Opus look-ahead (~27 ms) + B's 30 ms playback buffer + rig + 50 ms margin.
            let bound = maxJitterBufferMs + 30 + 27 + 30 + 2 + 50
            checkHeard(c, ab, try Quality.measure(reference: ab.clipPath, recording: ab.recordingPath),
                       "A → B through 30 ms jitter, 5 % loss", maxDelayMs: bound, logs: [a, b])
            let ssrcA = a.finalNetwork?.ssrc
            if let stream = c.require(stats?.streams.first { $0.ssrc == ssrcA }, "B's statistics list A's stream: \(stats?.summary ?? b.logPath)") {
                c.check(stream.fecRecovered > 0, "no lost packet was recovered from the next packet's FEC: \(stats!.summary)")
                c.check(stream.concealed + stream.underruns > 0, "no concealment: \(stats!.summary)")
            }
            let ssrcC = cRoom.finalNetwork?.ssrc
            if let fromC = c.require(stats?.streams.first { $0.ssrc == ssrcC }, "B lists C's stream \(ssrcC.map { String($0, radix: 16) } ?? "?"): \(stats?.summary ?? b.logPath)") {
                c.check(fromC.fecRecovered == 0 && fromC.concealed > 0, "C sends without FEC: its losses are concealed, not recovered: \(stats!.summary)")
            }
            let carried = { (d: DaemonProcess) in d.finalNetwork?.fecCarried ?? -1 }
            c.check(carried(a) > 0 && carried(cRoom) == 0, "A's packets carry FEC (\(carried(a))), C's none (\(carried(cRoom)))")
            return [a, b]
        }
    }

    /// Room A sends to a multicast group; rooms B and C join it on the same port (one host:
    /// loopback interface, SO_REUSEADDR, multicast loopback) and both play A's talker.
    func testMulticastSpeechFromOneRoomIsPlayedInTwoRooms() throws {
        try Rig.require()
        try measureWithRetries("A → group → B, C") { c in
            let dir = try Repo.scratchFolder("net-multicast")
            let group = "239.255.0.1", port = try FreePort.udp(address: "0.0.0.0")
            let multicast = "multicast_interface = \"127.0.0.1\"\nmulticast_loopback = true"
            let b = try startRoom("roomB", listen: port, peers: [], network: "multicast_groups = [\"\(group)\"]\n\(multicast)")
            let cRoom = try startRoom("roomC", listen: port, peers: [], network: "multicast_groups = [\"\(group)\"]\n\(multicast)")
            let a = try startRoom("roomA", listen: 0, peers: ["\(group):\(port)"], network: multicast)
            defer { a.terminate(); b.terminate(); cRoom.terminate() }
            waitUntilStreaming([a, b, cRoom])

            let earC = try RoomRecorder(room: "roomC", path: "\(dir)/roomC-speaker.wav")
            let ab = try c.probed(TalkerProbe(mouth: "roomA", ear: "roomB").run(clipPath: Speech.roomA(), folder: dir, name: "roomB-speaker"))
            earC.stop()
            let statsB = stopCleanly(b, "room B"), statsC = stopCleanly(cRoom, "room C")
            stopCleanly(a, "room A")
            for (s, room) in [(statsB, "B"), (statsC, "C")] {
                XCTAssertGreaterThan(s?.accepted ?? 0, 200, "room \(room) received A's packets: \(s?.summary ?? "")")
                XCTAssertEqual(s?.streams.count, 1, "room \(room) plays exactly one stream (A's): \(s?.summary ?? "")")
            }

            let q = try Quality.measure([(ab.clipPath, ab.recordingPath), (ab.clipPath, earC.path)])
            checkHeard(c, ab, q[0], "A → group → B", logs: [a, b, cRoom])
            let qC = q[1]
            print("network media: A → group → C: \(qC) (recording \(earC.path))")
            c.check(qC.stoi >= Self.minSTOI, "A → group → C: STOI \(qC.stoi) < \(Self.minSTOI): \(qC); \(cRoom.logPath)")
            return [a, b, cRoom]
        }
    }
    /// Low-delay mode: 5 ms periods and Opus `restricted_lowdelay` (CELT only, 2.5 ms look-ahead,
    /// no FEC) in both rooms, the jitter floor at 5 ms: A's talker is intelligible in B with a
    /// bounded delay (printed; on the rig the playback buffer it needs and the sound server's
    /// bursts at short periods dominate the delay, see BENCHMARKS.md).
    func testLowDelayModeWith5msFramesCarriesIntelligibleSpeech() throws {
        try Rig.require()
        try measureWithRetries("A → B, low delay") { c in
            let dir = try Repo.scratchFolder("net-low-delay")
            let portA = try FreePort.udp(), portB = try FreePort.udp()
            let lowDelay = "[opus]\napplication = \"restricted_lowdelay\""
            let audio = "period_ms = 5\nbuffer_periods = 6"
            let a = try startRoom("roomA", listen: portA, peers: ["127.0.0.1:\(portB)"], other: lowDelay, audio: audio)
            let b = try startRoom("roomB", listen: portB, peers: ["127.0.0.1:\(portA)"], other: lowDelay, audio: audio)
            defer { a.terminate(); b.terminate() }
            waitUntilStreaming([a, b])
            let opus = try a.statistics().network?.opus
            XCTAssertEqual(opus?.application, "restricted_lowdelay")
            XCTAssertEqual(opus?.lookaheadMs ?? 0, 2.5, accuracy: 0.01, "CELT only: 2.5 ms look-ahead")

            let ab = try c.probed(TalkerProbe(mouth: "roomA", ear: "roomB").run(clipPath: Speech.roomA(), folder: dir, name: "roomB-speaker"))
            stopCleanly(b, "room B")
            stopCleanly(a, "room A")
            checkHeard(c, ab, try Quality.measure(reference: ab.clipPath, recording: ab.recordingPath),
                       "A → B, 5 ms frames, restricted_lowdelay", logs: [a, b])
            return [a, b]
        }
    }

    /// The whole playback buffer kept full (`playback_fill_periods = 0`, the default until the
    /// fill target's drift readings were explained), both rooms sending: A's talker is heard in B,
    /// and each drift estimate reads 0 ± 20 ppm on the rig's one clock (issue 18, point 4). The
    /// other tests here run the default, 2 of 3 periods queued, topped up from capture's wake-ups;
    /// a full buffer is written as the device asks, and the jitter buffers read no playout lead.
    func testTheWholeBufferKeptFullCarriesSpeechAndReadsNoDrift() throws {
        try Rig.require()
        try measureWithRetries("A ↔ B, the whole buffer kept full") { c in
            let dir = try Repo.scratchFolder("net-full-buffer")
            let portA = try FreePort.udp(), portB = try FreePort.udp()
            let audio = "buffer_periods = 3\nplayback_fill_periods = 0"
            let a = try startRoom("roomA", listen: portA, peers: ["127.0.0.1:\(portB)"], audio: audio)
            let b = try startRoom("roomB", listen: portB, peers: ["127.0.0.1:\(portA)"], audio: audio)
            defer { a.terminate(); b.terminate() }
            waitUntilStreaming([a, b])

            let ab = try c.probed(TalkerProbe(mouth: "roomA", ear: "roomB").run(clipPath: Speech.roomA(), folder: dir, name: "roomB-speaker"))
            c.checkNoDrift([(try? a.statistics(), "A", a), (try? b.statistics(), "B", b)])
            stopCleanly(b, "room B")
            stopCleanly(a, "room A")
            checkHeard(c, ab, try Quality.measure(reference: ab.clipPath, recording: ab.recordingPath),
                       "A → B, the whole buffer kept full", logs: [a, b])
            return [a, b]
        }
    }
}
