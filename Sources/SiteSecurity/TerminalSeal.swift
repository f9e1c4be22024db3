import Crypto
import Foundation
import Synchronization

/// Signalling sealed between two terminals with no secret shared by the site (docs/identity.md):
/// each terminal has a session key (X25519, in memory only, new at every start and on `rotate`)
/// that it announces signed by its identity key (`SessionAnnouncement`); any two terminals agree a
/// pairwise key from their session keys, one per direction, and seal with ChaCha20-Poly1305.
/// A datagram is readable by one terminal and attributable to one; once the session keys are
/// gone, a copy of a terminal's disk opens nothing recorded before. Counters start at 1 for each
/// pair of session keys, so freshness needs no clock: what was sealed under an earlier session
/// names a session that no longer exists. Deterministic but for the session keys it makes
/// (`newSessionKey`, given by simulations), and without I/O: the caller sends and receives.
///
/// Wire: "IS", version 3, sender length n, the sender's room id (n bytes), the sender's and the
/// recipient's session ids (4 bytes each: the first bytes of the session key's SHA-256), a
/// counter (8), the sealed datagram, the tag (16). The header is authenticated with it.
public final class TerminalSeal: Sendable {
    public enum Failure: Error, Equatable, Sendable, CaseIterable {
        /// Not sealed (a terminal of the site key's time, or garbage).
        case notSealed
        case malformed
        /// The sender is not a room whose terminal the site document approves (or it is us).
        case unknownSender
        /// It names a session of the sender's or ours that this terminal does not hold: sealed
        /// before one of the two started again (a replay, or a peer that has not heard our news).
        case unknownSession
        /// Changed on the way, or not sealed by the sender's pairwise key.
        case authentication
        /// A counter already seen, or too old for the window.
        case replay
        /// An announcement not signed by the key the document approves for its room.
        case badSignature
        /// An announcement older than one already taken from that terminal.
        case older
    }

    public static let magic: (UInt8, UInt8) = (0x49, 0x53)  // "IS"
    public static let version: UInt8 = 3
    /// How long a session key lives before `rotate`, and how long the one before still opens
    /// what peers sealed to it (what was on its way when they heard of the new one).
    public static let sessionSeconds = 3600.0
    public static let previousKeptSeconds = 60.0
    /// Bytes a seal adds, plus the sender's id.
    public static let overhead = 4 + 4 + 4 + 8 + 16

    private struct Session {
        let privateKey: [UInt8]
        let publicKey: [UInt8]
        let id: UInt32
        init(_ privateKey: [UInt8]) {
            self.privateKey = privateKey
            publicKey = X25519.publicKey(privateKey)
            id = TerminalSeal.sessionID(publicKey)
        }
    }

    private struct PeerSession {
        let key: [UInt8]
        let id: UInt32
    }

    /// The keys of one pair of sessions, ours and a peer's.
    private struct Pairing {
        let send: SealKey
        let receive: SealKey
        var sent: UInt64 = 0
        var window = ReplayWindow()
    }

    private struct PairingID: Hashable {
        let mine: UInt32, theirs: UInt32
    }

    private struct Peer {
        let identity: PublicIdentity
        var current: PeerSession?
        /// The session before the current one, until the peer's next announcement of a new one:
        /// what it sealed just before it moved may still be on its way.
        var previous: PeerSession?
        var newest = SessionAnnouncement.Order.none
        var pairings: [PairingID: Pairing] = [:]
    }

    private struct State {
        var mine: Session
        /// Ours before `rotate`, until `forgetPrevious`.
        var myPrevious: Session?
        var count: UInt64 = 0
        var directory: [String: PublicIdentity]
        var peers: [String: Peer] = [:]
    }

    private let identity: TerminalIdentity
    private let room: String
    private let boot: UInt64
    private let newSessionKey: @Sendable () -> [UInt8]
    private let state: Mutex<State>

    /// - Parameters:
    ///   - room: this terminal's room id, as the document approves its key for it.
    ///   - boot: how many times this terminal has started (kept on disk): its announcements
    ///     outrank those of every start before.
    ///   - directory: the rooms whose terminals the document approves, with their keys.
    ///   - newSessionKey: makes each session's private key (default: the system's randomness;
    ///     simulations give a seeded one).
    public init(identity: TerminalIdentity, room: String, boot: UInt64, directory: [String: PublicIdentity],
                newSessionKey: (@Sendable () -> [UInt8])? = nil) {
        self.identity = identity
        self.room = room
        self.boot = boot
        let make = newSessionKey ?? { X25519.newPrivateKey() }
        self.newSessionKey = make
        state = Mutex(State(mine: Session(make()), directory: directory))
    }

