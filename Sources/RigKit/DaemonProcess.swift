import IntercomConfig
import Control
import Foundation

/// Runs the built intercomd binary as a child process, with its log in a file.
public final class DaemonProcess: @unchecked Sendable {
    public let process: Process
    public let logPath: String
    private let logHandle: FileHandle
    /// The control socket its configuration names (read with the daemon's own parser), if any.
    public let controlSocket: String?
    /// The counters the daemon reported right before `terminate` stopped it (nil: it could not
    /// be asked, e.g. it had already exited); facts from a typed reply, not from the log.
    public private(set) var finalStatistics: DaemonStatistics?

    /// The intercomd binary next to the test bundle (swift build puts both in .build/<config>/).
    public static var binary: String {
        let dir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        var candidate = dir.appendingPathComponent("intercomd").path
        // The xctest bundle may be a directory on some layouts.
        if !FileManager.default.isExecutableFile(atPath: candidate) {
            candidate = dir.deletingLastPathComponent().appendingPathComponent("intercomd").path
        }
        return candidate
    }

    /// `host`: run inside that NetLab host's network namespace (`ip netns exec` replaces itself
    /// with intercomd, so the process is still the daemon's). `wrapper`: a command that execs
    /// intercomd the same way (`setpriv ...`).
    /// `logPath`: where its output goes (default: a new file in the temporary folder).
    public init(arguments: [String], environment: [String: String] = [:], name: String = "intercomd",
                host: NetLab.Host? = nil, wrapper: [String] = [], logPath: String? = nil) throws {
        controlSocket = arguments.firstIndex(of: "--config").flatMap { i in
            i + 1 < arguments.count ? (try? DaemonConfig.load(path: arguments[i + 1]))?.control.socket : nil
        }
        self.logPath = logPath ?? NSTemporaryDirectory() + "\(name)-\(UUID().uuidString.prefix(8)).log"
        _ = FileManager.default.createFile(atPath: self.logPath, contents: nil)
        logHandle = try FileHandle(forWritingTo: URL(fileURLWithPath: self.logPath))
        process = Process()
        if let host {
            process.executableURL = URL(fileURLWithPath: NetLab.ipPath)
            process.arguments = ["netns", "exec", host.namespace, Self.binary] + arguments
        } else if let command = wrapper.first {
            process.executableURL = URL(fileURLWithPath: command)
            process.arguments = Array(wrapper.dropFirst()) + [Self.binary] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: Self.binary)
            process.arguments = arguments
        }
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        process.standardOutput = logHandle
        process.standardError = logHandle
        try process.run()
        ChildProcesses.started(process.processIdentifier)
    }

    public var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// The processor time the daemon has used so far (user and system, /proc/PID/stat), seconds.
    public var cpuSeconds: Double? {
        guard let stat = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return nil }
        // After the command's closing parenthesis: state is field 3, utime and stime are 14 and 15.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }
    public var isRunning: Bool { process.isRunning }

    /// Waits until the log contains `text`; false on timeout.
    public func waitForLog(_ text: String, timeout: Double) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if log.contains(text) { return true }
            usleep(50_000)
        }
        return log.contains(text)
    }

    /// Asks the daemon for its counters (`stats` on its control socket).
    public func statistics(timeout: Double = 5) throws -> DaemonStatistics {
        guard let controlSocket else { throw RigError(description: "no control socket in this daemon's configuration") }
        let client = try ControlClient(path: controlSocket, timeout: timeout)
        defer { client.close() }
        switch try client.run(.statistics) {
        case .success(.statistics(let s)): return s
        case .success(let other): throw RigError(description: "stats answered \(other)")
        case .failure(let f): throw RigError(description: "stats refused: \(f)")
        }
    }

    /// Asks for `stats` until `condition` holds for the answer; returns that answer, or nil on timeout.
    public func waitForStatistics(timeout: Double, until condition: (DaemonStatistics) -> Bool) -> DaemonStatistics? {
        let deadline = Date().addingTimeInterval(timeout)
        repeat {
            if let s = try? statistics(timeout: 1), condition(s) { return s }
            usleep(50_000)
        } while Date() < deadline
        return nil
    }

    /// Waits until the daemon answers `stats` with its audio running (its network, calls and
    /// control socket start before that); false on timeout.
    public func waitUntilRunning(timeout: Double) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        repeat {
            if (try? statistics(timeout: 1))?.audio.running == true { return true }
            guard process.isRunning else { return false }
            usleep(50_000)
        } while Date() < deadline
        return false
    }

    /// Sends SIGTERM and waits; returns the exit status (nil if it had to be killed). The
    /// daemon's counters are read just before (`finalStatistics`).
    @discardableResult
    public func terminate(timeout: Double = 5) -> Int32? {
        if process.isRunning {
            if controlSocket != nil { finalStatistics = try? statistics(timeout: 2) }
            kill(process.processIdentifier, SIGTERM)
        }
        return awaitExit(timeout: timeout)
    }

    /// Waits for the process to exit by itself (a `--duration` run); kills it after `timeout`.
    /// Meanwhile its counters are read every 0.25 s, so that `finalStatistics` holds the last
    /// reading before it ended (an xrun in its last quarter second can be missed).
    public func wait(timeout: Double) -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning, Date() < deadline {
            if controlSocket != nil, let s = try? statistics(timeout: 0.2) { finalStatistics = s }
            usleep(250_000)
        }
        return awaitExit(timeout: deadline.timeIntervalSinceNow)
    }

    private func awaitExit(timeout: Double) -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning, Date() < deadline { usleep(20_000) }
        defer { ChildProcesses.ended(process.processIdentifier) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            return nil
        }
        return process.terminationStatus
    }

    /// A configuration for one room's device, statistics logging off and the network off
    /// unless `extra` sets them.
    public static func writeRoomConfig(_ room: String, extra: String = "", audio: String = "") throws -> String {
        try writeConfig("""
            [audio]
            capture_device = "\(room)"
            playback_device = "\(room)"
            \(audio)
            \(extra.contains("[log]") ? "" : "[log]\nstats_interval_s = 0")
            \(extra.contains("[network]") ? "" : "[network]\nlisten_port = 0")
            \(extra.contains("[control]") ? "" : "[control]\nsocket = \"\(NSTemporaryDirectory())ctl-\(room)-\(UUID().uuidString.prefix(8)).sock\"")
            \(extra.contains("[security]") ? "" : labMode)
            \(extra)
            """)
    }

    /// What a test's file says when it gives no `[security]` of its own: terminals on one test
    /// machine without keys talk in the clear. Tests of keys give their own section.
    public static let labMode = "[security]\nmode = \"lab\""

    /// Writes a configuration file for a test and returns its path.
    public static func writeConfig(_ text: String, name: String = "intercomd") throws -> String {
        let path = NSTemporaryDirectory() + "\(name)-\(UUID().uuidString.prefix(8)).toml"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }
}
