import Foundation

/// A pending terminal's request to join its site (JSON; `identity` and `signature` base64): its
/// public key, the room it was set up for (a hint: the administrator gives the room) and its
/// software, signed with the key itself, so whoever sends it holds that key. It carries no
/// secret; the enrolment code read at the box decides whether it is approved. The one wire type
/// for a request.
public struct EnrolmentRequest: Codable, Sendable, Equatable {
    public var format: Int
    public var site: String
    /// The room in the terminal's own file, or "" when it has none.
    public var room: String
    public var identity: Data
    public var software: String
    public var signature: Data

    public static let currentFormat = 1
    /// Larger requests are refused before they are decoded.
    public static let maximumBytes = 2048

    public init(site: String, room: String, software: String, signedWith key: TerminalIdentity) {
        format = Self.currentFormat
        self.site = site
        self.room = room
        identity = Data(key.publicIdentity.key)
        self.software = software
        signature = Data(key.sign(Self.signedMessage(site: site, room: room, identity: [UInt8](identity), software: software)))
    }

    /// A domain label, then each field with its length, so that no two requests sign the same bytes.
    static func signedMessage(site: String, room: String, identity: [UInt8], software: String) -> [UInt8] {
        var message = Array("intercomd enrolment request v1\0".utf8)
        for field in [Array(site.utf8), Array(room.utf8), identity, Array(software.utf8)] {
            message += [UInt8(truncatingIfNeeded: field.count >> 8), UInt8(truncatingIfNeeded: field.count)] + field
        }
        return message
    }

    public func encoded() -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return [UInt8](try! encoder.encode(self))  // plain fields: encoding cannot fail
    }

    /// Reads and checks a request whole: size, JSON, format, site, key, signature.
    public static func open(_ bytes: [UInt8], site: String) -> Result<(request: EnrolmentRequest, identity: PublicIdentity), EnrolmentRefusal> {
        guard bytes.count <= maximumBytes else { return .failure(.malformed) }
        guard let request = try? JSONDecoder().decode(EnrolmentRequest.self, from: Data(bytes)) else { return .failure(.malformed) }
        guard request.format == currentFormat else { return .failure(.unknownFormat) }
        guard request.site == site else { return .failure(.otherSite) }
        guard request.room.utf8.count <= 64, request.software.utf8.count <= 64 else { return .failure(.malformed) }
        guard let identity = try? PublicIdentity(key: [UInt8](request.identity)) else { return .failure(.malformed) }
        let message = signedMessage(site: request.site, room: request.room, identity: identity.key, software: request.software)
        guard identity.isValid(signature: [UInt8](request.signature), for: message) else { return .failure(.badSignature) }
        return .success((request, identity))
    }
}
