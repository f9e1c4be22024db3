import Foundation
import Glibc
import Posix

/// systemd's readiness protocol (sd_notify(3)): one datagram of `KEY=value` lines to the AF_UNIX
/// socket named by `$NOTIFY_SOCKET` (a path, or `@name` in the abstract namespace).
/// Written here instead of linking libsystemd: it is one `sendto`, and the terminal image stays
/// free of a library it would load only for that.
public final class ServiceNotifier: Sendable {
    private let descriptor: Int32
    /// The socket address, as bytes (sockaddr_un is not Sendable).
    private let address: [UInt8]
    /// How often systemd expects `WATCHDOG=1` (half its `WatchdogSec=`), when it asked for it.
    public let watchdogInterval: Double?

    /// nil when the service manager did not ask for notifications (`NOTIFY_SOCKET` unset).
    public init?(environment: [String: String] = ProcessInfo.processInfo.environment) {
        guard let path = environment["NOTIFY_SOCKET"], !path.isEmpty,
              path.hasPrefix("/") || path.hasPrefix("@") else { return nil }
        var bytes = Array(path.utf8)
        if bytes[0] == UInt8(ascii: "@") { bytes[0] = 0 }  // abstract namespace
        var a = sockaddr_un()
        let capacity = MemoryLayout.size(ofValue: a.sun_path)
        guard bytes.count < capacity else { return nil }
        withUnsafeMutableBytes(of: &a.sun_path) { p in
            for (i, b) in bytes.enumerated() { p[i] = b }
        }
        a.sun_family = sa_family_t(AF_UNIX)
        let length = MemoryLayout<sa_family_t>.size + bytes.count + (bytes[0] == 0 ? 0 : 1)
        address = withUnsafeBytes(of: &a) { Array($0.prefix(length)) }
        descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return nil }
        // WATCHDOG_PID, when set, names the process meant; a child started by us is not it.
        if let usec = environment["WATCHDOG_USEC"].flatMap(Double.init), usec > 0,
           environment["WATCHDOG_PID"].flatMap(Int32.init).map({ $0 == getpid() }) ?? true {
            watchdogInterval = usec / 2e6
        } else {
            watchdogInterval = nil
        }
    }

    deinit { close(descriptor) }

    /// Sends `fields` as one notification; false if the datagram could not be sent.
    @discardableResult
    public func notify(_ fields: [(String, String)]) -> Bool {
        // A STATUS= with a newline would end the field early.
        let text = fields.map { "\($0.0)=\($0.1.replacingOccurrences(of: "\n", with: " "))" }.joined(separator: "\n")
        let payload = Array(text.utf8)
        let sent = address.withUnsafeBytes { a in
            payload.withUnsafeBytes { p in
                sendto(descriptor, p.baseAddress, p.count, Int32(MSG_NOSIGNAL),
                       a.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(a.count))
            }
        }
        return sent == payload.count
    }

    public func ready(status: String) { notify([("READY", "1"), ("STATUS", status), ("MAINPID", "\(getpid())")]) }
    public func status(_ text: String) { notify([("STATUS", text)]) }
    public func watchdog() { notify([("WATCHDOG", "1")]) }
    public func reloading() { notify([("RELOADING", "1"), ("MONOTONIC_USEC", "\(monotonicMicroseconds())")]) }
    public func stopping(status: String) { notify([("STOPPING", "1"), ("STATUS", status)]) }

    private func monotonicMicroseconds() -> UInt64 { MonotonicClock.nanoseconds() / 1000 }
}
