/// The administrator's side of enrolment and revocation: which terminal (public key) each room
/// has, which keys are revoked, and the requests waiting for a decision. Deterministic and
/// without I/O: the tool (later the site service) feeds it the requests it fetched and what the
/// administrator typed, and writes `approved` and `revoked` into the next signed site document.
/// Each command gives one outcome; nothing else changes the state.
public struct Enrolment: Sendable {
    public enum Command: Sendable {
        /// A request that `EnrolmentRequest.open` accepted.
        case heard(EnrolmentRequest, PublicIdentity)
        /// The administrator approves the pending terminal whose code the installer read, for `room`.
        case approve(room: String, code: EnrolmentCode)
        /// The room's terminal is revoked: its key is never approved again.
        case revoke(room: String)
    }

    public enum Outcome: Sendable, Equatable {
        case pending(PublicIdentity, room: String)
        /// The key is already the terminal of this room: nothing to do.
        case alreadyApproved(room: String)
        /// `replaced`: the room's terminal before (a swapped box); `movedFrom`: the room this key
        /// had before (a box moved to another room).
        case approved(PublicIdentity, room: String, replaced: PublicIdentity?, movedFrom: String?)
        case revoked(PublicIdentity, room: String)
        case refused(EnrolmentRefusal)
    }

    /// A request waiting for the administrator, in the order heard.
    public struct Pending: Sendable, Equatable {
        public let identity: PublicIdentity
        /// The room the terminal was set up for ("" for none).
        public let room: String
        public let software: String
    }

    /// More pending requests than this drop the oldest: a flood of made-up keys cannot grow the
    /// administrator's memory, and a real terminal asks again every few seconds.
    public static let maximumPending = 256

    public let site: String
    public private(set) var rooms: Set<String>
    public private(set) var approved: [String: PublicIdentity]
    public private(set) var revoked: Set<PublicIdentity>
    /// Keys that held a room until another box was approved for it (a swapped box). They still
    /// claim their codes (`approve`); one asking again is pending like any other.
    public private(set) var retired: Set<PublicIdentity>
    public private(set) var pending: [Pending] = []
    /// Requests dropped to keep `maximumPending`.
    public private(set) var droppedPending = 0
    private let codeOf: @Sendable (PublicIdentity) -> EnrolmentCode

    /// - Parameter codeOf: the code of a key; simulations give their own to stand for a key
    ///   someone made to match another terminal's code.
    public init(site: String, rooms: Set<String>, approved: [String: PublicIdentity] = [:], revoked: Set<PublicIdentity> = [],
                retired: Set<PublicIdentity> = [], codeOf: (@Sendable (PublicIdentity) -> EnrolmentCode)? = nil) {
        self.site = site
        self.rooms = rooms
        self.approved = approved
        self.revoked = revoked
        self.retired = retired
        self.codeOf = codeOf ?? { [site] in $0.enrolmentCode(site: site) }
    }

    /// The room of an approved key.
    public func room(of identity: PublicIdentity) -> String? {
        approved.first { $0.value == identity }?.key
    }

    public mutating func apply(_ command: Command) -> Outcome {
        switch command {
        case .heard(let request, let identity): heard(request, identity)
        case .approve(let room, let code): approve(room: room, code: code)
        case .revoke(let room): revoke(room: room)
        }
    }

    private mutating func heard(_ request: EnrolmentRequest, _ identity: PublicIdentity) -> Outcome {
        guard request.site == site else { return .refused(.otherSite) }
        guard !revoked.contains(identity) else { return .refused(.revokedIdentity) }
        if let room = room(of: identity) { return .alreadyApproved(room: room) }
        pending.removeAll { $0.identity == identity }
        pending.append(Pending(identity: identity, room: request.room, software: request.software))
        if pending.count > Self.maximumPending {
            pending.removeFirst()
            droppedPending += 1
        }
        return .pending(identity, room: request.room)
    }

    /// Every key the enrolment knows still claims its code: a pending one, one that holds a room,
    /// one that was replaced, one revoked. A code claimed by two keys is refused, so a key made to
    /// match a real box's code wins nothing once that box has been heard.
    private mutating func approve(room: String, code: EnrolmentCode) -> Outcome {
        guard rooms.contains(room) else { return .refused(.unknownRoom) }
        if revoked.contains(where: { codeOf($0) == code }) { return .refused(.revokedIdentity) }
        let asking = pending.filter { codeOf($0.identity) == code }.map(\.identity)
        let holding = approved.values.filter { codeOf($0) == code }
        let known = retired.filter { codeOf($0) == code && !asking.contains($0) }
        let claimants = asking + holding + known
        guard let identity = claimants.first else { return .refused(pending.isEmpty ? .noRequest : .wrongCode) }
        guard claimants.count == 1 else { return .refused(.ambiguous) }
        // A replaced box must ask again (it is then pending) before it takes a room.
        guard known.isEmpty else { return .refused(.noRequest) }
        let movedFrom = self.room(of: identity)
        if movedFrom == room { return .alreadyApproved(room: room) }
        pending.removeAll { $0.identity == identity }
        if let movedFrom { approved[movedFrom] = nil }
        let replaced = approved[room]
        if let replaced { retired.insert(replaced) }
        retired.remove(identity)
        approved[room] = identity
        return .approved(identity, room: room, replaced: replaced, movedFrom: movedFrom)
    }

    private mutating func revoke(room: String) -> Outcome {
        guard rooms.contains(room) else { return .refused(.unknownRoom) }
        guard let identity = approved[room] else { return .refused(.notApproved) }
        approved[room] = nil
        revoked.insert(identity)
        pending.removeAll { $0.identity == identity }
        return .revoked(identity, room: room)
    }

    /// What a terminal with `identity` is by a document that approves `approved` and revokes
    /// `revoked`: the terminal side's one rule.
    public static func standing(of identity: PublicIdentity, approved: [String: PublicIdentity],
                                revoked: Set<PublicIdentity>) -> Standing {
        if revoked.contains(identity) { return .revoked }
        if let room = approved.first(where: { $0.value == identity })?.key { return .approved(room: room) }
        return .pending
    }

    public enum Standing: Sendable, Equatable {
        /// No document approves it yet: it takes no calls and sends only its request.
        case pending
        case approved(room: String)
        /// It stops taking part; only a new key (a new enrolment) brings the box back.
        case revoked
    }
}

/// Why a request or an administrator's decision was refused. Each is counted and named.
public enum EnrolmentRefusal: String, Error, Sendable, CaseIterable, Codable {
    /// Not a request (not JSON, fields missing, too long, not a key).
    case malformed
    case unknownFormat
    /// A request for another practice.
    case otherSite
    /// Not signed by the key it names: the sender does not hold it.
    case badSignature
    /// A revoked key asks again: it never comes back.
    case revokedIdentity
    /// The room is not in the site document.
    case unknownRoom
    /// No terminal is waiting.
    case noRequest
    /// Terminals are waiting, none with that code (a mistyped code, or the box's request not heard).
    case wrongCode
    /// Two waiting terminals have that code: one key was made to match the other's. Nothing is approved.
    case ambiguous
    /// The room has no terminal to revoke.
    case notApproved
}
