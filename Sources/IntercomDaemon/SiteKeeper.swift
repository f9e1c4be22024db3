import Calls
import IntercomConfig
import Control
import Foundation
import Posix
import Site
import SiteSecurity
import Synchronization

/// The site document a terminal holds: the gate that judges each offered document, the copy
/// kept on disk, and what `stats` shows. Documents come from the file (start, reload), from
/// another terminal (`SiteFollower`'s fetches) and from the administrator's tool
/// (`SiteDocumentServer`), each on its own thread: one lock covers the gate and the file, so
/// that two documents are never judged or written at once.
public final class SiteKeeper: Sendable {
    private struct State {
        var gate: SiteDocumentGate<SiteDocument>
        var shown: DaemonStatistics.Site
        /// The administrator's orders taken: none twice, none stale, none for another room.
        var orders: SiteOrderGuard
    }
    private let state: Mutex<State>
    let documentPath: String
    public let siteID: String
    /// This terminal's public key, and its request to be enrolled (signed at start): what the
    /// administrator's tool fetches (`SiteDocumentServer`), whatever the document says of it.
    let identity: PublicIdentity
    let enrolmentRequest: [UInt8]
    /// This terminal's key, which signs its session announcements (never shown or sent).
    let terminal: TerminalIdentity
    /// This start's number (`BootCount`): its announcements outrank every earlier start's.
    let boot: UInt64

    init(site: String, room: String, verifier: SiteVerifier, documentPath: String, identity: TerminalIdentity, boot: UInt64) {
        terminal = identity
        self.boot = boot
        siteID = site
        state = Mutex(State(gate: TerminalConfiguration.gate(site: site, room: room, verifier: verifier),
                            shown: DaemonStatistics.Site(id: site, version: 0, digest: "", appliedAt: nil, refused: [:], lastRefusal: nil),
                            orders: SiteOrderGuard(site: site, room: room)))
        self.documentPath = documentPath
        WholeFile.removeLeftovers(of: documentPath)  // a copy a power cut caught mid-write
        self.identity = identity.publicIdentity
        enrolmentRequest = EnrolmentRequest(site: site, room: room, software: Software.version, signedWith: identity).encoded()
    }

    /// What the document in force says of this terminal's key (docs/identity.md).
    var standing: Enrolment.Standing { Self.standing(of: identity, in: held) }

    private static func standing(of identity: PublicIdentity, in held: SiteDocumentGate<SiteDocument>.Held?) -> Enrolment.Standing {
        let enrolment = held?.site.enrolment ?? SiteEnrolment()
        return Enrolment.standing(of: identity, approved: enrolment.approved, revoked: enrolment.revoked)
    }

    /// The rooms whose terminals the document in force approves, with their keys (revoked ones
    /// left out): whom signalling is sealed with. Empty: terminal keys are not in force yet.
    var terminalKeys: [String: PublicIdentity] {
        let enrolment = held?.site.enrolment ?? SiteEnrolment()
        return enrolment.approved.filter { !enrolment.revoked.contains($0.value) }
    }

    /// The version in force; 0 before one is.
    public var version: UInt64 { held?.version ?? 0 }
    var held: SiteDocumentGate<SiteDocument>.Held? { state.withLock { $0.gate.held } }
    var snapshot: DaemonStatistics.Site {
        // One lock: the standing and the rest from the same document.
        var (shown, held, trusted) = state.withLock { ($0.shown, $0.gate.held, $0.gate.verifier) }
        shown.administrator = trusted.fingerprint
        shown.terminal = switch Self.standing(of: identity, in: held) {
        case .pending: .init(key: identity.fingerprint, standing: .pending, room: nil, enrolmentCode: identity.enrolmentCode(site: siteID).description)
        case .approved(let room): .init(key: identity.fingerprint, standing: .approved, room: room, enrolmentCode: nil)
        case .revoked: .init(key: identity.fingerprint, standing: .revoked, room: nil, enrolmentCode: nil)
        }
        return shown
    }

