import Calls
import Foundation

/// The daemon's counters (stats): what the statistics log line shows, as typed fields. Every
/// field is required on the wire: a reply that lacks one is a protocol violation, never a 0.
public struct DaemonStatistics: Sendable, Equatable, Codable {
    public struct Audio: Sendable, Equatable, Codable {
        /// The audio thread runs a session now.
        public var running: Bool
        /// The devices in force: open, or being tried (ALSA names).
        public var captureDevice: String
        public var playbackDevice: String
        public var frames: Int
        public var xruns: Int
        public var captureXruns: Int
        public var playbackXruns: Int
        /// Device sessions started (1 + restarts after xruns or lost devices).
        public var sessions: Int
        /// Capture time that never reached the network (restarts, a sound server's drops), in frames.
        public var captureGapFrames: Int
        /// Of those: frames captured but not sent, being older than the newest a wake-up hands on
        /// (a backlog after a stall: late audio is worse than none).
        public var staleCaptureFrames: Int
        /// What the capture device holds now (snd_pcm_delay), ms: a backlog not yet read.
        public var captureDelayMs: Double
        public var micDrops: Int
        /// Samples the microphone gain drove past full scale (what is sent clipped).
        public var microphoneClippedSamples: Int
        /// Samples the mixer clipped at full scale on the way to the speaker.
        public var speakerClippedSamples: Int
        public var echoReturnLossEnhancementDB: Double
        /// The measured bulk echo delay; nil while unmeasured.
        public var echoDelayMs: Double?
        public var echoCancellerResets: Int
        public var echoCancellerRealignments: Int
        /// Times the echo reference moved with a jump of the measured echo delay, the filter kept.
        public var echoReferenceMoves: Int
        /// Captured frames the residual echo gate attenuated (it found no one talking in the room
        /// while the far end played).
        public var echoGatedFrames: Int
        /// What the playback device holds now (snd_pcm_delay), ms: a frame written now plays after
        /// this less the frame.
        public var playbackDelayMs: Double
        /// How long the echo chain holds a frame, ms (speexdsp's preprocessor, when it runs, hands
        /// each frame on one frame late; 0 without it).
        public var echoChainDelayMs: Double
        public var processMaxMs: Double
        /// Loops the howl guard broke; nil without a guard.
        public var howls: Int?
        /// What the howl guard takes off what is sent now, dB (0: nothing); nil without a guard.
        public var howlGuardAttenuationDB: Double?
        /// How much of the microphone the loop canceller removed over the last second, dB; nil without one (no network).
        public var loopRemovedDB: Double?
        /// Sent frames that came back to the loop canceller too late to be used first where they belong.
        public var loopLateFrames: Int?
        /// Whether the loop canceller subtracts its estimate now (a loop shows); nil without one.
        public var loopEngaged: Bool?
        /// Times the loop canceller engaged since the daemon started; nil without one.
        public var loopEngagements: Int?

        public init(running: Bool, captureDevice: String, playbackDevice: String, frames: Int, xruns: Int, captureXruns: Int, playbackXruns: Int, sessions: Int,
                    captureGapFrames: Int, staleCaptureFrames: Int, captureDelayMs: Double, micDrops: Int,
                    microphoneClippedSamples: Int, speakerClippedSamples: Int,
                    echoReturnLossEnhancementDB: Double, echoDelayMs: Double?,
                    echoCancellerResets: Int, echoCancellerRealignments: Int, echoReferenceMoves: Int, processMaxMs: Double, howls: Int?,
                    howlGuardAttenuationDB: Double? = nil, loopRemovedDB: Double? = nil, loopLateFrames: Int? = nil,
                    loopEngaged: Bool? = nil, loopEngagements: Int? = nil, echoGatedFrames: Int = 0,
                    playbackDelayMs: Double = 0, echoChainDelayMs: Double = 0) {
            self.running = running
            self.captureDevice = captureDevice
            self.playbackDevice = playbackDevice
            self.frames = frames
            self.xruns = xruns
            self.captureXruns = captureXruns
            self.playbackXruns = playbackXruns
            self.sessions = sessions
            self.captureGapFrames = captureGapFrames
            self.staleCaptureFrames = staleCaptureFrames
            self.captureDelayMs = captureDelayMs
            self.micDrops = micDrops
            self.microphoneClippedSamples = microphoneClippedSamples
            self.speakerClippedSamples = speakerClippedSamples
            self.echoReturnLossEnhancementDB = echoReturnLossEnhancementDB
            self.echoDelayMs = echoDelayMs
            self.echoCancellerResets = echoCancellerResets
            self.echoCancellerRealignments = echoCancellerRealignments
            self.echoReferenceMoves = echoReferenceMoves
            self.echoGatedFrames = echoGatedFrames
            self.playbackDelayMs = playbackDelayMs
            self.echoChainDelayMs = echoChainDelayMs
            self.processMaxMs = processMaxMs
            self.howls = howls
            self.howlGuardAttenuationDB = howlGuardAttenuationDB
            self.loopRemovedDB = loopRemovedDB
            self.loopLateFrames = loopLateFrames
            self.loopEngaged = loopEngaged
            self.loopEngagements = loopEngagements
        }
    }

