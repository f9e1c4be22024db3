import Foundation

/// The one record of repeated attempts. A measurement may be repeated only when the machine
/// provably spoiled it (xruns counted by a daemon, the talker probe or a test's own paced clock);
/// each repeat is printed with its cause at once and appended to the file `INTERCOM_RETRY_LOG`
/// names, which the test command lists and counts in its summary.
public enum Retries {
    public static func record(_ test: String, attempt: Int, cause: String, failures: [String] = []) {
        let line = "\(test): attempt \(attempt) repeated: \(cause)"
            + (failures.isEmpty ? "" : "; it failed: \(failures.joined(separator: " | "))")
        print("RETRY \(line)")
        guard let path = ProcessInfo.processInfo.environment["INTERCOM_RETRY_LOG"] else { return }
        let fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { return }
        defer { close(fd) }
        let bytes = Array((line.replacingOccurrences(of: "\n", with: " ") + "\n").utf8)
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }
}
