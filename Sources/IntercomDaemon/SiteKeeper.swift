import Configuration
import Control
import Foundation
import Posix
import Site
import SiteSecurity
import Synchronization

/// The site document a terminal holds: the gate that judges each offered document (main thread),
/// the copy kept on disk, and what `stats` shows (read by the control thread).
public final class SiteKeeper: @unchecked Sendable {
    // @unchecked: `gate` is used from the main thread only; `shown` is behind its mutex.
    private(set) var gate: SiteDocumentGate<SiteDocument>
    let documentPath: String
    private let shown: Mutex<DaemonStatistics.Site>

    init(site: String, verifier: SiteVerifier, documentPath: String) {
        gate = TerminalConfiguration.gate(site: site, verifier: verifier)
        self.documentPath = documentPath
        shown = Mutex(DaemonStatistics.Site(id: site, version: 0, digest: "", appliedAt: 0, refused: [:], lastRefusal: nil))
    }

    var siteID: String { gate.siteID }
    /// The version in force; 0 before one is.
    public var version: UInt64 { gate.held?.version ?? 0 }
    var held: SiteDocumentGate<SiteDocument>.Held? { gate.held }
    var snapshot: DaemonStatistics.Site { shown.withLock { $0 } }

    /// Judges `bytes` from `source`. A refused document that was on disk is replaced there by the
    /// one held, so that a restart comes back with the last good document.
    func offer(_ bytes: [UInt8], from source: String) -> SiteDocumentGate<SiteDocument>.Decision {
        let decision = gate.offer(bytes, from: source)
        switch decision {
        case .adopt(let held):
            shown.withLock { s in
                s.version = held.version
                s.digest = String(held.digest.prefix(16))
                s.appliedAt = Date().timeIntervalSince1970
            }
        case .alreadyHeld:
            break
        case .refuse(let reason, let describe):
            shown.withLock { s in
                s.refused[reason.rawValue, default: 0] += 1
                if let describe { s.lastRefusal = describe }
            }
            if source == documentPath, let held = gate.held { try? keep(held.encoded) }
        }
        return decision
    }

    /// Writes `encoded` as the kept copy, atomically (a power cut leaves the old or the new file).
    func keep(_ encoded: [UInt8]) throws {
        try WholeFile.replace(documentPath, temporary: documentPath + ".tmp-\(getpid())", mode: 0o644, syncDirectory: true) { fd in
            try encoded.withUnsafeBytes { try WholeFile.write(fd, $0, "write \(documentPath)") }
        }
    }
}