    /// One remote stream being played (a mixer slot in use).
    public struct Stream: Sendable, Equatable, Codable {
        public var ssrc: UInt32
        /// "a.b.c.d:port" of the sender.
        public var source: String
        public var delayMs: Double
        public var targetMs: Double
        public var received: Int
        public var played: Int
        /// Frames concealed for packets that never came.
        public var concealed: Int
        public var fecRecovered: Int
        public var fecMissed: Int
        public var late: Int
        public var underruns: Int
        public var cutBacks: Int
        /// Frames the jitter buffer inserted (to grow its delay) and dropped (to shrink it).
        public var inserted: Int
        public var dropped: Int
        /// Times a silence of the network ended in another timeline and the transit window was forgotten.
        public var newTimelines: Int
        public var driftPPM: Double
        /// The drift corrector's playout-rate trim now, ppm (the drift estimate plus what it works off).
        public var trimPPM: Double
        /// How far the corrector's resampling moved the delay, summed without sign, ms.
        public var slewedMs: Double
        /// How far the corrector's jumps in pauses moved it, summed without sign, ms.
        public var pauseJumpedMs: Double
        /// How far the fastest transit moved in steps of a quarter frame or more, summed without
        /// sign, ms: the sender's timeline shifted, and the delay followed.
        public var pathShiftMs: Double
        /// How old the newest sample handed to the mixer is, beyond the fastest transit, ms: the
        /// receive side's share (jitter buffer and drift corrector) of the delay.
        public var playoutDelayMs: Double
        /// Reads of the stream held up by more than three frames (the device or the machine), and
        /// packets that arrived more than three frames after the one before (the sender or the path).
        public var readerHeldUp: Int
        public var arrivalStalls: Int

        public init(ssrc: UInt32, source: String, delayMs: Double, targetMs: Double, received: Int, played: Int, concealed: Int,
                    fecRecovered: Int, fecMissed: Int, late: Int, underruns: Int, cutBacks: Int,
                    inserted: Int, dropped: Int, newTimelines: Int, driftPPM: Double, trimPPM: Double, slewedMs: Double,
                    pauseJumpedMs: Double, pathShiftMs: Double, playoutDelayMs: Double, readerHeldUp: Int = 0, arrivalStalls: Int = 0) {
            self.ssrc = ssrc
            self.source = source
            self.delayMs = delayMs
            self.targetMs = targetMs
            self.received = received
            self.played = played
            self.concealed = concealed
            self.fecRecovered = fecRecovered
            self.fecMissed = fecMissed
            self.late = late
            self.underruns = underruns
            self.cutBacks = cutBacks
            self.inserted = inserted
            self.dropped = dropped
            self.newTimelines = newTimelines
            self.driftPPM = driftPPM
            self.trimPPM = trimPPM
            self.slewedMs = slewedMs
            self.pauseJumpedMs = pauseJumpedMs
            self.pathShiftMs = pathShiftMs
            self.playoutDelayMs = playoutDelayMs
            self.readerHeldUp = readerHeldUp
            self.arrivalStalls = arrivalStalls
        }

        // Acronyms spelled as the snake_case conversion reads them back.
        private enum CodingKeys: String, CodingKey {
            case ssrc, source, delayMs, targetMs, received, played, concealed, fecRecovered, fecMissed, late, underruns, cutBacks
            case inserted, dropped, newTimelines, slewedMs, pauseJumpedMs, pathShiftMs, playoutDelayMs, readerHeldUp, arrivalStalls
            case driftPPM = "driftPpm", trimPPM = "trimPpm"
        }
    }

    /// The Opus encoder as it was opened.
    public struct OpusEncoding: Sendable, Equatable, Codable {
        /// `opus.application`: "voip" or "restricted_lowdelay".
        public var application: String
        public var bitrate: Int
        public var fec: Bool
        public var dtx: Bool
        /// The encoder's look-ahead, ms (6.5 for voip, 2.5 for restricted_lowdelay).
        public var lookaheadMs: Double

        public init(application: String, bitrate: Int, fec: Bool, dtx: Bool, lookaheadMs: Double) {
            self.application = application
            self.bitrate = bitrate
            self.fec = fec
            self.dtx = dtx
            self.lookaheadMs = lookaheadMs
        }
    }

    /// SRTP verdicts on received media, and sending failures.
    public struct SRTP: Sendable, Equatable, Codable {
        public var authenticated: Int
        public var unauthenticated: Int
        public var replayed: Int
        /// Received packets libsrtp failed on for another reason.
        public var failed: Int
        /// Outgoing packets that could not be protected (not sent).
        public var protectErrors: Int

        public init(authenticated: Int, unauthenticated: Int, replayed: Int, failed: Int, protectErrors: Int) {
            self.authenticated = authenticated
            self.unauthenticated = unauthenticated
            self.replayed = replayed
            self.failed = failed
            self.protectErrors = protectErrors
        }
    }

    public struct Network: Sendable, Equatable, Codable {
        /// This terminal's own stream's SSRC; nil when it does not send.
        public var ssrc: UInt32?
        /// The encoder; nil when it does not send.
        public var opus: OpusEncoding?
        public var sent: Int
        /// The loudest sample sent in the last whole second, dBFS; nil when it does not send.
        public var sentPeakDBFS: Double?
        public var sendErrors: Int
        /// Packets that carried the previous frame as FEC.
        public var fecCarried: Int
        /// Datagrams that arrived, and those accepted into a stream.
        public var datagrams: Int
        public var accepted: Int
        public var malformed: Int
        public var notRouted: Int
        public var srtp: SRTP
        public var streams: [Stream]

