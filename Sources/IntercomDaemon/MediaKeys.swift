import Calls
import SiteSecurity
import Transport

/// SRTP keys for calls, derived from the site key: one per call and per sending room, so no two
/// streams ever share a key stream, a key learnt from one call opens no other, and every terminal
/// of the call derives the same key without sending it anywhere. Calls thread only.
///
/// Sessions live as long as their call, and one call longer: the network thread may still hold
/// the previous call's sessions for a moment after new routes are posted, and a session must be
/// freed here, not there.
public final class MediaKeys {
    private let siteKey: SiteKey
    private let room: RoomID
    private let ssrc: UInt32
    private var current: Sessions?
    private var previous: Sessions?

    private struct Sessions {
        let call: CallID
        let outbound: SRTPSession
        var inbound: [RoomID: SRTPSession] = [:]
    }

    init(siteKey: SiteKey, room: RoomID, ssrc: UInt32) {
        self.siteKey = siteKey
        self.room = room
        self.ssrc = ssrc
    }

    /// The 30 bytes of master key and salt for `sender`'s media in `call` (what GStreamer's
    /// srtpdec is given as `srtp-key` to decrypt that stream).
    public static func key(_ siteKey: SiteKey, call: CallID, sender: RoomID) -> [UInt8] {
        Array(siteKey.derive("srtp v1 call \(call) from \(sender.value)").prefix(SRTPSession.keyLength))
    }

    /// The sessions `plan` needs: ours and one per room heard, in `receiveFrom`'s order; nil when idle.
    func protection(for plan: MediaPlan) throws(SRTPError) -> MediaProtection? {
        guard let call = plan.call else { return nil }
        if current?.call != call {
            previous = current
            current = Sessions(call: call, outbound: try SRTPSession(key: Self.key(siteKey, call: call, sender: room),
                                                                     direction: .outbound(ssrc: ssrc)))
        }
        var inbound: [SRTPSession] = []
        for peer in plan.receiveFrom {
            if let s = current!.inbound[peer.room] {
                inbound.append(s)
            } else {
                let s = try SRTPSession(key: Self.key(siteKey, call: call, sender: peer.room), direction: .inbound)
                current!.inbound[peer.room] = s
                inbound.append(s)
            }
        }
        return MediaProtection(outbound: current!.outbound, inbound: inbound)
    }
}
