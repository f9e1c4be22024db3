import AudioPipeline
import Calls
import Codec
import IntercomConfig
import Foundation
import IntercomDaemon
import Posix
import RealTime
import RTP
import SignalTools
import SiteSecurity
import TestSupport
import Transport
import XCTest

/// Interoperability with an RTP/Opus implementation nobody here wrote: GStreamer from Debian,
/// against the real daemon on the rig, both ways. Same quality measure and threshold as
/// NetworkMediaTests (STOI of the speech clip, scripts/quality.py).
final class GStreamerInteropTests: XCTestCase {
    static let minSTOI = NetworkMediaTests.minSTOI
    static let gst = "/usr/bin/gst-launch-1.0"

    /// Fails clearly when a GStreamer element is missing (scripts/setup.sh installs them).
    private func requireElements(_ names: [String]) throws {
        for name in names {
            do {
                try Command.run("/usr/bin/gst-inspect-1.0", [name])
            } catch {
                XCTFail("GStreamer element '\(name)' is missing (gstreamer1.0-plugins-base/-good; scripts/setup.sh): \(error)")
                throw error
            }
        }
    }

    private func stopGStreamer(_ p: Process) {
        // SIGINT: with -e the pipeline sends EOS first, so wavenc finishes the file.
        if p.isRunning { p.interrupt() }
        let deadline = Date().addingTimeInterval(5)
        while p.isRunning, Date() < deadline { usleep(20_000) }
        if p.isRunning { p.terminate(); p.waitUntilExit() }
    }

    /// intercomd on room A sends its microphone (a talker in room A's air) to GStreamer
    /// (udpsrc ! rtpjitterbuffer ! rtpopusdepay ! opusdec ! wavenc), which must decode the speech.
    func testGStreamerDecodesTheSpeechIntercomdSends() throws {
        try Rig.require()
        try requireElements(["udpsrc", "rtpjitterbuffer", "rtpopusdepay", "opusdec", "wavenc"])
        try measureWithRetries("intercomd → GStreamer") { c in
            let dir = try Repo.scratchFolder("gst-receives")
            let port = try FreePort.udp()
            let wav = "\(dir)/gstreamer-decoded.wav"
            let log = FileHandle(forWritingAtPath: "/dev/null")
            let gst = try Command.start(Self.gst, [
                "-e", "udpsrc", "address=127.0.0.1", "port=\(port)",
                "caps=application/x-rtp,media=audio,clock-rate=48000,encoding-name=OPUS,payload=96",
                "!", "rtpjitterbuffer", "latency=50", "!", "rtpopusdepay", "!", "opusdec", "!", "audioconvert", "!",
                "audio/x-raw,format=S16LE,channels=1,rate=48000", "!", "wavenc", "!", "filesink", "location=\(wav)",
            ], stdout: log, stderr: log)
            defer { stopGStreamer(gst) }
            let config = try DaemonProcess.writeRoomConfig("roomA", extra: "[network]\nlisten_port = 0\npeers = [\"127.0.0.1:\(port)\"]")
            let a = try DaemonProcess(arguments: ["--config", config], name: "intercomd-roomA")
            defer { a.terminate() }
            XCTAssertTrue(a.waitUntilRunning(timeout: 10), a.log)
            Thread.sleep(forTimeInterval: 0.5)

            let clip = try Speech.roomA()
            let talker = try Rig.startTalker(room: "roomA", wav: clip)
            talker.waitUntilExit()
            Thread.sleep(forTimeInterval: 0.5)
            XCTAssertEqual(a.terminate(), 0, a.log)
            stopGStreamer(gst)

            let decoded = try WAVAudio.read(path: wav)
            XCTAssertEqual(decoded.sampleRate, 48000)
            let q = try Quality.measure(reference: clip, recording: wav)
            print(String(format: "gstreamer interop: intercomd → GStreamer: decoded %.1f s; %@ (%@)", decoded.duration, q.description, wav))
            c.check(q.stoi >= Self.minSTOI, "GStreamer decodes intelligible speech from intercomd: \(q); \(a.logPath)")
            return [a]
        }
    }

    /// GStreamer encodes a speech file (opusenc ! rtpopuspay, its default 20 ms frames) and sends it
    /// to intercomd on room B (10 ms periods), whose speaker must play it: each packet plays as two
    /// frames.
    func testIntercomdPlaysTheSpeechGStreamerSends() throws {
        try Rig.require()
        try requireElements(["filesrc", "wavparse", "audioresample", "opusenc", "rtpopuspay", "udpsink"])
        try measureWithRetries("GStreamer → intercomd") { c in
            let dir = try Repo.scratchFolder("gst-sends")
            let port = try FreePort.udp()
            let config = try DaemonProcess.writeRoomConfig("roomB", extra: "[network]\nlisten_port = \(port)\n[log]\nstats_interval_s = 1")
            let b = try DaemonProcess(arguments: ["--config", config], name: "intercomd-roomB")
            defer { b.terminate() }
            XCTAssertTrue(b.waitUntilRunning(timeout: 10), b.log)
            let speaker = try RoomRecorder(room: "roomB", path: "\(dir)/roomB-speaker.wav")
            defer { speaker.stop() }
            Thread.sleep(forTimeInterval: 0.3)

            let clip = try Speech.roomB()
            try Command.run(Self.gst, [
                "-q", "filesrc", "location=\(clip)", "!", "wavparse", "!", "audioconvert", "!", "audioresample", "!",
                "audio/x-raw,rate=48000,channels=1", "!", "opusenc", "!", "rtpopuspay", "pt=96", "!",
                "udpsink", "host=127.0.0.1", "port=\(port)",
            ])  // udpsink syncs to the clock: the file goes out in real time, and gst-launch ends with it
            Thread.sleep(forTimeInterval: 0.8)
            speaker.stop()
            XCTAssertEqual(b.terminate(), 0, b.log)
            let stats = try XCTUnwrap(b.finalNetwork, "B answered stats before it stopped: \(b.log)")
            XCTAssertGreaterThan(stats.accepted, 200, "intercomd accepted GStreamer's packets: \(stats.summary)")
            XCTAssertEqual(stats.malformed, 0, stats.summary)

            let q = try Quality.measure(reference: clip, recording: speaker.path)
            print("gstreamer interop: GStreamer → intercomd: \(q) (\(speaker.path)); \(stats.summary)")
            c.check(q.stoi >= Self.minSTOI, "room B's speaker plays GStreamer's speech: \(q); \(b.logPath)")
            return [b]
        }
    }