        public func encode(to encoder: Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(ssrc, forKey: .ssrc)  // null, not absent
            try c.encode(opus, forKey: .opus)
            try c.encode(sent, forKey: .sent)
            try c.encode(sentPeakDBFS, forKey: .sentPeakDBFS)
            try c.encode(sendErrors, forKey: .sendErrors)
            try c.encode(fecCarried, forKey: .fecCarried)
            try c.encode(datagrams, forKey: .datagrams)
            try c.encode(accepted, forKey: .accepted)
            try c.encode(malformed, forKey: .malformed)
            try c.encode(notRouted, forKey: .notRouted)
            try c.encode(srtp, forKey: .srtp)
            try c.encode(streams, forKey: .streams)
        }

        public init(from decoder: Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            self.init(ssrc: try c.decode(UInt32?.self, forKey: .ssrc), opus: try c.decode(OpusEncoding?.self, forKey: .opus),
                      sent: try c.decode(Int.self, forKey: .sent), sentPeakDBFS: try c.decode(Double?.self, forKey: .sentPeakDBFS),
                      sendErrors: try c.decode(Int.self, forKey: .sendErrors), fecCarried: try c.decode(Int.self, forKey: .fecCarried),
                      datagrams: try c.decode(Int.self, forKey: .datagrams), accepted: try c.decode(Int.self, forKey: .accepted),
                      malformed: try c.decode(Int.self, forKey: .malformed), notRouted: try c.decode(Int.self, forKey: .notRouted),
                      srtp: try c.decode(SRTP.self, forKey: .srtp), streams: try c.decode([Stream].self, forKey: .streams))
        }

        private enum CodingKeys: String, CodingKey {
            case ssrc, opus, sent, sendErrors, fecCarried, datagrams, accepted, malformed, notRouted, srtp, streams
            case sentPeakDBFS = "sentPeakDbfs"
        }

        public init(ssrc: UInt32?, opus: OpusEncoding?, sent: Int, sentPeakDBFS: Double?, sendErrors: Int, fecCarried: Int,
                    datagrams: Int, accepted: Int, malformed: Int, notRouted: Int, srtp: SRTP, streams: [Stream]) {
            self.ssrc = ssrc
            self.opus = opus
            self.sent = sent
            self.sentPeakDBFS = sentPeakDBFS
            self.sendErrors = sendErrors
            self.fecCarried = fecCarried
            self.datagrams = datagrams
            self.accepted = accepted
            self.malformed = malformed
            self.notRouted = notRouted
            self.srtp = srtp
            self.streams = streams
        }
    }

    /// Signalling datagrams refused by the seal before the call engine saw them, by reason.
    public struct Refusals: Sendable, Equatable, Codable {
        public var notSealed: Int
        public var malformed: Int
        public var unknownSender: Int
        public var authentication: Int
        public var replay: Int
        public var stale: Int
        public var senderMismatch: Int
        /// Sealed for every room but not a hello.
        public var notForEveryone: Int
        /// Under terminal keys (docs/identity.md): sealed under a session of the sender's or
        /// ours that is gone; an announcement not signed by the key the document approves for
        /// its room; one older than the newest taken from that terminal.
        public var unknownSession: Int
        public var badSignature: Int
        public var older: Int
        /// An invite, notification or missed-call notice that came while this terminal knew of a
        /// newer site document than its own (`SiteCatchUp`): not taken yet, the sender tries again.
        public var behind: Int
        /// Anything but a session announcement while this terminal sends nothing: its key is
        /// pending or revoked, or it holds no key at all outside lab mode.
        public var silent: Int

        public init(notSealed: Int, malformed: Int, unknownSender: Int, authentication: Int, replay: Int, stale: Int,
                    senderMismatch: Int, notForEveryone: Int, unknownSession: Int = 0, badSignature: Int = 0, older: Int = 0,
                    behind: Int = 0, silent: Int = 0) {
            self.behind = behind
            self.silent = silent
            self.unknownSession = unknownSession
            self.badSignature = badSignature
            self.older = older
            self.notSealed = notSealed
            self.malformed = malformed
            self.unknownSender = unknownSender
            self.authentication = authentication
            self.replay = replay
            self.stale = stale
            self.senderMismatch = senderMismatch
            self.notForEveryone = notForEveryone
        }

        public var total: Int { byReason.reduce(0) { $0 + $1.count } }

        /// Each count with its name on the wire, in the order above.
        public var byReason: [(reason: String, count: Int)] {
            [("not_sealed", notSealed), ("malformed", malformed), ("unknown_sender", unknownSender),
             ("authentication", authentication), ("replay", replay), ("stale", stale), ("sender_mismatch", senderMismatch),
             ("not_for_everyone", notForEveryone), ("unknown_session", unknownSession), ("bad_signature", badSignature),
             ("older", older), ("behind", behind), ("silent", silent)]
        }
    }

