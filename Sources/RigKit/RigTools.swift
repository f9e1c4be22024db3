import Control
import Foundation
import Synchronization
import Glibc
import Posix

/// Paths inside the repository (this file lives in Tests/TestSupport).
public enum Repo {
    public static let root: String = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../..").standardizedFileURL.path

    /// A program built next to intercomd (swift build puts every product in .build/<config>/).
    public static func builtProgram(_ name: String) -> String {
        URL(fileURLWithPath: DaemonProcess.binary).deletingLastPathComponent().appendingPathComponent(name).path
    }

    /// A fresh folder for one test's files (recordings, logs, configurations).
    public static func scratchFolder(_ name: String) throws -> String {
        let dir = NSTemporaryDirectory() + "\(name)-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }
}

/// Free UDP ports, found by binding port 0 and releasing it again (racy in theory: another process
/// may take it meanwhile), never the same one twice in a test process.
public enum FreePort {
    /// Every port handed out in this process: the kernel may give a port it just let go again, and
    /// two rooms of one test then got the same one (a configuration refused, once in a CI run).
    private static let given = Mutex<Set<Int>>([])

    /// A UDP port on `address` that was free a moment ago and that no earlier call returned, whose
    /// TCP twin is free on every address too: a daemon's site document transfers listen there
    /// on its signalling port (a CI run once lost a terminal to a TCP port already taken).
    public static func udp(address: String = "127.0.0.1") throws -> Int {
        for _ in 0..<100 {
            let port = try unusedUDP(address: address)
            guard tcpFree(port) else { continue }
            if given.withLock({ $0.insert(port).inserted }) { return port }
        }
        throw RigError(description: "no UDP port on \(address) that was not handed out before, in 100 tries")
    }

    /// Whether a TCP listener could bind `port` on 0.0.0.0 now, as the daemon's does.
    private static func tcpFree(_ port: Int) -> Bool {
        (try? TCPSocket.listen(IPv4Endpoint(address: 0, port: UInt16(port)), backlog: 1)) != nil
    }

    private static func unusedUDP(address: String) throws -> Int {
        let host: UInt32
        do { host = try IPv4Endpoint.parseAddress(address) } catch { throw RigError(description: "not an IPv4 address: \(address)") }
        do { return Int(try UDPSocket(bind: IPv4Endpoint(address: host, port: 0)).local.port) } catch {
            throw RigError(description: "bind a UDP port on \(address): \(error)")
        }
    }
}

/// Speech quality of a recording against the clip that was played: scripts/quality.py in the
/// project's venv (scripts/setup.sh makes it), which aligns them by cross-correlation (the whole
/// clip, and each 0.5 s piece on its own, since a jitter buffer may move its delay mid-talk) and
/// computes STOI (pystoi) and wide-band PESQ (pesq).
public struct Quality: Decodable, Sendable, CustomStringConvertible {
    /// Speech heard where three or more rooms share the rig's one sound server. There it holds
    /// every stream's reads up (typed `reader_held_up`: 3-13 per stream and call, 26-80 frames
    /// dropped, in all 11 attempts of the 1:3 call on 2026-11-30, also in those without an xrun
    /// or a machine stop), and STOI read 0.67-0.99 for the same call: the rig's cost, not the
    /// call's (`CallRooms.streamHealth` prints it). With two rooms speech quality is asked for: 0.80.
    public static let minSTOIManyRooms = 0.70

    /// Where the whole clip best matches the recording, ms.
    public let lagMs: Double
    /// `lagMs` minus the reference offset given.
    public let delayMs: Double
    /// The smallest and largest delay of the pieces (minus the reference offset), ms.
    public let delayMinMs: Double
    public let delayMaxMs: Double
    /// Normalised cross-correlation of the whole clip at `lagMs` (1 = the same waveform).
    public let peak: Double
    /// Short-Time Objective Intelligibility, 0...1, of the piecewise-aligned recording.
    public let stoi: Double
    /// STOI with the single whole-clip alignment (falls when the delay moved mid-clip).
    public let stoiFixed: Double
    /// PESQ wide band (MOS-LQO), nil when not asked for or when it failed.
    public let pesqWb: Double?
    /// RMS level of the aligned recording, dBFS.
    public let levelDb: Double

    enum CodingKeys: String, CodingKey {
        case lagMs = "lag_ms", delayMs = "delay_ms", delayMinMs = "delay_min_ms", delayMaxMs = "delay_max_ms", peak
        case stoi, stoiFixed = "stoi_fixed", pesqWb = "pesq_wb", levelDb = "level_db"
    }

    public var description: String {
        String(format: "STOI %.3f (one alignment: %.3f), PESQ-WB %@, whole-clip correlation %.3f, level %.1f dBFS, at %.0f ms in the recording (pieces %.0f-%.0f ms)",
               stoi, stoiFixed, pesqWb.map { String(format: "%.2f", $0) } ?? "-", peak, levelDb, lagMs,
               delayMinMs + (lagMs - delayMs), delayMaxMs + (lagMs - delayMs))
    }

    public static var python: String { Repo.root + "/.venv/bin/python" }

    /// Measures one recording against its clip.
    public static func measure(reference: String, recording: String, referenceOffsetMs: Double = 0, pesq: Bool = true) throws -> Quality {
        try measure([(reference, recording)], referenceOffsetMs: referenceOffsetMs, pesq: pesq)[0]
    }

