import Foundation
import Glibc
import Synchronization

/// The daemons and recorders this process started and has not yet seen end, so that a program
/// stopped by a signal can stop them too (Foundation's `Process` puts each child in a process
/// group of its own: a signal to ours does not reach them).
public enum ChildProcesses {
    private static let pids = Mutex<Set<Int32>>([])

    public static func started(_ pid: Int32) { _ = pids.withLock { $0.insert(pid) } }
    public static func ended(_ pid: Int32) { _ = pids.withLock { $0.remove(pid) } }

    /// SIGTERM to each, then waits up to `timeout` seconds for them to go (SIGKILL after).
    public static func terminateAll(timeout: Double) {
        let all = pids.withLock { $0 }
        for pid in all { kill(pid, SIGTERM) }
        let deadline = Date().addingTimeInterval(timeout)
        var left = all
        while !left.isEmpty, Date() < deadline {
            left = left.filter { waitpid($0, nil, WNOHANG) == 0 }
            usleep(20_000)
        }
        for pid in left { kill(pid, SIGKILL) }
    }
}