    /// Notifications played here: tones, texts read aloud and how fast they were ready.
    public struct Speech: Sendable, Equatable, Codable {
        public var announcements: Int
        /// Texts read aloud, those that came from the cache, and those espeak-ng refused.
        public var spoken: Int
        public var cached: Int
        public var failures: Int
        /// The last text's synthesis time (0 when cached), and how long after its tone ended its
        /// first sample was ready (0: before the tone ended), ms.
        public var lastSynthesisMs: Double
        public var lastGapMs: Double

        public init(announcements: Int, spoken: Int, cached: Int, failures: Int, lastSynthesisMs: Double, lastGapMs: Double) {
            self.announcements = announcements
            self.spoken = spoken
            self.cached = cached
            self.failures = failures
            self.lastSynthesisMs = lastSynthesisMs
            self.lastGapMs = lastGapMs
        }

        /// Nothing played yet (or no announcer).
        public static let none = Speech(announcements: 0, spoken: 0, cached: 0, failures: 0, lastSynthesisMs: 0, lastGapMs: 0)
    }

    public struct Calls: Sendable, Equatable, Codable {
        public var decodeErrors: Int
        /// Signalling messages the engine had seen already (a retransmission of ours got through twice).
        public var duplicates: Int
        public var retransmissions: Int
        public var unreachable: Int
        /// Signalling datagrams refused before the engine saw them (sealed signalling).
        public var refused: Refusals
        public var storeWrites: Int
        public var storeFailures: Int
        /// Acknowledgements waiting for a store write, dropped because more than `heldAcksLimit`
        /// waited (a stuck disk): their senders try again.
        public var acksDropped: Int
        /// How many acknowledgements a terminal holds for a slow disk (the oldest go beyond it): a
        /// stuck disk must not grow the queue with each retransmission.
        public static let heldAcksLimit = 256
        /// Where this terminal's voice goes now ("a.b.c.d:port"; a multicast group in a group call);
        /// empty when idle.
        public var mediaTo: [String]
        /// Calls this room left or ended for an emergency call.
        public var brokenByEmergency: Int
        public var speech: Speech
        /// Signalling datagrams and their bytes as on the wire (sealed), sent and received (those
        /// refused too): the presence traffic a site costs each terminal.
        public var datagramsSent: Int
        public var bytesSent: Int
        public var datagramsReceived: Int
        public var bytesReceived: Int
        /// How signalling is sealed now.
        public var protection: SignalProtectionMode
        /// Sends held back under terminal keys because the room's session was not heard yet
        /// (the engine's retransmission tries again).
        public var awaitingSession: Int
        /// Under terminal keys: session keys this terminal renewed (hourly) since it started.
        public var sessionRenewals: Int
        /// Calls that ended here since the start, by direction and outcome (the history's words).
        public var ended: [Ended]
        public var notifications: Notifications
        /// Missed calls waiting to be acknowledged here.
        public var missedWaiting: Int
        /// Reminder tones sounded here for missed calls not acknowledged.
        public var missedReminders: Int
        /// Each room of the directory (this one too): online now.
        public var online: [String: Bool]
        /// Rooms heard at another address than their directory entry's, under a seal of their own
        /// key, and that address ("a.b.c.d:port"): signalling and media go there.
        public var moved: [String: String]

        public struct Ended: Sendable, Equatable, Codable {
            /// Outgoing: placed here.
            public var direction: HistoryEntry.Direction
            public var outcome: CallOutcome
            public var count: Int
            public init(direction: HistoryEntry.Direction, outcome: CallOutcome, count: Int) {
                self.direction = direction
                self.outcome = outcome
                self.count = count
            }
        }

        public struct Notifications: Sendable, Equatable, Codable {
            public var sent: Int
            /// Received, each once (a copy sent again is not counted).
            public var received: Int
            public var acknowledged: Int
            /// Received, heard or held back, and not acknowledged yet.
            public var pending: Int
            /// Reminder tones sounded here for notifications not acknowledged (each repeats all waiting).
            public var reminders: Int
            public init(sent: Int = 0, received: Int = 0, acknowledged: Int = 0, pending: Int = 0, reminders: Int = 0) {
                self.sent = sent
                self.received = received
                self.acknowledged = acknowledged
                self.pending = pending
                self.reminders = reminders
            }
        }

        public init(decodeErrors: Int, duplicates: Int, retransmissions: Int, unreachable: Int, refused: Refusals,
                    storeWrites: Int, storeFailures: Int, mediaTo: [String], brokenByEmergency: Int, speech: Speech,
                    datagramsSent: Int = 0, bytesSent: Int = 0, datagramsReceived: Int = 0, bytesReceived: Int = 0,
                    protection: SignalProtectionMode = .clear, awaitingSession: Int = 0, sessionRenewals: Int = 0,
                    ended: [Ended] = [], notifications: Notifications = Notifications(), missedWaiting: Int = 0, online: [String: Bool] = [:],
                    moved: [String: String] = [:], acksDropped: Int = 0, missedReminders: Int = 0) {
            self.missedReminders = missedReminders
            self.moved = moved
            self.acksDropped = acksDropped
            self.ended = ended
            self.notifications = notifications
            self.missedWaiting = missedWaiting
            self.online = online
            self.protection = protection
            self.awaitingSession = awaitingSession
            self.sessionRenewals = sessionRenewals
            self.datagramsSent = datagramsSent
            self.bytesSent = bytesSent
            self.datagramsReceived = datagramsReceived
            self.bytesReceived = bytesReceived
            self.brokenByEmergency = brokenByEmergency
            self.speech = speech
            self.decodeErrors = decodeErrors
            self.duplicates = duplicates
            self.retransmissions = retransmissions
            self.unreachable = unreachable
            self.refused = refused
            self.storeWrites = storeWrites
            self.storeFailures = storeFailures
            self.mediaTo = mediaTo
        }
    }

