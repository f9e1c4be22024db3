import Foundation
import IntercomConfig
import Posix
import Site
import SiteSecurity

/// A terminal's answer to the administrator asking which key it has (its signed enrolment
/// request), or why there is none.
public struct TerminalAnswer: Sendable {
    public var terminal: TerminalAddress
    public var result: Result<(request: EnrolmentRequest, identity: PublicIdentity), SiteTransferError>

    /// Asks every terminal at once; each answers within `timeout` seconds.
    public static func ask(_ terminals: [TerminalAddress], site: String, timeout: Double) async -> [TerminalAnswer] {
        await eachAtOnce(terminals) { ask($0, site: site, timeout: timeout) }
    }

    /// Asks one terminal; blocks up to `timeout` seconds.
    public static func ask(_ t: TerminalAddress, site: String, timeout: Double) -> TerminalAnswer {
        let result: Result<(request: EnrolmentRequest, identity: PublicIdentity), SiteTransferError>
        switch SiteTransfer.exchange(.enrolment(site: site), with: t.endpoint, timeout: timeout) {
        case .success(.enrolment(let bytes)):
            result = EnrolmentRequest.open(bytes, site: site).mapError { SiteTransferError("its request was refused: \($0.rawValue)") }
        case .success(.otherSite): result = .failure(SiteTransferError("is not a terminal of site \(site)"))
        case .success(let other): result = .failure(SiteTransferError("answered \(other)"))
        case .failure(let error): result = .failure(SiteTransferError("not reached: \(error)"))
        }
        return TerminalAnswer(terminal: t, result: result)
    }
}

extension SiteFiles {
    /// The enrolment decisions `document` holds, for `site`.
    public static func enrolment(of document: SiteDocument, site: String) -> Enrolment {
        let e = document.enrolment
        return Enrolment(site: site, rooms: Set(document.rooms.keys), approved: e.approved, revoked: e.revoked, retired: e.retired)
    }

    /// Writes the decisions to enrolment.toml; the next version signed carries them.
    public func writeEnrolment(_ enrolment: Enrolment) throws(SiteFolderError) {
        let section = SiteEnrolment(approved: enrolment.approved, revoked: enrolment.revoked, retired: enrolment.retired)
        try Self.write("# Which terminal each room has (docs/identity.md). Kept by `intercom-site approve` and `revoke`;\n"
                       + "# `intercom-site sign` signs it with site.toml. Do not edit.\n" + section.rendered(), to: self.enrolment)
    }
}

/// `work`, blocking, on a Dispatch thread of its own: never on a server's event loop or Swift's
/// cooperative threads (two on this machine: one slow exchange would hold up everyone).
public func onDispatchThread<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { done in DispatchQueue.global().async { done.resume(returning: work()) } }
}

/// `exchange` for each of `terminals` at once, answers in their order. Each blocking exchange
/// runs on a Dispatch thread of its own, never on a server's event loop or Swift's cooperative
/// threads (two on this machine: a slow terminal would hold up everyone).
public func eachAtOnce<T: Sendable>(_ terminals: [TerminalAddress], _ exchange: @escaping @Sendable (TerminalAddress) -> T) async -> [T] {
    await withTaskGroup(of: (Int, T).self) { group in
        for (i, terminal) in terminals.enumerated() {
            group.addTask { (i, await onDispatchThread { exchange(terminal) }) }
        }
        var answers: [(Int, T)] = []
        for await answer in group { answers.append(answer) }
        return answers.sorted { $0.0 < $1.0 }.map(\.1)
    }
}

extension EnrolmentRefusal {
    /// Why an approval was refused, in the words the page and `intercom-site approve` both show.
    public var explanation: String {
        switch self {
        case .noRequest: "no terminal with that code answered: is it on, and was it asked?"
        case .wrongCode: "no terminal that answered has that code: read it again at the terminal"
        case .ambiguous: "two terminals have that code (one of them made its key to match): approve nothing and check the network"
        case .revokedIdentity: "that terminal is revoked: reset it to make a new key"
        case .unknownRoom: "not a room of the document"
        default: rawValue
        }
    }
}
