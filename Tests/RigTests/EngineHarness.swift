import AudioPipeline
import EchoCancel
import Foundation
import RealTime
import TestSupport

/// Runs the real engine on a rig room, in this process, with a far-end noise feeder.
final class EngineHarness: @unchecked Sendable {
    let engine: AudioEngine
    let devices: AudioDevices
    let farEnd: SampleRing
    private let thread: RealtimeThread
    private let feederStop = Flag(false)
    private var feeder: Thread?
    private(set) var startedAt = Date()

    init(room: String, periodFrames: Int, bufferPeriods: Int = 3, countAllocations: Bool = true) throws {
        try Rig.require()
        farEnd = SampleRing(minimumCapacity: periodFrames * 8)
        let mixer = Mixer(inputs: [MixerInput(source: farEnd)], frameSize: periodFrames)
        let canceller = try EchoCanceller(EchoCancelSettings(frameSize: periodFrames, tailMilliseconds: 200))
        let hook: (@Sendable () -> Void)? = countAllocations ? { @Sendable in AllocationCounter.trackCurrentThread() } : nil
        engine = AudioEngine(frameSize: periodFrames, mixer: mixer, canceller: canceller, onAudioThreadStart: hook)
        devices = try AudioDevices(DeviceSettings(captureDevice: room, playbackDevice: room,
                                                  periodFrames: periodFrames, bufferPeriods: bufferPeriods))
        let engine = engine, devices = devices
        thread = RealtimeThread(name: "test-audio") { _ = engine.run(devices: devices) }
    }

    /// Starts the feeder and the audio thread, and waits until the loop runs.
    func start() throws {
        let ring = farEnd, stop = feederStop, frame = engine.frameSize
        let f = Thread {
            // Quiet noise as far-end signal, so mixing and echo cancellation do real work.
            var rng = SplitMixNoise(seed: 7)
            var chunk = [Int16](repeating: 0, count: frame)
            while !stop.isSet {
                while ring.availableToWrite >= frame {
                    for i in 0..<frame { chunk[i] = rng.sample(amplitude: 2000) }
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
        engine.stopRequest.set(true)
        thread.join()
        feederStop.set(true)
        while let f = feeder, !f.isFinished { usleep(1000) }
    }
}

struct SplitMixNoise {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func sample(amplitude: Int) -> Int16 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        z ^= z >> 31
        return Int16(Int(z % UInt64(2 * amplitude + 1)) - amplitude)
    }
}