    /// Configuration reloads (SIGHUP) since start.
    public struct Reload: Sendable, Equatable, Codable {
        /// Reloads that read a valid file, and those refused (the configuration stayed as it was).
        public var count: Int
        public var failed: Int
        /// Of the last valid reload: the keys applied at once, those that wait for the running call
        /// to end (empty once it has), and those that need a restart (schema names, "section.key").
        public var applied: [String]
        public var waitingForCallEnd: [String]
        public var restartNeeded: [String]
        /// Audio settings waiting for no call to run, to open the devices again with them (empty
        /// once they are in force).
        public var audioWaiting: [String]
        /// Times the audio devices were opened again for a reload's settings.
        public var audioReopens: Int
        /// Of the last valid reload: settings that could not be put in force, with the reason
        /// ("tones: cannot read /etc/intercomd/busy.wav ...").
        public var notApplied: [String]
        /// Why the last refused reload was refused; nil when none was.
        public var lastError: String?

        public init(count: Int, failed: Int, applied: [String], waitingForCallEnd: [String], restartNeeded: [String],
                    audioWaiting: [String], audioReopens: Int, notApplied: [String], lastError: String?) {
            self.count = count
            self.failed = failed
            self.applied = applied
            self.waitingForCallEnd = waitingForCallEnd
            self.restartNeeded = restartNeeded
            self.audioWaiting = audioWaiting
            self.audioReopens = audioReopens
            self.notApplied = notApplied
            self.lastError = lastError
        }

        public static let none = Reload(count: 0, failed: 0, applied: [], waitingForCallEnd: [], restartNeeded: [],
                                        audioWaiting: [], audioReopens: 0, notApplied: [], lastError: nil)

        public func encode(to encoder: Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(count, forKey: .count)
            try c.encode(failed, forKey: .failed)
            try c.encode(applied, forKey: .applied)
            try c.encode(waitingForCallEnd, forKey: .waitingForCallEnd)
            try c.encode(restartNeeded, forKey: .restartNeeded)
            try c.encode(audioWaiting, forKey: .audioWaiting)
            try c.encode(audioReopens, forKey: .audioReopens)
            try c.encode(notApplied, forKey: .notApplied)
            try c.encode(lastError, forKey: .lastError)  // null, not absent
        }

        public init(from decoder: Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            self.init(count: try c.decode(Int.self, forKey: .count), failed: try c.decode(Int.self, forKey: .failed),
                      applied: try c.decode([String].self, forKey: .applied),
                      waitingForCallEnd: try c.decode([String].self, forKey: .waitingForCallEnd),
                      restartNeeded: try c.decode([String].self, forKey: .restartNeeded),
                      audioWaiting: try c.decode([String].self, forKey: .audioWaiting),
                      audioReopens: try c.decode(Int.self, forKey: .audioReopens),
                      notApplied: try c.decode([String].self, forKey: .notApplied),
                      lastError: try c.decode(String?.self, forKey: .lastError))
        }

        private enum CodingKeys: String, CodingKey {
            case count, failed, applied, waitingForCallEnd, restartNeeded, audioWaiting, audioReopens, notApplied, lastError
        }
    }

    /// The site document this terminal runs by (docs/site.md).
    public struct Site: Sendable, Equatable, Codable {
        public var id: String
        /// 0 until a document is applied.
        public var version: UInt64
        /// The first 16 hex digits of the signed document's SHA-256: the same on every terminal
        /// that holds this version.
        public var digest: String
        /// When this version was applied, Unix time in seconds; nil while it waits to be (kept
        /// moments ago, or its configuration could not be used: `reload.last_error`).
        public var appliedAt: Double?
        /// Documents refused since start, by reason (`SiteDocumentRefusal`: oversized, truncated,
        /// malformed, unknownFormat, otherSite, unsigned, badSignature, badHandover, older,
        /// conflicting, unreadable).
        public var refused: [String: Int]
        /// The last refusal's description; nil when none.
        public var lastRefusal: String?
        public var transfers: Transfers
        /// How the newest version this terminal heard of or holds came; nil: none since start.
        public var arrival: Arrival?
        /// This terminal's key and what the document in force says of it; nil from a daemon
        /// without a site.
        public var terminal: Terminal?
        /// The fingerprint of the administrator's key this terminal trusts now: its
        /// `administrator.pub`, or the newest key a document it took handed over to.
        public var administrator: String?

        /// What the site document in force says of a terminal's key.
        public enum TerminalStanding: String, Sendable, Codable {
            /// No document approves it yet.
            case pending
            case approved
            case revoked
        }

        /// A terminal's standing in its site (docs/identity.md).
        public struct Terminal: Sendable, Equatable, Codable {
            /// The fingerprint of its public key (never the key file's contents).
            public var key: String
            public var standing: TerminalStanding
            /// The room the document approves it for.
            public var room: String?
            /// While pending: the code the installer reads to the administrator.
            public var enrolmentCode: String?

