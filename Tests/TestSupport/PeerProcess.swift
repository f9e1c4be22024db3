import Foundation
import Glibc

/// Another program a user could pick instead of intercomd (trx, gst-launch-1.0, baresip), run as a
/// child process with its output in a log file; the measurement suite compares them on the rig.
public final class PeerProcess: @unchecked Sendable {
    public let process: Process
    public let logPath: String

    /// Starts `program` (found on PATH: /usr/bin) with `arguments`; its stdin is /dev/null.
    public init(_ program: String, _ arguments: [String], name: String) throws {
        let path = program.hasPrefix("/") ? program : "/usr/bin/\(program)"
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw RigError(description: "\(path) is missing: scripts/setup.sh --peers installs the peers the suite compares")
        }
        logPath = NSTemporaryDirectory() + "\(name)-\(UUID().uuidString.prefix(8)).log"
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
    }

    public var pid: Int32 { process.processIdentifier }
    public var isRunning: Bool { process.isRunning }
    public var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// Waits until the log contains `text`; false on timeout or when the program exits first.
    public func waitForLog(_ text: String, timeout: Double) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline, process.isRunning {
            if log.contains(text) { return true }
            usleep(50_000)
        }
        return log.contains(text)
    }

    /// SIGTERM, then SIGKILL after `timeout` seconds.
    public func stop(timeout: Double = 3) {
        if process.isRunning { process.terminate() }
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning, Date() < deadline { usleep(20_000) }
        if process.isRunning {
            kill(pid, SIGKILL)
            process.waitUntilExit()
        }
    }
}

/// CPU time of a running process: user + system from /proc/<pid>/stat.
public enum ProcessCPU {
    /// Seconds of CPU the process has used so far; nil when it is gone.
    public static func seconds(pid: Int32) -> Double? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")") else { return nil }
        // After the command name in parentheses: state is field 3, utime 14, stime 15.
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Seconds of CPU each of the process's threads has used so far, summed by thread name
    /// (`/proc/<pid>/task/*/stat`); empty when it is gone.
    public static func threadSeconds(pid: Int32) -> [String: Double] {
        var out: [String: Double] = [:]
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        for tid in tasks {
            guard let text = try? String(contentsOfFile: "/proc/\(pid)/task/\(tid)/stat", encoding: .utf8),
                  let open = text.firstIndex(of: "("), let close = text.lastIndex(of: ")") else { continue }
            let name = String(text[text.index(after: open)..<close])
            let fields = text[text.index(after: close)...].split(separator: " ")
            guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { continue }
            out[name, default: 0] += (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
        }
        return out
    }
}