    /// The next announcement of our current session (each one outranks the one before), naming
    /// the site document we hold (`site`, `SessionAnnouncement.siteBytes` long; default: none).
    public func announcement(site: [UInt8] = SessionAnnouncement.noSite) -> [UInt8] {
        let (count, key) = state.withLock { s in
            s.count += 1
            return (s.count, s.mine.publicKey)
        }
        return SessionAnnouncement(room: room, boot: boot, count: count, site: site, sessionKey: key, signedWith: identity).encoded()
    }

    /// Takes a peer's announcement. `newSession`: it moved to a session we did not know (so we
    /// may announce ours back at once, for a peer that has just started). `site`: the document
    /// it says it holds.
    public func heard(_ bytes: [UInt8]) -> Result<(room: String, newSession: Bool, site: [UInt8]), Failure> {
        guard let a = SessionAnnouncement.decode(bytes) else {
            return .failure(SessionAnnouncement.looksLikeOne(bytes) ? .malformed : .notSealed)
        }
        let known: Result<Bool, Failure> = state.withLock { s in
            guard a.room != room, let identity = s.directory[a.room] else { return .failure(.unknownSender) }
            guard let peer = s.peers[a.room], peer.identity == identity else { return .success(false) }
            // The session we hold already: nothing to change, nothing to check.
            if peer.current?.key == a.sessionKey { return .success(true) }
            // Refused before the signature is checked: replaying old announcements costs us nothing.
            return peer.newest < a.order ? .success(false) : .failure(.older)
        }
        switch known {
        case .failure(let f): return .failure(f)
        case .success(true): return .success((a.room, false, a.site))
        case .success(false): break
        }
        return state.withLock { s in
            // Judged again under the lock: the directory may have changed meanwhile.
            guard let identity = s.directory[a.room] else { return .failure(.unknownSender) }
            guard a.isSigned(by: identity) else { return .failure(.badSignature) }
            var peer = s.peers[a.room].flatMap { $0.identity == identity ? $0 : nil } ?? Peer(identity: identity)
            guard peer.newest < a.order else { return .failure(.older) }
            peer.newest = a.order
            if peer.current?.key != a.sessionKey {
                // Pairings under a session two moves ago can never be used again.
                if let gone = peer.previous?.id { peer.pairings = peer.pairings.filter { $0.key.theirs != gone } }
                peer.previous = peer.current
                peer.current = PeerSession(key: a.sessionKey, id: Self.sessionID(a.sessionKey))
            }
            s.peers[a.room] = peer
            return .success((a.room, true, a.site))
        }
    }

    /// Whether we hold a session of `room`'s terminal, so that `seal` can seal for it.
    public func knows(_ room: String) -> Bool { state.withLock { $0.peers[room]?.current != nil } }

    /// `plaintext` sealed for `recipient`; nil when we have not heard its session yet (or its
    /// key agrees on nothing): the caller waits for its announcement.
    public func seal(_ plaintext: [UInt8], for recipient: String) -> [UInt8]? {
        state.withLock { s -> [UInt8]? in
            guard var peer = s.peers[recipient], let theirs = peer.current else { return nil }
            let pid = PairingID(mine: s.mine.id, theirs: theirs.id)
            guard var pairing = peer.pairings[pid] ?? Self.pairing(mine: s.mine, me: identity.publicIdentity, theirs: theirs, them: peer.identity) else {
                return nil
            }
            pairing.sent += 1
            let header = Self.header(sender: room, senderSession: s.mine.id, recipientSession: theirs.id, counter: pairing.sent)
            // swift-crypto only throws here for a nonce of the wrong size, which this one is not.
            let box = try! ChaChaPoly.seal(plaintext, using: pairing.send.key, nonce: Self.nonce(pairing.sent), authenticating: header)
            peer.pairings[pid] = pairing
            s.peers[recipient] = peer
            return header + [UInt8](box.ciphertext) + [UInt8](box.tag)
        }
    }