            public init(key: String, standing: TerminalStanding, room: String?, enrolmentCode: String?) {
                self.key = key
                self.standing = standing
                self.room = room
                self.enrolmentCode = enrolmentCode
            }
        }

        /// Each step of a version's way here, Unix time in seconds (nil: not taken, e.g. no fetch
        /// for a document the administrator's tool handed over): what the spread costs per hop.
        public struct Arrival: Sendable, Equatable, Codable {
            public var version: UInt64
            /// The room it was fetched from, the administrator's tool ("a transfer from a.b.c.d"),
            /// or the file; nil before any fetch.
            public var from: String?
            /// When a hello first said another terminal holds it.
            public var heard: Double?
            /// When the last fetch of it started.
            public var fetchStarted: Double?
            /// When that fetch had the whole document in hand, before its check.
            public var received: Double?
            /// When it was judged whole and written to disk.
            public var kept: Double?

            public init(version: UInt64, from: String? = nil, heard: Double? = nil, fetchStarted: Double? = nil, received: Double? = nil,
                        kept: Double? = nil) {
                self.version = version
                self.from = from
                self.heard = heard
                self.fetchStarted = fetchStarted
                self.received = received
                self.kept = kept
            }

            public func encode(to encoder: Encoder) throws {
                var c = encoder.container(keyedBy: CodingKeys.self)
                try c.encode(version, forKey: .version)
                try c.encode(from, forKey: .from)
                try c.encode(heard, forKey: .heard)
                try c.encode(fetchStarted, forKey: .fetchStarted)
                try c.encode(received, forKey: .received)
                try c.encode(kept, forKey: .kept)
            }

            public init(from decoder: Decoder) throws {
                let c = try decoder.container(keyedBy: CodingKeys.self)
                self.init(version: try c.decode(UInt64.self, forKey: .version), from: try c.decode(String?.self, forKey: .from),
                          heard: try c.decode(Double?.self, forKey: .heard), fetchStarted: try c.decode(Double?.self, forKey: .fetchStarted),
                          received: try c.decode(Double?.self, forKey: .received), kept: try c.decode(Double?.self, forKey: .kept))
            }

            private enum CodingKeys: String, CodingKey { case version, from, heard, fetchStarted, received, kept }
        }

        /// Documents passed between terminals and from the administrator's tool since start.
        public struct Transfers: Sendable, Equatable, Codable {
            /// Fetched whole from another terminal (then judged: adopted or refused above).
            public var fetched = 0
            /// Fetches that brought no whole document: no connection, a timeout, a reply cut short
            /// or not a transfer's.
            public var fetchFailed = 0
            /// Fetches the peer answered `busy` (as many transfers under way as it takes): asked
            /// again shortly, or another holder.
            public var fetchBusy = 0
            /// Documents this terminal sent to another that asked.
            public var served = 0
            /// Documents the administrator's tool (or anyone) handed this terminal.
            public var offered = 0
            /// Transfers this terminal refused before any document: not a transfer's framing,
            /// another site, too large, or too slow.
            public var badRequests = 0
            /// Transfers answered `busy`: more under way at once than it takes.
            public var answeredBusy = 0
            /// Documents adopted but not written to `site.document` (the disk refused).
            public var notKept = 0

            public init() {}
        }

        public init(id: String, version: UInt64, digest: String, appliedAt: Double?, refused: [String: Int], lastRefusal: String?,
                    transfers: Transfers = Transfers(), arrival: Arrival? = nil, terminal: Terminal? = nil) {
            self.id = id
            self.version = version
            self.digest = digest
            self.appliedAt = appliedAt
            self.refused = refused
            self.lastRefusal = lastRefusal
            self.transfers = transfers
            self.arrival = arrival
            self.terminal = terminal
        }

        public func encode(to encoder: Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(id, forKey: .id)
            try c.encode(version, forKey: .version)
            try c.encode(digest, forKey: .digest)
            try c.encode(appliedAt, forKey: .appliedAt)
            try c.encode(refused, forKey: .refused)
            try c.encode(lastRefusal, forKey: .lastRefusal)  // null, not absent
            try c.encode(transfers, forKey: .transfers)
            try c.encode(arrival, forKey: .arrival)
            try c.encode(terminal, forKey: .terminal)
            try c.encode(administrator, forKey: .administrator)
        }

        public init(from decoder: Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            self.init(id: try c.decode(String.self, forKey: .id), version: try c.decode(UInt64.self, forKey: .version),
                      digest: try c.decode(String.self, forKey: .digest), appliedAt: try c.decode(Double?.self, forKey: .appliedAt),
                      refused: try c.decode([String: Int].self, forKey: .refused),
                      lastRefusal: try c.decode(String?.self, forKey: .lastRefusal),
                      transfers: try c.decode(Transfers.self, forKey: .transfers),
                      arrival: try c.decode(Arrival?.self, forKey: .arrival),
                      terminal: try c.decodeIfPresent(Terminal.self, forKey: .terminal))  // absent from daemons before it
            administrator = try c.decodeIfPresent(String.self, forKey: .administrator)  // absent from daemons before re-keying
        }

        private enum CodingKeys: String, CodingKey {
            case id, version, digest, appliedAt, refused, lastRefusal, transfers, arrival, terminal, administrator
        }
    }

