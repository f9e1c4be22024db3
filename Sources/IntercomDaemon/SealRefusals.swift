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
    let unknownSession = Counter()
    let badSignature = Counter()
    let older = Counter()
    let behind = Counter()
    let silent = Counter()

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

    func count(_ failure: TerminalSeal.Failure) {
        switch failure {
        case .notSealed: notSealed.increment()
        case .malformed: malformed.increment()
        case .unknownSender: unknownSender.increment()
        case .unknownSession: unknownSession.increment()
        case .authentication: authentication.increment()
        case .replay: replay.increment()
        case .badSignature: badSignature.increment()
        case .older: older.increment()
        }
    }

    var snapshot: DaemonStatistics.Refusals {
        DaemonStatistics.Refusals(notSealed: notSealed.load, malformed: malformed.load, unknownSender: unknownSender.load,
                                  authentication: authentication.load, replay: replay.load, stale: stale.load,
                                  senderMismatch: senderMismatch.load, notForEveryone: notForEveryone.load,
                                  unknownSession: unknownSession.load, badSignature: badSignature.load, older: older.load,
                                  behind: behind.load, silent: silent.load)
    }

    var total: Int { snapshot.total }

    var summary: String { snapshot.byReason.map { "\($0.reason)=\($0.count)" }.joined(separator: " ") }
}