    /// Judges `bytes` from `source` (the file's path, a terminal's room id, "administrator at
    /// a.b.c.d:port"). A document adopted from elsewhere than the file is written there, before
    /// anything else may be judged; a refused document that was on disk is replaced there by the
    /// one held, so that a restart comes back with the last good document.
    func offer(_ bytes: [UInt8], from source: String) -> SiteDocumentGate<SiteDocument>.Decision {
        state.withLock { s in
            let decision = s.gate.offer(bytes, from: source)
            switch decision {
            case .adopt(let held):
                s.shown.version = held.version
                s.shown.digest = String(held.digest.prefix(16))
                s.shown.appliedAt = nil
                if source != documentPath {
                    do { try keep(held.encoded) } catch { s.shown.transfers.notKept += 1 }
                }
                if s.shown.arrival?.version != held.version { s.shown.arrival = .init(version: held.version) }
                s.shown.arrival?.from = source
                s.shown.arrival?.kept = Date().timeIntervalSince1970
            case .alreadyHeld:
                break
            case .refuse(let reason, let describe):
                s.shown.refused[reason.rawValue, default: 0] += 1
                if let describe { s.shown.lastRefusal = describe }
                if source == documentPath, let held = s.gate.held { try? keep(held.encoded) }
            }
            return decision
        }
    }

    /// A hello said another terminal holds `version`, newer than the one held (`stats`:
    /// `site.arrival`, the first time only).
    func heardOf(_ version: UInt64, from room: String) {
        state.withLock { s in
            guard version > s.shown.version, (s.shown.arrival?.version ?? 0) < version else { return }
            s.shown.arrival = .init(version: version, from: room, heard: Date().timeIntervalSince1970)
        }
    }

    /// A fetch of `version` from `room` starts (the last one is the one that brought it).
    func fetching(_ version: UInt64, from room: String) {
        state.withLock { s in
            if s.shown.arrival?.version != version { s.shown.arrival = .init(version: version) }
            s.shown.arrival?.from = room
            s.shown.arrival?.fetchStarted = Date().timeIntervalSince1970
        }
    }

    /// The fetch of `version` brought a whole document (its check follows).
    func received(_ version: UInt64) {
        state.withLock { s in
            if s.shown.arrival?.version == version { s.shown.arrival?.received = Date().timeIntervalSince1970 }
        }
    }

    /// The daemon put `version` in force (at start, or after adopting it).
    func applied(_ version: UInt64) {
        state.withLock { s in
            if version > 0, s.shown.version == version, s.shown.appliedAt == nil { s.shown.appliedAt = Date().timeIntervalSince1970 }
        }
    }

    /// Tells the calls side what this terminal's hellos say of it: the software and the document
    /// held, with when it was applied (nil while it waits to be). Under the keeper's lock, so that
    /// the follower's word (kept) and the daemon's (applied) reach the hellos in the order they
    /// happened.
    func announce(to calls: CallService) {
        state.withLock { s in
            calls.announce(SiteAnnouncement(software: Software.version, site: s.gate.held?.stamp, appliedAt: s.shown.appliedAt))
        }
    }

    /// Counts one transfer event (`stats`: `site.transfers`).
    /// The administrator's order `signed` carries, if the key this terminal trusts signed it and
    /// it is for this site and room, fresh (`now`: wall clock) and not taken before.
    func take(order signed: [UInt8], now: Double) -> Result<SiteOrder, SiteOrderRefusal> {
        state.withLock { s in
            SignedSiteOrder.open(signed, verifier: s.gate.verifier).flatMap { s.orders.take($0, now: now) }
        }
    }

    func count(_ update: (inout DaemonStatistics.Site.Transfers) -> Void) {
        state.withLock { update(&$0.shown.transfers) }
    }

    /// Writes `encoded` as the kept copy, atomically (a power cut leaves the old or the new file).
    private func keep(_ encoded: [UInt8]) throws {
        try WholeFile.replace(documentPath, mode: 0o644, syncDirectory: true) { fd in
            try encoded.withUnsafeBytes { try WholeFile.write(fd, $0, "write \(documentPath)") }
        }
    }
}
