import Crypto
import Foundation
import Synchronization

/// Authenticated encryption of signalling datagrams (ChaCha20-Poly1305, swift-crypto) with replay
/// protection, keyed from the site key.
///
/// Wire: "IS", version 2, the scope (0: for one room, 1: for every room), sender length n, the
/// sender's room id (n bytes), a counter (8 bytes, big endian), the sealed datagram, the tag (16).
/// Authenticated with it: the header and, for one room, that room's id (not sent: the receiver
/// puts its own), so a datagram taken on its way to one room does not open at another. Only
/// hellos are sealed for every room (one seal for all, and a hello is the same for all). Each
/// sender has its own key (derived from the site key and its room id), so two senders' counters
/// never make the same nonce under one key. The counter is the wall clock in microseconds, at
/// least one more than the last: it keeps rising across a restart without being stored.
///
/// A receiver keeps a replay window per sender. A sender it has not heard since its own start
/// must be within `freshness` of its clock: after a restart, an old datagram replayed is refused
/// unless it is younger than that.
public final class SignalSeal: Sendable {
    public enum Failure: Error, Equatable, Sendable {
        /// Not a sealed datagram (a terminal without the site key, or garbage).
        case notSealed
        case malformed
        /// The claimed sender is not in the directory: refused before any cryptography.
        case unknownSender
        /// Wrong key, changed on the way, or sealed for another room.
        case authentication
        /// A counter already seen, or too old for the window.
        case replay
        /// First datagram of a sender, too far from our clock.
        case stale
    }

    public static let magic: (UInt8, UInt8) = (0x49, 0x53)  // "IS"
    public static let version: UInt8 = 2
    public static let overhead = 5 + 8 + 16  // plus the sender's id

    /// Whom a datagram is sealed for.
    public enum Recipient: Sendable, Equatable {
        case room(String)
        /// Every room of the site: hellos only.
        case everyRoom
    }
    public static let defaultFreshness: UInt64 = 60_000_000

    private struct State {
        var lastCounter: UInt64 = 0
        var windows: [String: ReplayWindow] = [:]
        // Made once per room: a SymmetricKey per datagram would copy and wipe the key each time.
        var keys: [String: RoomKey] = [:]
        var known: Set<String>
    }

    private let siteKey: SiteKey
    private let room: String
    /// This room's id as authenticated data: what is sealed for it names it.
    private let roomID: [UInt8]
    private let myKey: RoomKey
    private let clock: @Sendable () -> UInt64
    private let freshness: UInt64
    private let state: Mutex<State>

    /// - Parameters:
    ///   - room: this terminal's room id (the sender of what it seals).
    ///   - knownRooms: the directory: only these are accepted as senders.
    ///   - clock: wall-clock microseconds (tests give their own).
    public init(siteKey: SiteKey, room: String, knownRooms: Set<String>,
                clock: @escaping @Sendable () -> UInt64 = SignalSeal.wallClockMicroseconds,
                freshness: UInt64 = SignalSeal.defaultFreshness) {
        self.siteKey = siteKey
        self.room = room
        roomID = Array(room.utf8)
        myKey = RoomKey(siteKey.derive("signalling v1 from \(room)"))
        self.clock = clock
        self.freshness = freshness
        state = Mutex(State(known: knownRooms))
    }

    /// The directory changed (a reload).
    public func setKnownRooms(_ rooms: Set<String>) {
        state.withLock { s in
            s.known = rooms
            s.keys = s.keys.filter { rooms.contains($0.key) }
            s.windows = s.windows.filter { rooms.contains($0.key) }
        }
    }

