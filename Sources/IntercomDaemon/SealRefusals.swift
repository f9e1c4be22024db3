import Control
import RealTime
import SiteSecurity

/// Signalling datagrams refused by the seal, counted by reason (any thread reads them).
final class SealRefusals: Sendable {
    let notSealed = Counter()
    let malformed = Counter()
    let unknownSender = Counter()
    let authentication = Counter()
    let replay = Counter()
    let stale = Counter()
    let senderMismatch = Counter()
    let notForEveryone = Counter()

    func count(_ failure: SignalSeal.Failure) {
        switch failure {
        case .notSealed: notSealed.increment()
        case .malformed: malformed.increment()
        case .unknownSender: unknownSender.increment()
        case .authentication: authentication.increment()
        case .replay: replay.increment()
        case .stale: stale.increment()
        }
    }

    var snapshot: DaemonStatistics.Refusals {
        DaemonStatistics.Refusals(notSealed: notSealed.load, malformed: malformed.load, unknownSender: unknownSender.load,
                                  authentication: authentication.load, replay: replay.load, stale: stale.load,
                                  senderMismatch: senderMismatch.load, notForEveryone: notForEveryone.load)
    }

    var total: Int {
        [notSealed, malformed, unknownSender, authentication, replay, stale, senderMismatch, notForEveryone].map(\.load).reduce(0, +)
    }

    var summary: String {
        "not_sealed=\(notSealed.load) malformed=\(malformed.load) unknown_sender=\(unknownSender.load) "
            + "authentication=\(authentication.load) replay=\(replay.load) stale=\(stale.load) sender_mismatch=\(senderMismatch.load) not_for_everyone=\(notForEveryone.load)"
    }
}