    /// Measures several (clip, recording) pairs in one run of the script (it takes ~1.5 s to start).
    public static func measure(_ pairs: [(reference: String, recording: String)], referenceOffsetMs: Double = 0, pesq: Bool = true) throws -> [Quality] {
        guard FileManager.default.isExecutableFile(atPath: python) else {
            throw RigError(description: "\(python) is missing: run scripts/setup.sh (it installs pystoi and pesq into .venv)")
        }
        var args = [Repo.root + "/scripts/quality.py"] + pairs.flatMap { [$0.reference, $0.recording] }
        args += ["--reference-offset-ms", "\(referenceOffsetMs)"]
        if !pesq { args.append("--no-pesq") }
        let output = try Command.run(python, args)
        let lines = output.split(separator: "\n").filter { $0.hasPrefix("{") }
        guard lines.count == pairs.count else {
            throw RigError(description: "quality.py printed \(lines.count) results for \(pairs.count) pairs: \(output)")
        }
        return try lines.map { try JSONDecoder().decode(Quality.self, from: Data($0.utf8)) }
    }
}

/// The `network:` statistics line intercomd logs (`final network: ...` at exit).
extension DaemonStatistics.Network {
    /// One line for a test's output.
    public var summary: String {
        "ssrc=\(ssrc.map { String(format: "%08x", $0) } ?? "-") sent=\(sent) fec_carried=\(fecCarried) received=\(accepted)/\(datagrams) malformed=\(malformed) not_routed=\(notRouted) "
            + streams.map { s in
                String(format: "[%08x from %@: delay=%.1f target=%.1f ms received=%d played=%d concealed=%d fec=%d fec_missed=%d late=%d underruns=%d cut_backs=%d inserted=%d dropped=%d new_timelines=%d drift=%.0fppm trim=%.0fppm slewed=%.1fms pause_jumped=%.1fms path_shift=%.1fms]",
                       s.ssrc, s.source, s.delayMs, s.targetMs, s.received, s.played, s.concealed, s.fecRecovered, s.fecMissed,
                       s.late, s.underruns, s.cutBacks, s.inserted, s.dropped, s.newTimelines, s.driftPPM, s.trimPPM, s.slewedMs, s.pauseJumpedMs, s.pathShiftMs)
            }.joined(separator: " ")
    }
}

/// Records a rig room's speaker (its sink's monitor) to a WAV file with parec.
public final class RoomRecorder: @unchecked Sendable {
    public let path: String
    private let process: Process

    public init(room: String, path: String) throws {
        self.path = path
        process = try Command.start("/usr/bin/parec", [
            "--device=\(room).monitor", "--rate=48000", "--channels=1", "--format=s16le",
            "--latency-msec=10", "--file-format=wav", path,
        ])
        ChildProcesses.started(process.processIdentifier)
    }

    /// Stops the recorder (SIGINT: parec finishes the WAV header) and waits for it.
    public func stop() {
        if process.isRunning { process.interrupt() }
        let deadline = Date().addingTimeInterval(3)
        while process.isRunning, Date() < deadline { usleep(10_000) }
        if process.isRunning { process.terminate(); process.waitUntilExit() }
        ChildProcesses.ended(process.processIdentifier)
    }
}

/// The impairment relay (Sources/impairment-relay) as a child process on loopback.
public final class ImpairmentRelayProcess: @unchecked Sendable {
    public let process: Process
    public let port: Int
    public let logPath: String

    /// Starts `impairment-relay --listen <listen> --target <target> <options>` and waits until
    /// it says which port it listens on.
    public convenience init(targetPort: Int, options: [String]) throws {
        try self.init(listen: "127.0.0.1:0", target: "127.0.0.1:\(targetPort)", options: options)
    }

    public init(listen: String, target: String, options: [String]) throws {
        logPath = NSTemporaryDirectory() + "impairment-relay-\(UUID().uuidString.prefix(8)).log"
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        process = try Command.start(Repo.builtProgram("impairment-relay"),
                                    ["--listen", listen, "--target", target] + options,
                                    stdout: handle, stderr: handle)
        let deadline = Date().addingTimeInterval(5)
        var found: Int?
        while found == nil, Date() < deadline, process.isRunning {
            let text = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
            if let r = text.range(of: "(port ") { found = Int(text[r.upperBound...].prefix { $0.isNumber }) }
            if found == nil { usleep(20_000) }
        }
        guard let found else {
            if process.isRunning { process.terminate() }
            throw RigError(description: "impairment-relay did not start: \((try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "")")
        }
        port = found
    }

    public var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// SIGTERM; the relay prints its statistics and exits. Returns its exit status.
    @discardableResult
    public func stop() -> Int32 {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        return process.terminationStatus
    }
}

extension DaemonProcess {
    /// The xruns of the daemon's audio devices when it was stopped (nil: not asked, or it could
    /// not answer): above 0 means the machine starved its audio thread.
    public var finalXruns: Int? { finalStatistics?.audio.xruns }
    /// Its network counters when it was stopped (nil: not asked, or no network).
    public var finalNetwork: DaemonStatistics.Network? { finalStatistics?.network }
}
