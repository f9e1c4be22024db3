import AudioPipeline
import Control
import Foundation
import Logging
import Posix
import SignalTools
import Synchronization

/// The device round-trip test of a running daemon (`intercomctl loopback`): arms the engine's
/// `LoopbackProbe`, waits for it on a short-lived thread of its own, analyses the recording there
/// and keeps the result for `loopback_result`. The control thread only arms and reads.
final class DeviceLoopback: Sendable {
    let probe: LoopbackProbe
    private let signal: [Int16]
    private let last = Mutex<LoopbackStatus>(LoopbackStatus(state: .idle))
    private let log: Logger

    /// The test signal: a logarithmic chirp, 100 Hz to 8 kHz in 0.5 s at -12 dBFS, band-limited
    /// like speech so that the correlation peak is sharp and its sub-sample position reliable.
    static func chirp(sampleRate: Int) -> [Int16] {
        Signals.toInt16(Signals.chirp(from: 100, to: 8000, duration: 0.5, sampleRate: sampleRate, amplitude: 0.25))
    }

    /// Longest round trip the recording covers after the signal.
    static let maxRoundTripMs = 500

    init(sampleRate: Int, frameSize: Int, logger: Logger) {
        signal = Self.chirp(sampleRate: sampleRate)
        probe = LoopbackProbe(signal: signal, sampleRate: sampleRate, frameSize: frameSize,
                              maxRoundTripSamples: sampleRate * Self.maxRoundTripMs / 1000)
        log = logger
    }

    /// Control thread (or the self-test's): starts a measurement (refused while one runs or the
    /// audio is stopped); `gain` scales the chirp (the self-test's is quiet).
    func start(insertMs: Double, audioRunning: Bool, gain: Double = 1) -> Result<ControlReply, ControlFailure> {
        guard audioRunning else { return .failure(ControlFailure(.unavailable, "the audio devices are not running")) }
        let insert = Int((insertMs * Double(probe.sampleRate) / 1000).rounded())
        let started = last.withLock { s -> Bool in
            guard s.state != .running, probe.arm(insertSamples: insert, gain: gain) else { return false }
            s = LoopbackStatus(state: .running)
            return true
        }
        guard started else { return .failure(ControlFailure(.busy, "a loopback test is running")) }
        log.notice("loopback: device round-trip test started\(insert > 0 ? " (\(insert) samples inserted)" : "")\(gain < 1 ? String(format: " (chirp at %.0f dB)", 20 * log10(gain)) : "")")
        do {
            try WorkerThread.start(name: "loopback") { [self] in finish() }
        } catch {
            last.withLock { $0 = LoopbackStatus(state: .aborted) }
            return .failure(ControlFailure(.unavailable, "\(error)"))
        }
        return .success(.loopback(LoopbackStatus(state: .running)))
    }

    func status() -> ControlReply { .loopback(currentStatus) }
    var currentStatus: LoopbackStatus { last.withLock { $0 } }

    /// Its own thread: waits for the probe (bounded), then analyses.
    private func finish() {
        let deadline = Date().addingTimeInterval(Double(signal.count) / Double(probe.sampleRate) + 3)
        while probe.state == .running, Date() < deadline { usleep(20_000) }
        let state = probe.state
        guard state == .done else {
            log.warning("loopback: \(state == .aborted ? "aborted: the audio streams restarted (xrun) during the test" : "timed out: the audio thread did not run it")")
            last.withLock { $0 = LoopbackStatus(state: .aborted) }
            return
        }
        let timing = LoopbackAnalysis.Timing(
            signalPosition: probe.signalPosition.load, capturePositionAtWrite: probe.capturePositionAtWrite.load,
            recordingStartPosition: probe.recordingStartPosition.load, frameSize: probe.frameSize, sampleRate: probe.sampleRate)
        let recording = Array(probe.recording.prefix(probe.recorded.load))
        let result = LoopbackAnalysis.analyse(signal: signal, recording: recording, timing: timing)
        log.notice("loopback: \(result.roundTripMs.map { String(format: "round trip %.2f ms", $0) } ?? "no measurement")\(result.problems.isEmpty ? "" : ": " + result.problems.joined(separator: "; "))")
        last.withLock { $0 = LoopbackStatus(state: .done, result: result) }
    }
}
