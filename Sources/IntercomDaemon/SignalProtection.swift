import Calls
import Control
import Posix
import RealTime
import SiteSecurity
import Synchronization

/// How this terminal's signalling is sealed and opened (docs/identity.md): per pair of terminals
/// once the site document approves terminal keys, under the one site key before that; with
/// neither, nothing goes out or comes in (unkeyed), or, in lab mode only, everything in the
/// clear. The document in force chooses (`use(terminalKeys:)`): the version that approves the
/// first terminals switches a running terminal over, one that approves none switches it back.
/// No I/O: the calls thread sends what this returns.
final class SignalProtection: Sendable {
    /// What a received datagram is, for the calls thread.
    enum Received {
        /// Nothing is sealed: the engine decodes (and counts) it itself.
        case clear([UInt8])
        /// Opened and decoded; the seal vouched for its sender.
        case envelope(Envelope)
        /// A peer's session announcement, taken. `answer`: ours, to send back to `room` at once
        /// when the peer has a session we did not know (it has just started or moved on), so
        /// that it can seal to us before our next round. `site`: the document it says it holds.
        case announcement(room: RoomID, answer: [UInt8]?, site: SiteStamp?)
        /// An announcement this terminal does not take (it is not on terminal keys yet, or it is
        /// silent): only the document its sender says it holds, so that the version that switched
        /// the site, or approved this terminal, is fetched. A hint: the document is verified on its own.
        case siteHint(room: RoomID, site: SiteStamp?)
        /// Refused and counted (`refused`): it never reaches the engine.
        case refused
    }

    /// This terminal's key and start number, for the terminal seal.
    struct Terminal: Sendable {
        let identity: TerminalIdentity
        let boot: UInt64
    }

    /// What a new site document changed (`use(terminalKeys:)`), for the calls thread to act on.
    struct Change: Equatable {
        /// Our announcement, for every room: terminal keys came into force just now.
        var announcement: [UInt8]?
        /// Rooms whose approved key went or changed: the document no longer vouches for them.
        var distrusted: Set<String> = []
        /// Our own key stopped being approved just now: we can open nothing sent from now on.
        var fellSilent = false
    }

    private struct State {
        var mode: SignalProtectionMode
        /// The terminal keys last in force, to tell which rooms a new version stops vouching for.
        var trusted: [String: PublicIdentity] = [:]
        /// Made the first time terminal keys are in force and kept after: a new one would count
        /// its announcements from 1 again, below what peers took.
        var terminalSeal: TerminalSeal?
        var nextRotation = Double.infinity
        var forgetPrevious: Double?
        /// Under terminal keys with our own key not approved for our room (pending or revoked):
        /// nothing is sent, since every terminal would refuse it (docs/identity.md).
        var silent = false
        /// The site document we hold, as our announcements name it.
        var site = SessionAnnouncement.noSite
    }

    private let room: String
    private let siteSeal: SignalSeal?
    private let terminal: Terminal?
    /// What holds with neither key: `.unkeyed` (nothing sent), or `.clear` in lab mode.
    private let keyless: SignalProtectionMode
    private let state: Mutex<State>
    private let sessionSeconds: Double
    private let previousKeptSeconds: Double
    /// Datagrams refused before the engine saw them, by reason.
    let refused = SealRefusals()
    /// Sends held back under terminal keys: the room's session was not heard yet.
    let awaitingSession = Counter()
    /// Session keys this terminal moved on from (every `TerminalSeal.sessionSeconds`).
    let sessionRenewals = Counter()

    /// `lab`: `[security] mode = "lab"`, the only way to the clear.
    /// `timeScale`: the accelerated soak's (`[testing] time_scale`); session keys live that much shorter.
    init(room: RoomID, siteSeal: SignalSeal?, terminal: Terminal?, lab: Bool = false, timeScale: Double = 1) {
        self.room = room.value
        sessionSeconds = TerminalSeal.sessionSeconds / timeScale
        previousKeptSeconds = TerminalSeal.previousKeptSeconds / timeScale
        self.siteSeal = siteSeal
        self.terminal = terminal
        keyless = lab ? .clear : .unkeyed
        state = Mutex(State(mode: siteSeal == nil ? keyless : .siteKey))
    }