    /// The sender's room id and the datagram it sealed for us, or why it is refused.
    public func open(_ datagram: [UInt8]) -> Result<(sender: String, plaintext: [UInt8]), Failure> {
        guard datagram.count >= 4, datagram[0] == Self.magic.0, datagram[1] == Self.magic.1 else { return .failure(.notSealed) }
        guard datagram[2] == Self.version else { return .failure(.malformed) }
        let n = Int(datagram[3])
        let headerLength = 4 + n + 16
        guard n > 0, datagram.count >= headerLength + 16, let sender = String(validating: datagram[4..<(4 + n)], as: UTF8.self) else {
            return .failure(.malformed)
        }
        func u32(_ at: Int) -> UInt32 { datagram[at..<(at + 4)].reduce(0) { $0 << 8 | UInt32($1) } }
        let theirID = u32(4 + n), myID = u32(8 + n)
        let counter = datagram[(12 + n)..<headerLength].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return state.withLock { s -> Result<(sender: String, plaintext: [UInt8]), Failure> in
            guard sender != room, s.directory[sender] != nil, var peer = s.peers[sender] else { return .failure(.unknownSender) }
            guard let mine = [s.mine, s.myPrevious].compactMap({ $0 }).first(where: { $0.id == myID }),
                  let theirs = [peer.current, peer.previous].compactMap({ $0 }).first(where: { $0.id == theirID }) else {
                return .failure(.unknownSession)
            }
            let pid = PairingID(mine: mine.id, theirs: theirs.id)
            guard var pairing = peer.pairings[pid] ?? Self.pairing(mine: mine, me: identity.publicIdentity, theirs: theirs, them: peer.identity) else {
                return .failure(.unknownSession)
            }
            let plaintext: Data
            do {
                let box = try ChaChaPoly.SealedBox(nonce: Self.nonce(counter), ciphertext: datagram[headerLength..<(datagram.count - 16)],
                                                   tag: datagram[(datagram.count - 16)...])
                plaintext = try ChaChaPoly.open(box, using: pairing.receive.key, authenticating: datagram[0..<headerLength])
            } catch {
                return .failure(.authentication)
            }
            // Only an authentic datagram moves the window (a forged one must not shift it).
            guard pairing.window.accept(counter) else { return .failure(.replay) }
            peer.pairings[pid] = pairing
            s.peers[sender] = peer
            return .success((sender, [UInt8](plaintext)))
        }
    }

    /// A new session key; the old one still opens what peers seal to it until `forgetPrevious`.
    public func rotate() {
        let fresh = Session(newSessionKey())
        state.withLock { s in
            s.myPrevious = s.mine
            s.mine = fresh
        }
    }

    /// Erases the session before the last `rotate` and every pairing under it: what was sealed
    /// under it can no longer be opened by anyone.
    public func forgetPrevious() {
        state.withLock { s in
            guard let gone = s.myPrevious?.id else { return }
            s.myPrevious = nil
            for room in s.peers.keys { s.peers[room]!.pairings = s.peers[room]!.pairings.filter { $0.key.mine != gone } }
        }
    }

    /// The document changed: only these rooms' terminals, with these keys, are heard. A room
    /// whose key changed or went (a revoked or swapped box) loses its sessions and pairings at once.
    public func setDirectory(_ directory: [String: PublicIdentity]) {
        state.withLock { s in
            s.directory = directory
            s.peers = s.peers.filter { directory[$0.key] == $0.value.identity }
        }
    }

    private static func pairing(mine: Session, me: PublicIdentity, theirs: PeerSession, them: PublicIdentity) -> Pairing? {
        guard let shared = X25519.sharedSecret(mine.privateKey, theirs.key) else { return nil }
        func key(_ info: [UInt8]) -> SealKey {
            SealKey(shared.hkdfDerivedSymmetricKey(using: SHA256.self, salt: Array("intercomd pairwise v1".utf8), sharedInfo: info,
                                                   outputByteCount: 32))
        }
        return Pairing(send: key(me.key + them.key + mine.publicKey + theirs.key),
                       receive: key(them.key + me.key + theirs.key + mine.publicKey))
    }

    static func sessionID(_ publicKey: [UInt8]) -> UInt32 {
        SHA256.hash(data: publicKey).prefix(4).reduce(0) { $0 << 8 | UInt32($1) }
    }

    static func header(sender: String, senderSession: UInt32, recipientSession: UInt32, counter: UInt64) -> [UInt8] {
        let id = Array(sender.utf8)
        var h: [UInt8] = [magic.0, magic.1, version, UInt8(truncatingIfNeeded: id.count)] + id
        for v in [senderSession, recipientSession] { for shift in stride(from: 24, through: 0, by: -8) { h.append(UInt8(truncatingIfNeeded: v >> UInt32(shift))) } }
        for shift in stride(from: 56, through: 0, by: -8) { h.append(UInt8(truncatingIfNeeded: counter >> UInt64(shift))) }
        return h
    }

    static func nonce(_ counter: UInt64) -> ChaChaPoly.Nonce {
        var bytes = [UInt8](repeating: 0, count: 12)
        for i in 0..<8 { bytes[4 + i] = UInt8(truncatingIfNeeded: counter >> UInt64(56 - 8 * i)) }
        return try! ChaChaPoly.Nonce(data: bytes)
    }
}

/// A pairwise key. @unchecked: a SymmetricKey is never changed after it is made, only read (it
/// is not marked Sendable on Linux).
struct SealKey: @unchecked Sendable {
    let key: SymmetricKey
    init(_ key: SymmetricKey) { self.key = key }
}
