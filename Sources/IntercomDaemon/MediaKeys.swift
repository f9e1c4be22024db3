import Calls
import SiteSecurity
import Transport

/// SRTP sessions for calls: one per call and per sending room, so no two streams ever share a
/// key stream and a key learnt from one call opens no other. Each stream's key is the one its
/// sender drew and gave in the call's signalling (`MediaKey`, under terminal keys); without
/// one, it is derived from the site key, which every terminal of the site holds (and GStreamer
/// is given to decrypt a stream); with neither, media is in the clear. Calls thread only.
///
/// Sessions live as long as their call, and one call longer: the network thread may still hold
/// the previous call's sessions for a moment after new routes are posted, and a session must be
/// freed here, not there.
public final class MediaKeys {
    private let siteKey: SiteKey?
    private let room: RoomID
    private let ssrc: UInt32
    private var current: Sessions?
    private var previous: Sessions?

    private struct Sessions {
        let call: CallID
        let outboundKey: [UInt8]
        let outbound: SRTPSession
        var inbound: [RoomID: (key: [UInt8], session: SRTPSession)] = [:]
    }

    /// Why a call's media could not be protected: it then stays off (nothing flows in the clear).
    enum Failure: Error, CustomStringConvertible {
        case srtp(SRTPError)
        /// The peer gave no key for its stream, and there is no site key to derive one from.
        case noKey(RoomID)

        var description: String {
            switch self {
            case .srtp(let error): "\(error)"
            case .noKey(let room): "\(room) gave no key for its stream and there is no site key"
            }
        }
    }

    init(siteKey: SiteKey?, room: RoomID, ssrc: UInt32) {
        precondition(MediaKey.length == SRTPSession.keyLength, "a media key is one SRTP master key and salt")
        self.siteKey = siteKey
        self.room = room
        self.ssrc = ssrc
    }

    /// The 30 bytes of master key and salt for `sender`'s media in `call` under the site key
    /// (what GStreamer's srtpdec is given as `srtp-key` to decrypt that stream).
    public static func key(_ siteKey: SiteKey, call: CallID, sender: RoomID) -> [UInt8] {
        Array(siteKey.derive("srtp v1 call \(call) from \(sender.value)").prefix(SRTPSession.keyLength))
    }

    /// The sessions `plan` needs: ours and one per room heard, in `receiveFrom`'s order; nil when
    /// idle or when media is in the clear.
    func protection(for plan: MediaPlan) throws(Failure) -> MediaProtection? {
        guard let call = plan.call else { return nil }
        guard let own = plan.sendKey?.bytes ?? siteKey.map({ Self.key($0, call: call, sender: room) }) else { return nil }
        if current?.call != call || current?.outboundKey != own {
            previous = current
            current = Sessions(call: call, outboundKey: own, outbound: try Self.session(own, .outbound(ssrc: ssrc)))
        }
        var inbound: [SRTPSession] = []
        for peer in plan.receiveFrom {
            guard let key = peer.key?.bytes ?? siteKey.map({ Self.key($0, call: call, sender: peer.room) }) else {
                throw .noKey(peer.room)
            }
            if let held = current!.inbound[peer.room], held.key == key {
                inbound.append(held.session)
            } else {
                let s = try Self.session(key, .inbound)
                current!.inbound[peer.room] = (key, s)
                inbound.append(s)
            }
        }
        return MediaProtection(outbound: current!.outbound, inbound: inbound)
    }

    private static func session(_ key: [UInt8], _ direction: SRTPSession.Direction) throws(Failure) -> SRTPSession {
        do { return try SRTPSession(key: key, direction: direction) } catch { throw .srtp(error) }
    }
}

/// The engine's keys: a fresh one for each stream while signalling is sealed per pair of
/// terminals (only then does the seal keep them between the call's terminals); none before.
struct AgreedMediaKeys: MediaKeySource {
    let protection: SignalProtection
    func newKey() -> MediaKey? { protection.mode == .terminalKeys ? .random() : nil }
}