    var mode: SignalProtectionMode { state.withLock { $0.mode } }
    /// Sending nothing: pending or revoked under terminal keys, or holding no key at all.
    var silent: Bool { state.withLock { $0.mode == .unkeyed || ($0.mode == .terminalKeys && $0.silent) } }

    /// The document in force approves these rooms' terminals (empty: none, or no site): sealing
    /// follows. A room whose key changed or went loses its sessions at once.
    func use(terminalKeys: [String: PublicIdentity], now: Double) -> Change {
        guard let terminal, !terminalKeys.isEmpty else {
            state.withLock {
                $0.mode = siteSeal == nil ? keyless : .siteKey
                $0.trusted = [:]
            }
            return Change()
        }
        return state.withLock { s -> Change in
            let seal: TerminalSeal
            if let held = s.terminalSeal {
                seal = held
                seal.setDirectory(terminalKeys)
            } else {
                seal = TerminalSeal(identity: terminal.identity, room: room, boot: terminal.boot, directory: terminalKeys)
                s.terminalSeal = seal
                s.nextRotation = now + sessionSeconds
            }
            let switched = s.mode != .terminalKeys
            let wasSilent = !switched && s.silent
            s.mode = .terminalKeys
            s.silent = terminalKeys[room] != terminal.identity.publicIdentity
            var change = Change(announcement: switched && !s.silent ? seal.announcement(site: s.site) : nil)
            change.distrusted = Set(s.trusted.filter { terminalKeys[$0.key] != $0.value }.keys)
            change.fellSilent = s.silent && !wasSilent
            s.trusted = terminalKeys
            return change
        }
    }

    /// The site document this terminal holds from now on (its announcements name it).
    func holds(_ site: SiteStamp?) { state.withLock { $0.site = site?.bytes ?? SessionAnnouncement.noSite } }

    /// The site key's directory changed (a reload).
    func setKnownRooms(_ rooms: Set<String>) { siteSeal?.setKnownRooms(rooms) }

    /// One look at the state: the mode; under terminal keys, the seal (nil otherwise, and while
    /// this terminal is silent); the site document our announcements name.
    private var current: (mode: SignalProtectionMode, seal: TerminalSeal?, site: [UInt8]) {
        state.withLock { ($0.mode, $0.mode == .terminalKeys && !$0.silent ? $0.terminalSeal : nil, $0.site) }
    }

    func receive(_ datagram: [UInt8]) -> Received {
        let (mode, seal, site) = current
        if SessionAnnouncement.looksLikeOne(datagram) {
            guard let seal else {
                // Not on terminal keys, or silent, or unkeyed: what it says of the site, nothing more.
                guard let a = SessionAnnouncement.decode(datagram), let room = RoomID(a.room) else {
                    refused.malformed.increment()
                    return .refused
                }
                return .siteHint(room: room, site: SiteStamp(bytes: a.site))
            }
            switch seal.heard(datagram) {
            case .failure(let why):
                refused.count(why)
                return .refused
            case .success(let (room, newSession, stamp)):
                guard let id = RoomID(room) else { return .refused }  // the document's rooms are valid ids
                return .announcement(room: id, answer: newSession ? seal.announcement(site: site) : nil, site: SiteStamp(bytes: stamp))
            }
        }
        switch (mode, seal) {
        case (.clear, _):
            return .clear(datagram)
        case (.siteKey, _):
            guard let siteSeal else { return .clear(datagram) }
            switch siteSeal.open(datagram) {
            case .failure(let why):
                refused.count(why)
                return .refused
            case .success(let (sender, plaintext, forEveryRoom)):
                guard let envelope = decoded(plaintext, from: sender) else { return .refused }
                // Only a hello says the same to every room; anything else names its room in the seal.
                if forEveryRoom {
                    guard case .hello = envelope.message else {
                        refused.notForEveryone.increment()
                        return .refused
                    }
                }
                return .envelope(envelope)
            }
        case (.terminalKeys, let seal?):
            switch seal.open(datagram) {
            case .failure(let why):
                refused.count(why)
                return .refused
            case .success(let (sender, plaintext)):
                return decoded(plaintext, from: sender).map(Received.envelope) ?? .refused
            }
        case (.terminalKeys, nil), (.unkeyed, _):
            // Nobody seals to a terminal whose key is not approved, and nothing is taken in the clear.
            refused.silent.increment()
            return .refused
        }
    }

