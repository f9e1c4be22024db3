import CSRTP

/// SRTP (RFC 3711) through libsrtp2, the one file that calls it. The suite is the default one,
/// AES-128 in counter mode with HMAC-SHA1 and an 80-bit tag, which every SRTP stack (GStreamer's
/// srtpdec among them) knows. One session holds one sender's key: `outbound` protects our own
/// stream, `inbound` checks one remote sender's. Protecting and checking work in place and do not
/// allocate; an inbound session allocates once, when its sender's first authentic packet arrives
/// (libsrtp then makes the stream state for that SSRC from its template).
public final class SRTPSession: @unchecked Sendable {
    // @unchecked: the libsrtp session is used by one thread at a time (the network thread), and
    // made and freed on the thread that owns the keys.

    /// 16 bytes of master key, then 14 of master salt.
    public static let keyLength = 30
    /// What protecting adds to a packet (the authentication tag).
    public static let tagLength = 10
    /// libsrtp may write this much past a packet's end while protecting it.
    public static let trailerRoom = Int(SRTP_MAX_TRAILER_LEN)

    public enum Direction: Sendable, Equatable {
        /// Our own stream: its SSRC is known, so libsrtp makes its state now, not at the first packet.
        case outbound(ssrc: UInt32)
        /// Any remote stream under this key.
        case inbound
    }

    private let session: srtp_t

    /// `key` is `keyLength` bytes; `replayWindow` packets are remembered against replays (64-32768).
    public init(key: [UInt8], direction: Direction, replayWindow: Int = 1024) throws(SRTPError) {
        if let failure = SRTPSession.library { throw failure }
        guard key.count == Self.keyLength else {
            throw SRTPError(status: Int32(srtp_err_status_bad_param.rawValue), context: "a key of \(key.count) bytes, not \(Self.keyLength)")
        }
        var policy = srtp_policy_t()
        csrtp_policy_aes128_sha1_80(&policy)
        switch direction {
        case .outbound(let ssrc): policy.ssrc = srtp_ssrc_t(type: ssrc_specific, value: ssrc)
        case .inbound: policy.ssrc = srtp_ssrc_t(type: ssrc_any_inbound, value: 0)
        }
        policy.window_size = UInt(replayWindow)
        policy.allow_repeat_tx = 0
        var made: srtp_t?
        var material = key
        let status = material.withUnsafeMutableBufferPointer { k in
            policy.key = k.baseAddress
            return srtp_create(&made, &policy)  // copies the key into its own state
        }
        guard status == srtp_err_status_ok, let made else { throw SRTPError(status: Int32(status.rawValue), context: "srtp_create") }
        session = made
    }

    deinit { srtp_dealloc(session) }

    /// Protects the RTP packet of `length` bytes at `packet` in place: encrypts its payload and
    /// appends the tag. `packet` must have room for `trailerRoom` more bytes. Returns the new
    /// length, or the negated libsrtp status.
    @inline(__always)
    public func protect(_ packet: UnsafeMutableRawPointer, length: Int) -> Int {
        var n = Int32(length)
        let status = srtp_protect(session, packet, &n)
        return status == srtp_err_status_ok ? Int(n) : -Int(status.rawValue)
    }

    /// Checks and decrypts the SRTP packet of `length` bytes at `packet` in place. Returns the RTP
    /// packet's length, or the negated libsrtp status (`SRTPError.authenticationFailed` for a
    /// forged or damaged packet, `replayed` and `tooOld` for replays).
    @inline(__always)
    public func unprotect(_ packet: UnsafeMutableRawPointer, length: Int) -> Int {
        var n = Int32(length)
        let status = srtp_unprotect(session, packet, &n)
        return status == srtp_err_status_ok ? Int(n) : -Int(status.rawValue)
    }

    /// libsrtp's one-time set-up; its failure, if any, is every session's.
    private static let library: SRTPError? = {
        let status = srtp_init()
        return status == srtp_err_status_ok ? nil : SRTPError(status: Int32(status.rawValue), context: "srtp_init")
    }()
}

/// A libsrtp status as a Swift error. libsrtp has no message function, so the names of its
/// statuses are spelled out here.
public struct SRTPError: Error, Sendable, Equatable, CustomStringConvertible {
    public let status: Int32
    public let context: String

    public static let authenticationFailed = Int32(srtp_err_status_auth_fail.rawValue)
    public static let replayed = Int32(srtp_err_status_replay_fail.rawValue)
    public static let tooOld = Int32(srtp_err_status_replay_old.rawValue)

    public init(status: Int32, context: String) {
        self.status = status
        self.context = context
    }

    public var description: String { "\(context): \(Self.message(status))" }

    public static func message(_ status: Int32) -> String {
        switch srtp_err_status_t(rawValue: UInt32(status)) {
        case srtp_err_status_ok: "ok"
        case srtp_err_status_fail: "unspecified failure"
        case srtp_err_status_bad_param: "unsupported parameter"
        case srtp_err_status_alloc_fail: "could not allocate memory"
        case srtp_err_status_init_fail: "could not initialise"
        case srtp_err_status_terminus: "cannot process as much data as requested"
        case srtp_err_status_auth_fail: "authentication failure"
        case srtp_err_status_cipher_fail: "cipher failure"
        case srtp_err_status_replay_fail: "replay check failed (bad index)"
        case srtp_err_status_replay_old: "replay check failed (index too old)"
        case srtp_err_status_algo_fail: "algorithm failed its self-test"
        case srtp_err_status_no_such_op: "unsupported operation"
        case srtp_err_status_no_ctx: "no stream for this SSRC"
        case srtp_err_status_key_expired: "key expired: too many packets under one key"
        case srtp_err_status_parse_err: "error parsing the packet"
        default: "status \(status)"
        }
    }
}