    /// Our SRTP, as a call's sender makes it (MediaSender, the key MediaKeys derives for one call
    /// and room, libsrtp2), decrypted by GStreamer's srtpdec given that key: it must decode the
    /// speech. A second srtpdec given the key of another room in the same call decodes nothing.
    /// No sound devices: the stream is sent straight from the sender, paced at 10 ms.
    func testGStreamerSrtpdecDecryptsOurSRTPGivenTheDerivedKey() throws {
        try requireElements(["udpsrc", "srtpdec", "rtpjitterbuffer", "rtpopusdepay", "opusdec", "wavenc"])
        let dir = try Repo.scratchFolder("gst-srtp")
        let site = try SiteKey(bytes: (0..<32).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 3) })
        let call = CallID(0x5EED_CA11), room = RoomID("empfang")!
        let key = MediaKeys.key(site, call: call, sender: room)
        let wrongKey = MediaKeys.key(site, call: call, sender: RoomID("labor")!)
        let rtp = try RTPSender(payloadType: 96)
        let socket = try UDPSocket(bind: .loopback(port: 0))
        let ports = [try FreePort.udp(), try FreePort.udp()]
        let sender = MediaSender(encoder: try OpusEncoder(.default), rtp: rtp, socket: socket,
                                 peers: ports.map { IPv4Endpoint.loopback(port: UInt16($0)) }, frameSize: 480,
                                 protection: try SRTPSession(key: key, direction: .outbound(ssrc: rtp.ssrc)))
        let hex = { (k: [UInt8]) in k.map { String(format: "%02x", $0) }.joined() }
        let wavs = ["\(dir)/srtpdec-right-key.wav", "\(dir)/srtpdec-wrong-key.wav"]
        let null = FileHandle(forWritingAtPath: "/dev/null")
        let pipelines = try zip(ports, zip([key, wrongKey], wavs)).map { port, kw in
            try Command.start(Self.gst, [
                "-e", "udpsrc", "address=127.0.0.1", "port=\(port)",
                "caps=application/x-srtp,media=audio,clock-rate=48000,encoding-name=OPUS,payload=96,ssrc=(uint)\(rtp.ssrc),"
                    + "srtp-key=(buffer)\(hex(kw.0)),srtp-cipher=aes-128-icm,srtp-auth=hmac-sha1-80,"
                    + "srtcp-cipher=aes-128-icm,srtcp-auth=hmac-sha1-80",
                "!", "srtpdec", "!", "rtpjitterbuffer", "latency=50", "!", "rtpopusdepay", "!", "opusdec", "!", "audioconvert", "!",
                "audio/x-raw,format=S16LE,channels=1,rate=48000", "!", "wavenc", "!", "filesink", "location=\(kw.1)",
            ], stdout: null, stderr: null)
        }
        defer { pipelines.forEach(stopGStreamer) }
        Thread.sleep(forTimeInterval: 1)  // both pipelines listening

        let clip = try Speech.roomA()
        let speech = try WAVAudio.read(path: clip).samples
        var next = MonotonicClock.nanoseconds()
        speech.withUnsafeBufferPointer { pcm in
            for f in 0..<(pcm.count / 480) {
                sender.send(pcm.baseAddress! + f * 480)
                next += 10_000_000
                let now = MonotonicClock.nanoseconds()
                if next > now { usleep(UInt32((next - now) / 1000)) }
            }
        }
        Thread.sleep(forTimeInterval: 0.5)
        pipelines.forEach(stopGStreamer)
        XCTAssertEqual(sender.protectErrors.load, 0)
        XCTAssertGreaterThan(sender.packetsSent.load, 200)

        let q = try Quality.measure(reference: clip, recording: wavs[0])
        let wrong = (try? WAVAudio.read(path: wavs[1]))?.samples ?? []
        print("gstreamer interop: SRTP → srtpdec with the derived key: \(q); with another room's key: \(wrong.count) samples decoded (\(wavs[0]))")
        XCTAssertGreaterThanOrEqual(q.stoi, Self.minSTOI, "srtpdec decodes intelligible speech from our SRTP: \(q)")
        XCTAssertLessThan(Levels.rms(wrong.map { Float($0) / 32768 }), 0.001, "another key decodes nothing audible")
    }
}