    /// The engine checks the sender against the source address; the seal vouches for the sender
    /// it named, so the two must agree.
    private func decoded(_ plaintext: [UInt8], from sender: String) -> Envelope? {
        guard case .success(let envelope) = SignalCodec.decode(plaintext), envelope.sender.value == sender else {
            refused.senderMismatch.increment()
            return nil
        }
        return envelope
    }

    /// `plain` as sent to `room`; nil (counted) under terminal keys while its session is unknown.
    func seal(_ plain: [UInt8], for room: RoomID) -> [UInt8]? {
        switch current {
        case (.clear, _, _): return plain
        case (.unkeyed, _, _): return nil
        case (.siteKey, _, _): return siteSeal?.seal(plain, for: .room(room.value)) ?? plain
        case (.terminalKeys, let seal, _):
            guard let seal else { return nil }  // silent
            guard let sealed = seal.seal(plain, for: room.value) else {
                awaitingSession.increment()
                return nil
            }
            return sealed
        }
    }

    /// What a hello round sends: each datagram to its addresses. Under terminal keys our
    /// announcement goes first (to every room: it is the same for all), then the hello sealed for
    /// each room whose session we hold.
    func hello(_ plain: [UInt8], to peers: [SignallingPeer]) -> [(datagram: [UInt8], to: [IPv4Endpoint])] {
        let all = peers.map(\.address)
        switch current {
        case (.clear, _, _): return [(plain, all)]
        case (.unkeyed, _, _): return []
        case (.siteKey, _, _): return [(siteSeal?.seal(plain, for: .everyRoom) ?? plain, all)]
        case (.terminalKeys, let seal, let site):
            guard let seal else { return [] }  // silent
            var out = [(datagram: seal.announcement(site: site), to: all)]
            for peer in peers {
                if let sealed = seal.seal(plain, for: peer.room.value) { out.append((sealed, [peer.address])) }
            }
            return out
        }
    }

    /// The session key's turn (calls thread, each loop): a new one every `sessionSeconds`,
    /// announced to every room at once (returned); the one before is erased a minute later,
    /// with every pairing under it.
    func tick(now: Double) -> [UInt8]? {
        state.withLock { s -> [UInt8]? in
            guard s.mode == .terminalKeys, !s.silent, let seal = s.terminalSeal else { return nil }
            if let at = s.forgetPrevious, now >= at {
                seal.forgetPrevious()
                s.forgetPrevious = nil
            }
            guard now >= s.nextRotation else { return nil }
            seal.rotate()
            sessionRenewals.increment()
            s.nextRotation = now + sessionSeconds
            s.forgetPrevious = now + previousKeptSeconds
            return seal.announcement(site: s.site)
        }
    }

    /// When `tick` has something to do next: under the same conditions as `tick` (a deadline it
    /// would not act on, e.g. while pending approval, stays in the past: a busy calls thread).
    var nextDeadline: Double? {
        state.withLock { s -> Double? in
            guard s.mode == .terminalKeys, !s.silent, s.terminalSeal != nil else { return nil }
            return min(s.nextRotation, s.forgetPrevious ?? .infinity)
        }
    }
}