    /// The terminal's periodic speaker-to-microphone check (`[selftest]`).
    public struct SelfTest: Sendable, Equatable, Codable {
        /// Checks that gave a result (passed or failed), and those that failed.
        public var runs = 0
        public var failures = 0
        /// Times a due check waited: a call, a tone or a read-out was on, the audio stopped, or
        /// a technician's loopback test ran (tried again a second later).
        public var postponed = 0
        /// Checks cut short by the audio streams restarting (an xrun); tried again later.
        public var aborted = 0
        /// The last check's result; nil before the first.
        public var last: Check?

        public struct Check: Sendable, Equatable, Codable {
            /// When it ran, Unix time in seconds.
            public var at: Double
            public var passed: Bool
            /// The device round trip it measured, ms; nil when none was found.
            public var roundTripMs: Double?
            /// The chirp's level in the microphone, dBFS.
            public var echoLevelDb: Double
            /// What was wrong, in words for a technician; empty when it passed.
            public var problems: [String]

            public init(at: Double, passed: Bool, roundTripMs: Double?, echoLevelDb: Double, problems: [String]) {
                self.at = at
                self.passed = passed
                self.roundTripMs = roundTripMs
                self.echoLevelDb = echoLevelDb
                self.problems = problems
            }

            public func encode(to encoder: Encoder) throws {
                var c = encoder.container(keyedBy: CodingKeys.self)
                try c.encode(at, forKey: .at)
                try c.encode(passed, forKey: .passed)
                try c.encode(roundTripMs, forKey: .roundTripMs)  // null, not absent
                try c.encode(echoLevelDb, forKey: .echoLevelDb)
                try c.encode(problems, forKey: .problems)
            }

            public init(from decoder: Decoder) throws {
                let c = try decoder.container(keyedBy: CodingKeys.self)
                self.init(at: try c.decode(Double.self, forKey: .at), passed: try c.decode(Bool.self, forKey: .passed),
                          roundTripMs: try c.decode(Double?.self, forKey: .roundTripMs), echoLevelDb: try c.decode(Double.self, forKey: .echoLevelDb),
                          problems: try c.decode([String].self, forKey: .problems))
            }

            private enum CodingKeys: String, CodingKey { case at, passed, roundTripMs, echoLevelDb, problems }
        }

        public init() {}

        public func encode(to encoder: Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(runs, forKey: .runs)
            try c.encode(failures, forKey: .failures)
            try c.encode(postponed, forKey: .postponed)
            try c.encode(aborted, forKey: .aborted)
            try c.encode(last, forKey: .last)  // null, not absent
        }

        public init(from decoder: Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            runs = try c.decode(Int.self, forKey: .runs)
            failures = try c.decode(Int.self, forKey: .failures)
            postponed = try c.decode(Int.self, forKey: .postponed)
            aborted = try c.decode(Int.self, forKey: .aborted)
            last = try c.decode(Check?.self, forKey: .last)
        }

        private enum CodingKeys: String, CodingKey { case runs, failures, postponed, aborted, last }
    }

    public var audio: Audio
    /// nil: no network media in this daemon.
    public var network: Network?
    /// nil: no calls (`[room] id` not set).
    public var calls: Calls?
    public var reload: Reload
    /// nil: no site (`[site] id` not set).
    public var site: Site?
    /// nil: no self-test (`[selftest] interval_s` is 0).
    public var selfTest: SelfTest?

    public init(audio: Audio, network: Network?, calls: Calls?, reload: Reload, site: Site? = nil, selfTest: SelfTest? = nil) {
        self.audio = audio
        self.network = network
        self.calls = calls
        self.reload = reload
        self.site = site
        self.selfTest = selfTest
    }

    // Optional sections and fields are written as null, so that a missing key is always an error.
    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(audio, forKey: .audio)
        try c.encode(network, forKey: .network)
        try c.encode(calls, forKey: .calls)
        try c.encode(reload, forKey: .reload)
        try c.encode(site, forKey: .site)
        try c.encode(selfTest, forKey: .selfTest)
    }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        audio = try c.decode(Audio.self, forKey: .audio)
        network = try c.decode(Network?.self, forKey: .network)
        calls = try c.decode(Calls?.self, forKey: .calls)
        reload = try c.decode(Reload.self, forKey: .reload)
        site = try c.decode(Site?.self, forKey: .site)
        selfTest = try c.decodeIfPresent(SelfTest.self, forKey: .selfTest)  // absent from daemons before it
    }

    private enum CodingKeys: String, CodingKey { case audio, network, calls, reload, site, selfTest }
}

