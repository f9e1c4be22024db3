import ArgumentParser
import AudioPipeline
import CAllocCounter
import CSpeexDSP
import EchoCancel
import Foundation
import Frames
import IntercomDaemon
import Posix
import RealTime
import SignalTools

/// Measurements for BENCHMARKS.md. Prints Markdown; every figure is measured in this run.
@main
struct Bench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "intercom-bench", abstract: "Measure CPU, allocations and rig latency of the audio core.",
        subcommands: [JitterBench.self, SRTPBench.self])

    @Option(help: "Runs per CPU figure (the median is reported).")
    var runs = 7

    @Option(help: "Frames per run.")
    var frames = 3000

    @Option(help: "Rig room for the round-trip measurement (needs the virtual audio rig; empty to skip).")
    var room = "roomD"

    @ArgumentParser.Flag(help: "Only the mouth-to-ear delay between two intercomd processes on the rig (rooms A, B, D).")
    var mouthToEar = false

    @Option(help: "Mouth-to-ear: how many of the setups (10 ms, 10 ms low-delay codec, 5 ms, 2.5 ms, 10 ms and 5 ms with a fill target), pairs of daemons per setup, chirps per pair.")
    var setups = 6
    @Option var sessions = 3
    @Option var repeats = 3

    @Option(help: "Run only this variant once over --frames frames, untimed, for an instruction counter (callgrind): chain or bare.")
    var instructions: String?

    func run() throws {
        if let variant = instructions {
            // The signals are always made for 2000 frames, so that the difference of two runs with
            // different --frames is the per-frame work alone.
            guard frames <= 2000, ["chain", "bare"].contains(variant) else { throw ValidationError("--instructions chain|bare with --frames ≤ 2000") }
            let (far, mic) = signals(count: 480 * 2000)
            var allocations: UInt64 = 0
            _ = variant == "chain" ? try timeChain(far: far, mic: mic, frame: 480, allocations: &allocations)
                                   : try timeBareSpeex(far: far, mic: mic, frame: 480)
            return
        }
        if mouthToEar {
            try MouthToEar().report(Array([
                .defaults,
                .init(name: "10 ms frames, restricted_lowdelay", periodMs: 10, bufferPeriods: 3, application: "restricted_lowdelay"),
                .init(name: "low delay: 5 ms frames, restricted_lowdelay, 2 of 6 periods queued", periodMs: 5, bufferPeriods: 6, application: "restricted_lowdelay", fillPeriods: 2),
                .init(name: "low delay: 2.5 ms frames, restricted_lowdelay, 4 of 8 periods queued", periodMs: 2.5, bufferPeriods: 8, application: "restricted_lowdelay", fillPeriods: 4),
                .init(name: "defaults with the whole buffer kept full (playback_fill_periods = 0)", periodMs: 10, bufferPeriods: 3, application: "voip", fillPeriods: 0),
                .init(name: "low delay (5 ms frames) with the whole buffer of 6 periods kept full", periodMs: 5, bufferPeriods: 6, application: "restricted_lowdelay", fillPeriods: 0),
            ].prefix(setups)), sessions: sessions, repeats: repeats)
            return
        }
        print("## Audio core (measured \(ISO8601DateFormatter().string(from: Date())), \(ProcessInfo.processInfo.processorCount) cores)\n")
        try cpuAndAllocations()
        let (far, mic) = signals(count: 480 * frames)
        try ChainCPU(frames: frames).report(far: far, mic: mic, runs: runs)
        if !room.isEmpty, ProcessInfo.processInfo.environment["INTERCOM_RIG_DIR"] != nil {
            try rigRoundTrip()
        } else {
            print("\n(rig round trip skipped: run under scripts/rig.sh run -- ...)")
        }
    }

    /// Speech-like far end, echo = delayed and attenuated far end plus a quieter near end.
    private func signals(count: Int) -> (far: [Int16], mic: [Int16]) {
        var rng = SplitMix64(seed: 42)
        var far = [Int16](repeating: 0, count: count), mic = [Int16](repeating: 0, count: count)
        var lp = 0.0
        for i in 0..<count {
            let envelope = 0.5 + 0.5 * sin(Double(i) / 48000 * 2 * .pi * 3)
            lp = 0.7 * lp + 0.3 * (rng.nextUnit() * 2 - 1)
            far[i] = Int16(lp * 8000 * envelope)
            let echo = i >= 2400 ? 0.5 * Double(far[i - 2400]) : 0
            mic[i] = Int16(clamping: Int(echo + 300 * sin(Double(i) * 0.05)))
        }
        return (far, mic)
    }

    private func cpuAndAllocations() throws {
        let frame = 480
        let (far, mic) = signals(count: frame * frames)
        var chain: [Double] = [], bare: [Double] = []
        var allocations: UInt64 = 0
        for _ in 0..<runs {
            chain.append(try timeChain(far: far, mic: mic, frame: frame, allocations: &allocations))
            bare.append(try timeBareSpeex(far: far, mic: mic, frame: frame))
        }
        let framePeriodNs = 10_000_000.0
        let c = median(chain), b = median(bare)
        print("| figure | value | goal / meaning |")
        print("|---|---|---|")
        print(String(format: "| CPU per 10 ms frame, capture→AEC+preprocess→mix→playback path (median of %d runs × %d frames) | %.1f µs = %.2f %% of real time | lower is better; the whole duplex chain must stay far below 100 %% of one core |", runs, frames, c / 1000, c / framePeriodNs * 100))
        print(String(format: "| the same frames through the bare speexdsp calls | %.1f µs = %.2f %% | reference for Swift overhead |", b / 1000, b / framePeriodNs * 100))
        print(String(format: "| Swift chain / bare C (median ratio) | %.3f | goal ≤ 1.15 (issue 5); includes the mixer, gains, howl guard and ERLE tracking the bare loop does not do |", c / b))
        print(String(format: "| heap allocations per frame on the processing thread | %.3f (%llu in %d frames) | goal 0 |", Double(allocations) / Double(frames * runs), allocations, frames * runs))
    }

    /// Per-frame time of what the audio thread does between read and write.
    private func timeChain(far: [Int16], mic: [Int16], frame: Int, allocations: inout UInt64) throws -> Double {
        // As a terminal in calls runs it (media on the wire: the loop canceller too).
        let chain = try MicrophoneToWire.microphoneChain(DaemonConfig.default.with {
            $0.audio.periodMs = Double(frame) / 48
            $0.room.id = "bench"
        })
        let canceller = chain.canceller
        let source = BufferSource(far)
        let mixer = Mixer(inputs: [MixerInput(source: source)], frameSize: frame)
        let speaker = UnsafeMutablePointer<Int16>.allocate(capacity: frame)
        let cleaned = UnsafeMutablePointer<Int16>.allocate(capacity: frame)
        defer { speaker.deallocate(); cleaned.deallocate() }
        let out = SampleRing(minimumCapacity: frame * 4)
        let sink = UnsafeMutablePointer<Int16>.allocate(capacity: frame)
        defer { sink.deallocate() }
        speaker.initialize(repeating: 0, count: frame)
        canceller.played(speaker); canceller.played(speaker)
        alloc_counter_track_current_thread()
        alloc_counter_reset()
        alloc_counter_arm(1)
        let t0 = MonotonicClock.nanoseconds()
        mic.withUnsafeBufferPointer { m in
            for f in 0..<frames {
                chain.process(captured: m.baseAddress! + f * frame, into: cleaned)
                out.write(cleaned, count: frame)
                out.read(into: sink, count: frame)
                mixer.mix(into: speaker)
                canceller.played(speaker)
            }
        }
        let elapsed = Double(MonotonicClock.nanoseconds() - t0)
        alloc_counter_arm(0)
        allocations += alloc_counter_count()
        return elapsed / Double(frames)
    }

    private func timeBareSpeex(far: [Int16], mic: [Int16], frame: Int) throws -> Double {
        let echo = speex_echo_state_init(Int32(frame), 9600)!
        let pre = speex_preprocess_state_init(Int32(frame), 48000)!
        defer { speex_echo_state_destroy(echo); speex_preprocess_state_destroy(pre) }
        var rate: Int32 = 48000
        speex_echo_ctl(echo, SPEEX_ECHO_SET_SAMPLING_RATE, &rate)
        var on: Int32 = 1, noise: Int32 = -15, sup: Int32 = -40, active: Int32 = -15
        speex_preprocess_ctl(pre, SPEEX_PREPROCESS_SET_DENOISE, &on)
        speex_preprocess_ctl(pre, SPEEX_PREPROCESS_SET_NOISE_SUPPRESS, &noise)
        speex_preprocess_ctl(pre, SPEEX_PREPROCESS_SET_ECHO_STATE, UnsafeMutableRawPointer(echo))
        speex_preprocess_ctl(pre, SPEEX_PREPROCESS_SET_ECHO_SUPPRESS, &sup)
        speex_preprocess_ctl(pre, SPEEX_PREPROCESS_SET_ECHO_SUPPRESS_ACTIVE, &active)
        let out = UnsafeMutablePointer<Int16>.allocate(capacity: frame)
        defer { out.deallocate() }
        let t0 = MonotonicClock.nanoseconds()
        mic.withUnsafeBufferPointer { m in
            far.withUnsafeBufferPointer { r in
                for f in 0..<frames {
                    let ref = f >= 2 ? r.baseAddress! + (f - 2) * frame : r.baseAddress!
                    speex_echo_cancellation(echo, m.baseAddress! + f * frame, ref, out)
                    speex_preprocess_run(pre, out)
                }
            }
        }
        return Double(MonotonicClock.nanoseconds() - t0) / Double(frames)
    }

    /// Wall-clock round trip on the rig: a chirp goes through an engine (echo cancellation
    /// bypassed) into a room's speaker and back from its microphone (`LatencyProbe`).
    private func rigRoundTrip() throws {
        let probe = LatencyProbe(playback: room, capture: room)
        let runs = (0..<5).compactMap { _ in try? probe.measureOnce() }
        guard !runs.isEmpty else { print("\n(rig round trip: chirp not found)"); return }
        let ours = median(runs.map(\.probe))
        print(String(format: "| rig round trip, speaker→microphone of '%@' at 10 ms periods, wall clock (median of %d) | %.1f ms, of which intercomd's buffering %.0f ms (playback queue + capture period), the rig (sound server) %.1f ms | subtract the rig's share from latency figures measured on the rig |",
                     room, runs.count, median(runs.map(\.total)), ours, median(runs.map(\.path))))
        print("| individual runs: total / rig share (ms) | \(runs.map { String(format: "%.1f / %.1f", $0.total, $0.path) }.joined(separator: ", ")) | spread = the rig's start-up variability; ±1 ms timestamp resolution |")
    }

    private func median(_ v: [Double]) -> Double {
        let s = v.sorted()
        return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
    }
}
