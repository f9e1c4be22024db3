import Calls
import Control
import Foundation
import SignalTools

extension Daemon {
    /// `intercomd --loopback`: the device round-trip test on this terminal's own devices while the
    /// service is stopped: starts the audio, lets the streams settle, measures once, stops. Prints
    /// the report; `plot` receives the correlation as SVG. Exit status 2 when the measurement found
    /// a problem (a silent microphone, an unheard speaker, clipping) or could not run. `json`: the
    /// result as one line of the control socket's `loopback_result` reply, for scripts and tests.
    public func runLoopback(insertMs: Double, plot: String?, json: Bool = false) -> ExitCode {
        do {
            try supervisor.start()
        } catch {
            log.error("loopback: \(error)")
            return .software
        }
        defer { supervisor.stop() }
        let started = Date()
        while !engine.stats.running.isSet, Date().timeIntervalSince(started) < 10 { usleep(20_000) }
        guard engine.stats.running.isSet else {
            log.error("loopback: the audio devices did not start")
            return .unavailable
        }
        usleep(500_000)  // the first periods after a start are the sound server's, not the path's
        if case .failure(let failure) = deviceLoopback.start(insertMs: insertMs, audioRunning: true) {
            log.error("loopback: \(failure.message)")
            return .software
        }
        var status = deviceLoopback.currentStatus
        let deadline = Date().addingTimeInterval(10)
        while status.state == .running, Date() < deadline {
            usleep(50_000)
            status = deviceLoopback.currentStatus
        }
        if json {
            if status.state == .running { status = LoopbackStatus(state: .aborted) }  // not finished: never "running" after exit
            guard let line = try? Wire.string(ControlReply.loopback(status)) else { return .software }
            print(line)
        }
        guard status.state == .done, let r = status.result else {
            if !json {
                print("the loopback test \(status.state == .aborted ? "was aborted: the audio streams restarted (an xrun) during it; measure again" : "did not finish")")
            }
            return .measurementFailed
        }
        if !json { print(r.report) }
        if let plot {
            do {
                try LoopbackPlot.svg(r).write(toFile: plot, atomically: true, encoding: .utf8)
            } catch {
                log.error("loopback: cannot write \(plot): \(error.localizedDescription)")
                return .software
            }
        }
        return r.problems.isEmpty ? .ok : .measurementFailed
    }
}