extension DaemonStatistics.Audio {
    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(running, forKey: .running)
        try c.encode(captureDevice, forKey: .captureDevice)
        try c.encode(playbackDevice, forKey: .playbackDevice)
        try c.encode(frames, forKey: .frames)
        try c.encode(xruns, forKey: .xruns)
        try c.encode(captureXruns, forKey: .captureXruns)
        try c.encode(playbackXruns, forKey: .playbackXruns)
        try c.encode(sessions, forKey: .sessions)
        try c.encode(captureGapFrames, forKey: .captureGapFrames)
        try c.encode(staleCaptureFrames, forKey: .staleCaptureFrames)
        try c.encode(captureDelayMs, forKey: .captureDelayMs)
        try c.encode(micDrops, forKey: .micDrops)
        try c.encode(microphoneClippedSamples, forKey: .microphoneClippedSamples)
        try c.encode(speakerClippedSamples, forKey: .speakerClippedSamples)
        try c.encode(echoReturnLossEnhancementDB, forKey: .echoReturnLossEnhancementDB)
        try c.encode(echoDelayMs, forKey: .echoDelayMs)
        try c.encode(echoCancellerResets, forKey: .echoCancellerResets)
        try c.encode(echoCancellerRealignments, forKey: .echoCancellerRealignments)
        try c.encode(echoReferenceMoves, forKey: .echoReferenceMoves)
        try c.encode(echoGatedFrames, forKey: .echoGatedFrames)
        try c.encode(playbackDelayMs, forKey: .playbackDelayMs)
        try c.encode(echoChainDelayMs, forKey: .echoChainDelayMs)
        try c.encode(processMaxMs, forKey: .processMaxMs)
        try c.encode(howls, forKey: .howls)
        try c.encode(howlGuardAttenuationDB, forKey: .howlGuardAttenuationDB)
        try c.encode(loopRemovedDB, forKey: .loopRemovedDB)
        try c.encode(loopLateFrames, forKey: .loopLateFrames)
        try c.encode(loopEngaged, forKey: .loopEngaged)
        try c.encode(loopEngagements, forKey: .loopEngagements)
    }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(running: try c.decode(Bool.self, forKey: .running), captureDevice: try c.decode(String.self, forKey: .captureDevice),
                  playbackDevice: try c.decode(String.self, forKey: .playbackDevice), frames: try c.decode(Int.self, forKey: .frames),
                  xruns: try c.decode(Int.self, forKey: .xruns), captureXruns: try c.decode(Int.self, forKey: .captureXruns),
                  playbackXruns: try c.decode(Int.self, forKey: .playbackXruns), sessions: try c.decode(Int.self, forKey: .sessions),
                  captureGapFrames: try c.decode(Int.self, forKey: .captureGapFrames),
                  staleCaptureFrames: try c.decode(Int.self, forKey: .staleCaptureFrames),
                  captureDelayMs: try c.decode(Double.self, forKey: .captureDelayMs), micDrops: try c.decode(Int.self, forKey: .micDrops),
                  microphoneClippedSamples: try c.decode(Int.self, forKey: .microphoneClippedSamples),
                  speakerClippedSamples: try c.decode(Int.self, forKey: .speakerClippedSamples),
                  echoReturnLossEnhancementDB: try c.decode(Double.self, forKey: .echoReturnLossEnhancementDB),
                  echoDelayMs: try c.decode(Double?.self, forKey: .echoDelayMs),
                  echoCancellerResets: try c.decode(Int.self, forKey: .echoCancellerResets),
                  echoCancellerRealignments: try c.decode(Int.self, forKey: .echoCancellerRealignments),
                  echoReferenceMoves: try c.decode(Int.self, forKey: .echoReferenceMoves),
                  processMaxMs: try c.decode(Double.self, forKey: .processMaxMs), howls: try c.decode(Int?.self, forKey: .howls),
                  howlGuardAttenuationDB: try c.decode(Double?.self, forKey: .howlGuardAttenuationDB),
                  loopRemovedDB: try c.decode(Double?.self, forKey: .loopRemovedDB),
                  loopLateFrames: try c.decode(Int?.self, forKey: .loopLateFrames),
                  loopEngaged: try c.decode(Bool?.self, forKey: .loopEngaged),
                  loopEngagements: try c.decode(Int?.self, forKey: .loopEngagements),
                  echoGatedFrames: try c.decode(Int.self, forKey: .echoGatedFrames),
                  playbackDelayMs: try c.decode(Double.self, forKey: .playbackDelayMs),
                  echoChainDelayMs: try c.decode(Double.self, forKey: .echoChainDelayMs))
    }

    private enum CodingKeys: String, CodingKey {
        case running, captureDevice, playbackDevice, frames, xruns, captureXruns, playbackXruns, sessions, captureGapFrames, staleCaptureFrames
        case captureDelayMs, micDrops
        case microphoneClippedSamples, speakerClippedSamples
        case echoReturnLossEnhancementDB = "erleDb"
        case echoDelayMs, echoCancellerResets, echoCancellerRealignments, echoReferenceMoves, echoGatedFrames, processMaxMs, howls, playbackDelayMs, echoChainDelayMs
        case howlGuardAttenuationDB = "howlGuardAttenuationDb", loopRemovedDB = "loopRemovedDb", loopLateFrames
        case loopEngaged, loopEngagements
    }
}

/// How a terminal's signalling is sealed (docs/identity.md).
public enum SignalProtectionMode: String, Sendable, Equatable, Codable {
    /// Lab mode (`[security] mode = "lab"`) with neither a site key nor approved terminal keys:
    /// signalling and media in the clear, anyone on the network can take part.
    case clear = "clear_lab_mode"
    /// Neither a site key nor approved terminal keys, outside lab mode: nothing is sent or taken.
    case unkeyed
    /// The one site key (`[security] site_key`), until the site document approves terminal keys.
    case siteKey = "site_key"
    /// Per pair of terminals, from the keys the site document approves.
    case terminalKeys = "terminal_keys"
}
