import AudioPipeline
import IntercomConfig
import EchoCancel
import Foundation
import Frames
import IntercomDaemon
import Posix
import RealTime
import SignalTools
import TestSupport

/// Runs the real engine on a rig room, in this process, with a far-end noise feeder.
final class EngineHarness: @unchecked Sendable {
    let engine: AudioEngine
    let devices: AudioDevices
    let farEnd: SampleRing
    /// A mixer input that can hold up the audio thread once (to force an xrun from outside the engine).
    let stall = StallingSource()
    /// The terminal's own sounds: the chime and a cue, so the canceller's tonal-echo check runs.
    let tones = TonePlayer(sounds: [Chime.generate(), Tones.render([(hz: 1230, ms: 100), (hz: 840, ms: 160), (hz: 0, ms: 200)])])
    private let thread: WorkerThread
    private let feederStop = Flag(false)
    private var feeder: Thread?
    private(set) var startedAt = Date()

    /// `fillPeriods`: `audio.playback_fill_periods` (nil: the whole buffer kept full).
    init(room: String, periodFrames: Int, bufferPeriods: Int = 3, fillPeriods: Int? = nil, countAllocations: Bool = true) throws {
        try Rig.require()
        farEnd = SampleRing(minimumCapacity: periodFrames * 8)
        let mixer = Mixer(inputs: [MixerInput(source: farEnd), MixerInput(source: stall), MixerInput(source: tones, isOwnSound: true)],
                          frameSize: periodFrames)
        let canceller = try EchoCanceller(EchoCancelSettings(daemonConfig(frame: periodFrames) { $0.echo.tailMs = 200 }))
        let hook: (@Sendable () -> Void)? = countAllocations ? { @Sendable in AllocationCounter.trackCurrentThread() } : nil
        // A loopback probe too, so that a device round-trip test can run inside the counted window.
        let chirp = Signals.toInt16(Signals.chirp(from: 100, to: 8000, duration: 0.5, sampleRate: 48000, amplitude: 0.25))
        let probe = LoopbackProbe(signal: chirp, sampleRate: 48000, frameSize: periodFrames, maxRoundTripSamples: 24000)
        // And the howl guard, as the daemon runs it, inside the counted window.
        let chain = MicrophoneChain(canceller: canceller, gain: MicrophoneGain(frameSize: periodFrames),
                                    howlGuard: HowlGuard(frameSize: periodFrames, sampleRate: 48000))
        engine = try AudioEngine(frameSize: periodFrames, mixer: mixer, microphoneChain: chain, loopback: probe,
                             onAudioThreadStart: hook)
        devices = try AudioDevices(DeviceSettings(captureDevice: room, playbackDevice: room,
                                                  periodFrames: periodFrames, bufferPeriods: bufferPeriods, fillPeriods: fillPeriods))
        let engine = engine, devices = devices
        thread = WorkerThread(name: "test-audio") { _ = engine.run(devices: devices) }
    }

    /// Starts the feeder and the audio thread, and waits until the loop runs.
    func start() throws {
        let ring = farEnd, stop = feederStop, frame = engine.frameSize
        let f = Thread {
            // Quiet noise as far-end signal, so mixing and echo cancellation do real work.
            var rng = SplitMix64(seed: 7)
            var chunk = [Int16](repeating: 0, count: frame)
            while !stop.isSet {
                while ring.availableToWrite >= frame {
                    for i in 0..<frame { chunk[i] = Int16((rng.nextUnit() * 2 - 1) * 2000) }
                    ring.write(chunk, count: frame)
                }
                usleep(2000)
            }
        }
        feeder = f
        f.start()
        try thread.start(priority: 50)
        let deadline = Date().addingTimeInterval(5)
        while !engine.stats.running.isSet, Date() < deadline { usleep(1000) }
        startedAt = Date()
    }

    func stop() {
        engine.stopRequest.set()
        thread.join()
        feederStop.set(true)
        while let f = feeder, !f.isFinished { usleep(1000) }
    }
}

/// Plays nothing; when asked, sleeps once on the audio thread that mixes it (a test's stall).
final class StallingSource: FrameSource, Sendable {
    private let request = Request()

    /// The next mix sleeps `microseconds`.
    func stall(microseconds: Int) { request.post(microseconds) }

    func readFrame(into buffer: UnsafeMutablePointer<Int16>, count: Int) -> Bool {
        let us = request.take()
        if us > 0 { usleep(UInt32(us)) }
        return false
    }
}