    public func seal(_ plaintext: [UInt8], for recipient: Recipient) -> [UInt8] {
        let counter = state.withLock { s in
            s.lastCounter = max(s.lastCounter + 1, clock())
            return s.lastCounter
        }
        let header = Self.header(sender: room, counter: counter, everyRoom: recipient == .everyRoom)
        var authenticated = header
        if case .room(let id) = recipient { authenticated += Array(id.utf8) }
        // swift-crypto only throws here for a nonce of the wrong size, which this one is not.
        let box = try! ChaChaPoly.seal(plaintext, using: myKey.key, nonce: Self.nonce(counter), authenticating: authenticated)
        return header + [UInt8](box.ciphertext) + [UInt8](box.tag)
    }

    /// The sender's room id, the datagram it sealed and whether it was sealed for every room, or
    /// why it is refused.
    public func open(_ datagram: [UInt8]) -> Result<(sender: String, plaintext: [UInt8], forEveryRoom: Bool), Failure> {
        guard datagram.count >= 5, datagram[0] == Self.magic.0, datagram[1] == Self.magic.1 else { return .failure(.notSealed) }
        guard datagram[2] == Self.version, datagram[3] <= 1 else { return .failure(.malformed) }
        let everyRoom = datagram[3] == 1
        let n = Int(datagram[4])
        let headerLength = 5 + n + 8
        guard n > 0, datagram.count >= headerLength + 16,
              let sender = String(validating: datagram[5..<(5 + n)], as: UTF8.self) else { return .failure(.malformed) }
        var counter: UInt64 = 0
        for b in datagram[(5 + n)..<headerLength] { counter = counter << 8 | UInt64(b) }

        let key: RoomKey? = state.withLock { s in
            guard s.known.contains(sender), sender != room else { return nil }
            if let k = s.keys[sender] { return k }
            let k = RoomKey(siteKey.derive("signalling v1 from \(sender)"))
            s.keys[sender] = k
            return k
        }
        guard let key else { return .failure(.unknownSender) }
        var authenticated = Array(datagram[0..<headerLength])
        if !everyRoom { authenticated += roomID }
        let plaintext: Data
        do {
            let box = try ChaChaPoly.SealedBox(nonce: Self.nonce(counter),
                                               ciphertext: datagram[headerLength..<(datagram.count - 16)],
                                               tag: datagram[(datagram.count - 16)...])
            plaintext = try ChaChaPoly.open(box, using: key.key, authenticating: authenticated)
        } catch {
            return .failure(.authentication)
        }
        // Only an authentic datagram may move the window (a forged one must not shift it).
        let now = clock()
        let verdict: Failure? = state.withLock { s in
            if s.windows[sender] == nil, (counter > now ? counter - now : now - counter) > freshness { return .stale }
            var w = s.windows[sender] ?? ReplayWindow()
            guard w.accept(counter) else { return .replay }
            s.windows[sender] = w
            return nil
        }
        if let verdict { return .failure(verdict) }
        return .success((sender, [UInt8](plaintext), everyRoom))
    }

    /// One room's signalling key. @unchecked: a SymmetricKey is never changed after it is made,
    /// only read, by any thread (swift-crypto does not mark it Sendable).
    struct RoomKey: @unchecked Sendable {
        let key: SymmetricKey
        init(_ bytes: [UInt8]) { key = SymmetricKey(data: bytes) }
    }

    static func header(sender: String, counter: UInt64, everyRoom: Bool) -> [UInt8] {
        let id = Array(sender.utf8)
        var h: [UInt8] = [magic.0, magic.1, version, everyRoom ? 1 : 0, UInt8(id.count)] + id
        for shift in stride(from: 56, through: 0, by: -8) { h.append(UInt8(truncatingIfNeeded: counter >> UInt64(shift))) }
        return h
    }

    static func nonce(_ counter: UInt64) -> ChaChaPoly.Nonce { TerminalSeal.nonce(counter) }

    public static let wallClockMicroseconds: @Sendable () -> UInt64 = {
        var t = timespec()
        clock_gettime(CLOCK_REALTIME, &t)
        return UInt64(max(0, t.tv_sec)) * 1_000_000 + UInt64(max(0, t.tv_nsec)) / 1000
    }
}
