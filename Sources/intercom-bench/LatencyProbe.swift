import AudioPipeline
import EchoCancel
import Foundation
import Frames
import IntercomDaemon
import Posix
import RealTime
import SignalTools

/// Wall-clock latency from a playback device to a capture device on the rig: a chirp is handed
/// to an engine playing into `playback`, and found by cross-correlation in what `capture` records.
/// The probe's own buffering (its playback queue ahead of the chirp and the rest of the capture
/// period) is known and reported apart, so `path` is the latency of what lies between the devices.
struct LatencyProbe {
    struct Sample {
        /// Hand-out of the chirp's first frame to reading back the captured frame holding it, ms.
        let total: Double
        /// The probe's own part of `total`, ms.
        let probe: Double
        var path: Double { total - probe }
        /// Correlation peak of the chirp in the recording (1 = identical shape).
        let match: Double
    }

    let playback: String
    let capture: String
    var frame = 480
    var rate = 48000

    /// One measurement; nil when the chirp was not found (peak below 0.5).
    func measureOnce(seconds: Double = 2) throws -> Sample? {
        let chirp = Signals.toInt16(Signals.chirp(from: 200, to: 8000, duration: 0.3, sampleRate: rate, amplitude: 0.5))
        let source = BufferSource([Int16](repeating: 0, count: rate / 2) + chirp, mark: rate / 2)
        let canceller = try EchoCanceller(EchoCancelSettings(DaemonConfig.default.with {
            $0.audio.sampleRate = rate
            $0.audio.periodMs = Double(frame) * 1000 / Double(rate)
        }))
        canceller.bypass.set(true)
        let engine = try AudioEngine(frameSize: frame, mixer: Mixer(inputs: [MixerInput(source: source)], frameSize: frame),
                                 microphoneChain: MicrophoneChain(canceller: canceller, gain: MicrophoneGain(frameSize: frame), howlGuard: nil),
                                 ringFrames: 64, recordRaw: true)
        let devices = try AudioDevices(DeviceSettings(captureDevice: capture, playbackDevice: playback, periodFrames: frame))
        let bufferFrames = devices.playbackGeometry.bufferFrames
        let thread = WorkerThread(name: "probe-audio") { _ = engine.run(devices: devices) }
        try thread.start(priority: 50)
        // Drain the raw microphone every 0.5 ms, stamping each frame with the time it was seen.
        var raw: [Int16] = [], readAt: [UInt64] = []
        var buffer = [Int16](repeating: 0, count: frame)
        let end = MonotonicClock.nanoseconds() + UInt64(seconds * 1e9)
        while MonotonicClock.nanoseconds() < end {
            while engine.rawMicrophone!.read(into: &buffer, count: frame) {
                raw += buffer
                readAt.append(MonotonicClock.nanoseconds())
            }
            usleep(500)
        }
        engine.stopRequest.set()
        thread.join()
        guard let found = Correlation.findDelay(reference: Signals.toFloat(chirp), in: Signals.toFloat(raw), maxLag: raw.count - 1),
              found.peak > 0.5, source.markTime.load > 0 else { return nil }
        let k = found.lagSamples / frame, offset = found.lagSamples % frame
        guard k < readAt.count else { return nil }
        let total = Double(Int(readAt[k]) - source.markTime.load) / 1e6
        // Queued ahead of the chirp's frame when it was written (the device had room for one
        // frame: buffer - 1 frame), plus the rest of the capture period its first sample waited in.
        let probe = Double(bufferFrames - offset) * 1000 / Double(rate)
        return Sample(total: total, probe: probe, match: found.peak)
    }
}
