import AudioPipeline
import Foundation
import Synchronization
import Posix
import RealTime
import SignalTools

/// Local mode (no network yet): a far-end WAV is played as if a remote room talked,
/// and the processed (and optionally raw) microphone is recorded to WAV files.
/// Both run on an ordinary thread that moves whole frames between files and the engine's rings.
public final class LocalMode: Service, @unchecked Sendable {
    // @unchecked: all mutable state belongs to the worker thread; stop() uses its stop signal.
    private let farEnd: [Int16]?
    private let farEndRing: SampleRing?
    private let microphone: SampleRing?
    private let rawMicrophone: SampleRing?
    private let processedWriter: WAVStreamWriter?
    private let rawWriter: WAVStreamWriter?
    private let frame: Int
    /// How long the worker sleeps between rounds: one frame, well inside the rings' capacity
    /// (8 frames far end, 32 microphone) and 5× fewer wake-ups than a fixed 2 ms.
    private let roundMicroseconds: UInt32
    private let stopping: StopSignal
    private let thread = Mutex<WorkerThread?>(nil)
    private var position = 0
    public let framesRecorded = Counter()

    /// - Parameter farEndRing: the mixer input the far-end WAV is fed into (nil: none).
    /// - Parameter microphone: the ring of processed microphone frames this mode drains (and records);
    ///   nil when another thread reads it and nothing is recorded.
    public init(farEndPath: String?, farEndRing: SampleRing?, recordPath: String?, rawPath: String?,
                microphone: SampleRing?, engine: AudioEngine, sampleRate: Int) throws {
        frame = engine.frameSize
        stopping = try StopSignal()
        roundMicroseconds = UInt32(max(1_000, engine.frameSize * 1_000_000 / sampleRate))
        self.microphone = microphone
        rawMicrophone = engine.rawMicrophone
        self.farEndRing = farEndRing
        if let farEndPath {
            let wav = try WAVAudio.read(path: farEndPath)
            guard wav.sampleRate == sampleRate else {
                throw LocalModeError("\(farEndPath): sample rate \(wav.sampleRate) Hz, need \(sampleRate) Hz (convert with: sox in.wav -r \(sampleRate) -c 1 out.wav)")
            }
            let mono = wav.channels == 1 ? wav.samples : wav.mono().samples
            guard !mono.isEmpty else { throw LocalModeError("\(farEndPath): no samples") }
            farEnd = mono
        } else {
            farEnd = nil
        }
        processedWriter = try recordPath.map { try WAVStreamWriter(path: $0, sampleRate: sampleRate, channels: 1) }
        rawWriter = try rawPath.map { try WAVStreamWriter(path: $0, sampleRate: sampleRate, channels: 1) }
    }

    /// True when there is nothing to feed, drain or record: no thread is started then.
    public var isIdle: Bool { farEnd == nil && microphone == nil && rawMicrophone == nil }

    public var serviceName: String { "local mode" }

    public func start() throws(SystemError) {
        guard !isIdle else { return }
        let t = try WorkerThread.start(name: "local-mode") { [self] in pump() }
        thread.withLock { $0 = t }
    }

    /// Stops the worker (the WAV files are finished by `finish`).
    public func stop() {
        stopping.set()
        thread.withLock { t -> WorkerThread? in defer { t = nil }; return t }?.join()
    }

    /// Finishes the WAV files, after `stop`.
    public func finish() throws {
        try processedWriter?.close()
        try rawWriter?.close()
    }

    private func pump() {
        let buffer = UnsafeMutablePointer<Int16>.allocate(capacity: frame)
        defer { buffer.deallocate() }
        while !stopping.isSet {
            feedFarEnd()
            if let microphone { drain(microphone, into: processedWriter, buffer, counting: true) }
            if let raw = rawMicrophone { drain(raw, into: rawWriter, buffer, counting: false) }
            stopping.sleep(seconds: Double(roundMicroseconds) / 1e6)
        }
        if let microphone { drain(microphone, into: processedWriter, buffer, counting: true) }
        if let raw = rawMicrophone { drain(raw, into: rawWriter, buffer, counting: false) }
    }

    /// Keeps the far-end ring topped up, looping the file.
    private func feedFarEnd() {
        guard let farEnd, let ring = farEndRing else { return }
        farEnd.withUnsafeBufferPointer { all in
            while ring.availableToWrite >= frame {
                var chunk = [Int16](repeating: 0, count: frame)
                for i in 0..<frame { chunk[i] = all[(position + i) % all.count] }
                position = (position + frame) % all.count
                ring.write(chunk, count: frame)
            }
        }
    }

    private func drain(_ ring: SampleRing, into writer: WAVStreamWriter?, _ buffer: UnsafeMutablePointer<Int16>, counting: Bool) {
        while ring.read(into: buffer, count: frame) {
            try? writer?.append(UnsafeBufferPointer(start: buffer, count: frame))
            if counting { framesRecorded.increment() }
        }
    }
}

public struct LocalModeError: Error, CustomStringConvertible {
    public let description: String
    init(_ d: String) { description = d }
}
