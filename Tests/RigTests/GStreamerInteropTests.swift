import AudioPipeline
import Foundation
import RTP
import SignalTools
import TestSupport
import Transport
import XCTest

/// Interoperability with an RTP/Opus implementation nobody here wrote: GStreamer from Debian.
final class GStreamerInteropTests: XCTestCase {
    func testGStreamerDecodesTheOpusRTPStreamIntercomdSends() throws {
        let port = try UDPSocket(bind: .loopback(port: 0)).local.port  // a free port, released again
        let wav = NSTemporaryDirectory() + "gst-\(UUID().uuidString.prefix(8)).wav"
        let gst = Process()
        gst.executableURL = URL(fileURLWithPath: "/usr/bin/gst-launch-1.0")
        gst.arguments = ["-e", "udpsrc", "address=127.0.0.1", "port=\(port)",
                         "caps=application/x-rtp,media=audio,clock-rate=48000,encoding-name=OPUS,payload=96",
                         "!", "rtpjitterbuffer", "latency=50", "!", "rtpopusdepay", "!", "opusdec", "!", "audioconvert", "!",
                         "audio/x-raw,format=S16LE,channels=1,rate=48000", "!", "wavenc", "!", "filesink", "location=\(wav)"]
        let log = Pipe()
        gst.standardOutput = log
        gst.standardError = log
        try gst.run()
        Thread.sleep(forTimeInterval: 1.0)  // let the pipeline bind its port

        let frame = 480
        let chirp = Signals.toInt16(Signals.chirp(from: 200, to: 4000, duration: 1.5, sampleRate: 48000, amplitude: 0.5))
        let sender = MediaSender(encoder: try OpusEncoder(), rtp: try RTPSender(payloadType: 96),
                                 socket: try UDPSocket(bind: .loopback(port: 0)), peers: [.loopback(port: port)], frameSize: frame)
        chirp.withUnsafeBufferPointer { pcm in
            for f in 0..<(chirp.count / frame) {
                sender.send(pcm.baseAddress! + f * frame)
                usleep(10_000)  // real-time pacing, as the audio thread would produce frames
            }
        }
        Thread.sleep(forTimeInterval: 0.5)
        gst.interrupt()  // SIGINT: with -e the pipeline sends EOS and wavenc finishes the file
        let deadline = Date().addingTimeInterval(5)
        while gst.isRunning, Date() < deadline { usleep(20_000) }
        if gst.isRunning { gst.terminate() }
        let output = String(decoding: log.fileHandleForReading.availableData, as: UTF8.self)

        let decoded = try WAVAudio.read(path: wav)
        XCTAssertEqual(decoded.sampleRate, 48000, output)
        let found = try XCTUnwrap(Correlation.findDelay(reference: Signals.toFloat(chirp), in: decoded.floats(), maxLag: 48000),
                                  "the chirp must be in GStreamer's output: \(output)")
        XCTAssertGreaterThan(found.peak, 0.9, "GStreamer decodes what intercomd sent")
        print(String(format: "gstreamer interop: decoded %.2f s, chirp found at %.1f ms with correlation %.3f",
                     decoded.duration, Double(found.lagSamples) / 48, found.peak))
    }
}
