import IntercomConfig
import Posix
import Site
import SiteSecurity

/// What a terminal runs by: its own file, joined with its site's signed document when the file
/// names a site (`[site] id`). The document is the one kept at `site.document`, judged whole
/// (signature, site, version, body) by the terminal's `SiteKeeper` before any of it is used.
public struct TerminalConfiguration: Sendable {
    public let config: DaemonConfig
    /// The terminal's site; nil without one.
    public let site: SiteKeeper?
    /// Why the document on disk was refused, when it was and an older one stays in force.
    public let refusal: String?
    /// The site version `config` was joined with (0: no site). The keeper may hold a newer one
    /// by now: its follower and server take documents on their own threads.
    public var siteVersion: UInt64 = 0

    /// Reads the terminal's file at `path` and, with a site, its document, offered to `keeper`
    /// (the running terminal's, on a reload; nil at start).
    /// - Throws: `ConfigError` naming the key: a problem of the file, `site.administrator_key`,
    ///   `site.identity_key` (a key file that cannot be read or made),
    ///   `site.document` (missing, or refused with no good document held), `site.id` changed on a
    ///   reload, or a rule the joined settings break.
    /// - Parameter creatingIdentity: false for a check: a terminal key that is not there yet is
    ///   not made (one that is there must still be readable).
    public static func load(path: String, keeper: SiteKeeper? = nil, creatingIdentity: Bool = true) throws -> TerminalConfiguration {
        let (local, present) = try DaemonConfig.loadTerminalFile(path: path)
        func problem(_ key: String, _ text: String) -> ConfigError {
            ConfigError(source: path, issues: [ConfigIssue(key: key, problem: text)])
        }
        guard !local.site.id.isEmpty else {
            if keeper != nil { throw problem("site.id", "was set when the terminal started: leaving a site needs a restart") }
            return TerminalConfiguration(config: local, site: nil, refusal: nil, siteVersion: 0)
        }
        let site: SiteKeeper
        if let keeper {
            guard keeper.siteID == local.site.id, keeper.documentPath == local.site.document else {
                throw problem("site.id", "changed since the terminal started (or site.document did): that needs a restart")
            }
            site = keeper
        } else {
            let verifier: SiteVerifier
            do { verifier = try SiteVerifier(path: local.site.administratorKey) } catch { throw problem("site.administrator_key", error.description) }
            let identity: TerminalIdentity
            let boot: UInt64
            do throws(SiteKeyError) {
                identity = creatingIdentity ? try TerminalIdentity.loadOrCreate(path: local.site.identityKey).identity
                    : try TerminalIdentity.loadIfPresent(path: local.site.identityKey) ?? TerminalIdentity()
                // Counted only by a start that will announce itself; a check counts nothing.
                boot = creatingIdentity ? try BootCount.next(path: BootCount.path(besideKey: local.site.identityKey)) : 0
            } catch { throw problem("site.identity_key", error.description) }
            site = SiteKeeper(site: local.site.id, room: local.room.id, verifier: verifier, documentPath: local.site.document,
                              identity: identity, boot: boot)
        }
        let stored: [UInt8]?
        do { stored = try WholeFile.read(local.site.document) } catch { throw problem("site.document", "\(local.site.document): \(error.cannotText)") }
        var refusal: String?
        if let stored {
            if case .refuse(let reason, let describe) = site.offer(stored, from: local.site.document) {
                refusal = describe ?? "site document refused: \(reason.rawValue)"
            }
        }
        guard let held = site.held else {
            throw problem("site.document", refusal ?? "\(local.site.document) does not exist: no site document yet (the administrator's site.json, docs/site.md)")
        }
        let config = try held.site.configuration(local: local, localPresent: present,
                                                 source: "\(path) with site \(local.site.id) version \(held.version)")
        return TerminalConfiguration(config: config, site: site, refusal: refusal, siteVersion: held.version)
    }

    /// A gate for `site` that reads a verified body as a `SiteDocument` that holds for `room`.
    static func gate(site: String, room: String, verifier: SiteVerifier) -> SiteDocumentGate<SiteDocument> {
        SiteDocumentGate(siteID: site, verifier: verifier) { body in
            guard let text = String(validating: body, as: UTF8.self) else { return .failure(SiteReadError("the document is not UTF-8 text")) }
            do { return .success(try SiteDocument.parse(text, source: "site document", checking: [room])) } catch { return .failure(SiteReadError("\(error)")) }
        }
    }
}
