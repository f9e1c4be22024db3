import ArgumentParser
import Posix
import Foundation
import Impairment
#if canImport(Glibc)
import Glibc
#endif

/// `impairment-relay`: a netem-like UDP relay on loopback, for network tests of the intercom.
@main
struct ImpairmentRelayCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "impairment-relay",
        abstract: "Relay UDP datagrams on loopback with seeded delay, jitter, loss, bursts, reordering and duplication.",
        discussion: "Replies from the target go back to the last sender, impaired the same way (seed + 1)."
    )

    @Option(help: "Address to listen on (IPv4 loopback only; port 0 = ephemeral).")
    var listen = "127.0.0.1:0"
    @Option(help: "Address to forward to (IPv4 loopback only).")
    var target: String
    @Option(help: "Address the target is sent to from (IPv4 loopback only; port 0 = ephemeral): the address the target accepts, when it accepts only one.")
    var from = "127.0.0.1:0"
    @Option(help: "Base one-way delay, ms.")
    var delay = 0.0
    @Option(help: "Extra delay drawn uniformly in 0...jitter, ms.")
    var jitter = 0.0
    @Option(help: "Independent random loss, percent.")
    var loss = 0.0
    @Option(name: .customLong("burst-enter"), help: "Gilbert-Elliott good→bad probability per packet, percent (0 = no bursts).")
    var burstEnter = 0.0
    @Option(name: .customLong("burst-exit"), help: "Gilbert-Elliott bad→good probability per packet, percent.")
    var burstExit = 100.0
    @Option(name: .customLong("burst-loss"), help: "Loss in the bad state, percent.")
    var burstLoss = 100.0
    @Option(help: "Packets held back so that later ones overtake them, percent.")
    var reorder = 0.0
    @Option(name: .customLong("reorder-delay"), help: "Hold-back of a reordered packet, ms.")
    var reorderDelay = 20.0
    @Option(help: "Packets sent twice, percent.")
    var duplicate = 0.0
    @Option(help: "Seed of the pseudo-random decisions (same seed, same decisions).")
    var seed: UInt64 = 1
    @Option(help: "Stop after this many seconds (default: until SIGINT/SIGTERM).")
    var duration: Double?
    @Option(name: .customLong("queue-capacity"), help: "Maximum datagrams waiting to be sent; more are dropped and counted.")
    var queueCapacity = 10_000

    func run() throws {
        let profile = ImpairmentProfile(
            baseDelayMs: delay, jitterMs: jitter, lossPercent: loss,
            burstEnterPercent: burstEnter, burstExitPercent: burstExit, burstLossPercent: burstLoss,
            reorderPercent: reorder, reorderDelayMs: reorderDelay, duplicatePercent: duplicate, seed: seed)
        if let duration, !(duration.isFinite && duration > 0) {
            throw ValidationError("--duration must be a positive number of seconds")
        }
        // Block the signals before the relay thread exists so it inherits the mask and only sigtimedwait sees them.
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGINT)
        sigaddset(&signals, SIGTERM)
        pthread_sigmask(SIG_BLOCK, &signals, nil)

        let relay = try UDPRelay(listen: IPv4Endpoint.loopbackOnly(parsing: listen), target: IPv4Endpoint.loopbackOnly(parsing: target),
                                 from: IPv4Endpoint.loopbackOnly(parsing: from), profile: profile, queueCapacity: queueCapacity)
        try relay.start()
        print("impairment-relay: listening on \(relay.listenEndpoint) -> \(relay.target) (port \(relay.boundPort))")
        print("impairment-relay: \(profile)")
        fflush(nil)  // all streams: stdout itself is not concurrency-safe to name

        let reason = waitForSignal(signals, seconds: duration)
        relay.stop()
        print("impairment-relay: stopped (\(reason))")
        print(relay.statistics)
        fflush(nil)  // all streams: stdout itself is not concurrency-safe to name
    }

    /// Waits for SIGINT/SIGTERM or until `seconds` have passed; returns why it stopped.
    private func waitForSignal(_ signals: sigset_t, seconds: Double?) -> String {
        var signals = signals
        guard let seconds else {
            var received: Int32 = 0
            while sigwait(&signals, &received) != 0 {}
            return received == SIGINT ? "SIGINT" : "SIGTERM"
        }
        let deadline = Date().addingTimeInterval(seconds)
        while true {
            let left = deadline.timeIntervalSinceNow
            if left <= 0 { return "duration elapsed" }
            var timeout = timespec(tv_sec: Int(left), tv_nsec: Int((left - left.rounded(.down)) * 1e9))
            let signal = sigtimedwait(&signals, nil, &timeout)
            if signal == SIGINT { return "SIGINT" }
            if signal == SIGTERM { return "SIGTERM" }
            // -1 with EAGAIN (timeout) or EINTR: loop and recheck the deadline.
        }
    }
}
