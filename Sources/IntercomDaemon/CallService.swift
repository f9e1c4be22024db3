import AudioPipeline
import Calls
import CallStore
import Control
import Foundation
import Lights
import Posix
import SiteSecurity
import Logging
import RealTime
import SignalTools
import Synchronization
import Transport

/// The calls thread and the glue around the call engine (which does no I/O): one `poll` over the
/// signalling socket and a wake-up pipe, timers from the engine's next deadline, and the engine's
/// effects carried out in order: datagrams sent, media routes posted to the network thread, the
/// chime started and stopped, mute applied to the microphone and the mixer, events published on the control socket,
/// history and do-not-disturb changed in memory and handed to the store writer's thread.
///
/// The engine is shared with the control server's thread and the key reader's (commands) under a
/// mutex; none of them is real-time and each holds it only to run the engine and its effects,
/// none of which blocks (UDP sends are non-blocking, routes are posted lock-free, files are
/// written by `storeWriter` after the lock is gone).
final class CallService: @unchecked Sendable {
    // @unchecked: `control` is set once before `start`; the rest is immutable or behind a mutex.
    /// The settings in force (a reload may replace them between calls).
    var settings: CallSettings { engine.withLock { $0.settings } }
    /// Settings from a reload that came during a call, taken when it ends.
    private let pendingSettings = Mutex<CallSettings?>(nil)
    private let engine: Mutex<CallEngine>
    private let socket: UDPSocket
    private let wake: Doorbell
    /// Rung when a hello names another site document than that room's before (`SiteFollower`
    /// waits on it, so that a new version is fetched at once, not at its next look).
    let siteHeard: Doorbell
    private let routes: NetworkLoop
    private let microphone: MicrophoneGain
    private let mixer: Mixer
    private let sounds: TerminalSounds
    /// Plays notifications (tone, then speech) on its own thread; nil in tests without one.
    private let announcer: Announcer?
    private let history: HistoryStore?
    private let state: StateStore<TerminalState>?
    /// Writes history and state to disk; no lock of ours is held while it waits for the disk.
    private let storeWriter: StoreWriter
    /// Acks of what is kept on receipt, waiting for the store writer (`CallEffect.sendOnceWritten`).
    private let heldAcks = Mutex<[HeldAck]>([])
    private struct HeldAck {
        /// Sent once the store writer has tried this request.
        var request: UInt64
        var room: RoomID
        var address: IPv4Endpoint
        var datagram: [UInt8]
    }
    private let log: Logger
    /// Seals what is sent and opens what arrives: per pair of terminals, under the site key, or
    /// in the clear (`SignalProtection`).
    let protection: SignalProtection
    /// SRTP sessions for each call's media (nil: media in the clear, whatever the plan carries).
    private let mediaKeys: MediaKeys?
    /// Datagrams refused before the call engine saw them, by reason.
    var refused: SealRefusals { protection.refused }
    /// The site document each room's session announcements say it holds: heard also where its
    /// hellos cannot be opened (docs/identity.md), so that a document is fetched across a switch.
    private let siteHints = Mutex<[RoomID: SiteStamp]>([:])
    /// Under terminal keys: calls and notifications wait while a newer site document is known.
    private let catchUp: Mutex<SiteCatchUp>
    /// Where the voice goes now, as last posted to the network thread (for `stats`).
    private let mediaTo = Mutex<[String]>([])
    private let stopRequest: StopSignal
    private var thread: WorkerThread?
    /// Publishes events to control clients; nil until the server runs.
    var control: ControlServer?
    /// How this terminal is doing, read on the calls thread before each tick and told to every
    /// room every `healthInterval` (set once before `start`; nil, or nil returned: nothing is told).
    var health: (@Sendable () -> TerminalHealth?)?
    /// The streams the network side plays now (read from its atomics), for `status`.
    var mediaStreams: @Sendable () -> [MediaStream] = { [] }
    /// The network round-trip test; the calls thread hands it the reflected probes.
    let networkLoopback: NetworkLoopback
    /// Called after the engine changed something the lights may show (set once before `start`).
    /// Signalling on the wire, for `stats`.
    private let traffic = (sent: Counter(), sentBytes: Counter(), received: Counter(), receivedBytes: Counter())
    /// Held acks dropped over `DaemonStatistics.Calls.heldAcksLimit` (`stats` `acks_dropped`).
    private let acksDropped = Counter()
    var onChange: @Sendable () -> Void = {}
    /// What the status lights show, for `status` (set once before `start`).
    var lightsReport: @Sendable () -> [StatusLight] = { [] }
    /// This terminal's timing for the network loopback's report (set once before `start`).
    var terminalTiming: @Sendable () -> TerminalTiming = {
        TerminalTiming(periodMs: 10, bufferPeriods: 3, processingDelayMs: 10, codecLookaheadMs: 0, jitterMinMs: 10,
                       jitterMaxMs: 200, xruns: 0, processMaxMs: 0)
    }

    init(settings: CallSettings, signalling: IPv4Endpoint, routes: NetworkLoop, microphone: MicrophoneGain, mixer: Mixer, sounds: TerminalSounds,
         announcer: Announcer? = nil, history: HistoryStore?, state: StateStore<TerminalState>?, siteSeal: SignalSeal? = nil, lab: Bool = false,
         terminal: SignalProtection.Terminal? = nil, mediaKeys: MediaKeys? = nil, timeScale: Double = 1, logger: Logger) throws {
        self.announcer = announcer
        let protection = SignalProtection(room: settings.room, siteSeal: siteSeal, terminal: terminal, lab: lab, timeScale: timeScale)
        pruneInterval = Self.pruneIntervalSeconds / timeScale
        self.protection = protection
        catchUp = Mutex(SiteCatchUp(started: Self.now(), listenSeconds: SiteCatchUp.listenSeconds))
        self.mediaKeys = mediaKeys
        networkLoopback = NetworkLoopback(logger: logger)
        socket = try UDPSocket(bind: signalling)
        let wake = try Doorbell()
        self.wake = wake
        stopRequest = try StopSignal()
        siteHeard = try Doorbell()
        self.routes = routes
        self.microphone = microphone
        self.mixer = mixer
        self.sounds = sounds
        self.history = history
        self.state = state
        log = logger
        var seed: UInt64 = 0
        withUnsafeMutableBytes(of: &seed) { arc4random_buf($0.baseAddress!, 8) }
        history?.prune(now: Self.wallNow())
        engine = Mutex(CallEngine(settings: settings, doNotDisturb: state?.value.doNotDisturb, readAloud: state?.value.readAloud,
                                  history: history?.all() ?? [], notifications: history?.notifications() ?? [], seed: seed,
                                  mediaKeys: AgreedMediaKeys(protection: protection)))
        storeWriter = try StoreWriter(
            failed: { [log] error in log.error("calls: not written (kept in memory, tried again with the next change): \(error)") },
            tried: { wake.ring() })  // held acks go out on the calls thread
        // Outside a call nothing is sent and no stream is accepted.
        _ = routes.post(MediaRoutes(sendTo: [], acceptFrom: [], joinGroups: []))
    }

    var signallingAddress: IPv4Endpoint { socket.local }

    func start() throws(SystemError) {
        // Entries pruned by age at load are gone from the file too.
        if let history, history.maxAge != nil { storeWriter.persist(history) }
        thread = try WorkerThread.start(name: "intercom-calls") { [self] in run() }
        let settings = settings
        log.info("calls: room \(settings.room) on signalling \(socket.local), \(settings.directory.count) rooms in the directory, \(settings.buttons.count) buttons, auto-answer \(settings.autoAnswer ? "on" : "off")")
    }

    /// Stops the calls thread. A call in progress is ended first, so that the others see this room
    /// leave rather than vanish; its goodbye gets up to `grace` seconds to be acknowledged.
    func stop(grace: Double = 1.0) {
        guard thread != nil else { storeWriter.stop(); return }
        if engine.withLock({ $0.state != .idle }) {
            log.info("calls: stopping: ending the call in progress")
            perform(.hangUp)
            let deadline = Self.now() + grace
            while Self.now() < deadline, engine.withLock({ $0.awaitingAcknowledgement }) { usleep(10_000) }
        }
        stopRequest.set()
        thread?.join()
        thread = nil
        storeWriter.stop()  // after the calls thread: the goodbye's history entry is written too
        let st = engine.withLock { $0.statistics }
        log.info("calls: final stats: decode_errors=\(st.decodeErrorCount) unknown_sender=\(st.unknownSender) address_mismatch=\(st.addressMismatch) address_changes=\(st.addressChanges) duplicates=\(st.duplicates) stale=\(st.stale) retransmissions=\(st.retransmissions) unreachable=\(st.unreachable) store_writes=\(storeWriter.statistics.written) store_failures=\(storeWriter.statistics.failed) refused: \(refused.summary)")
    }

    /// The engine's clock: monotonic, so NTP stepping the wall clock cannot fire or stall its timers.
    private static func now() -> Double { MonotonicClock.seconds() }
    private static func wallNow() -> Double { Date().timeIntervalSince1970 }

    /// Runs `body` on the engine with its wall-clock offset fresh (history times are wall-clock).
    private func withEngine<T>(_ body: (inout CallEngine) -> T) -> T {
        engine.withLock { e in
            e.wallClockOffset = Self.wallNow() - Self.now()
            return body(&e)
        }
    }

    // MARK: the calls thread

    private func run() {
        var siteChanges: UInt64 = 0
        var refusalLog = RefusalLog(counters: refused.snapshot)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 2048, alignment: 8)
        defer { buffer.deallocate() }
        var poller = Poller(capacity: 3)
        poller.add(socket.descriptor, read: true)
        let woken = poller.add(wake.descriptor, read: true)
        poller.add(stopRequest.bell.descriptor, read: true)
        while !stopRequest.isSet {
            let deadline = [engine.withLock { $0.nextDeadline }, protection.nextDeadline].compactMap { $0 }.min()
            // At most a second: the periodic work below (the refusal log among it) runs at least that often.
            _ = try? poller.wait(seconds: min(1, (deadline ?? .infinity) - Self.now()))  // a failed wait: a wake-up with nothing ready
            if poller.events(at: woken).any { _ = wake.drain() }
            while let (count, from) = socket.receive(into: buffer) {
                traffic.received.increment()
                traffic.receivedBytes.increment(by: count)
                let datagram = [UInt8](UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
                // Effects run under the lock too: their order across threads is the engine's order.
                switch protection.receive(datagram) {
                case .clear(let datagram):
                    withEngine { e in execute(e.receive(datagram: datagram, from: from, now: Self.now())) }
                case .envelope(let envelope):
                    if protection.mode == .terminalKeys, Self.startsSomething(envelope.message),
                       catchUp.withLock({ $0.behind(now: Self.now()) }) {
                        refused.behind.increment()  // unacknowledged: the sender tries again
                        refusalLog.refused(from: from)
                        break
                    }
                    // Under terminal keys the seal proves the sender by its own key: it may have moved.
                    let vouched = protection.mode == .terminalKeys
                    withEngine { e in execute(e.receive(envelope, from: from, vouched: vouched, now: Self.now())) }
                case .announcement(let room, let answer, let site):
                    // Answered where it came from (signed by the room's key): a room that moved
                    // and started afresh learns our session there, and then seals to us.
                    if let answer { transmit(answer, to: [from]) }
                    if let site { hint(room, holds: site) }
                case .siteHint(let room, let site):
                    if let site { hint(room, holds: site) }
                case .refused:
                    refusalLog.refused(from: from)
                }
            }
            if let line = refusalLog.line(now: Self.now(), counters: refused.snapshot) { log.notice("\(line)") }
            if let rotated = protection.tick(now: Self.now()) { announceToAll(rotated) }
            let reported = health?() ?? nil
            let changes = withEngine { e in
                if let reported { e.report(reported) }
                execute(e.tick(now: Self.now()))
                return e.siteChanges
            }
            if changes != siteChanges {
                siteChanges = changes
                siteHeard.ring()
            }
            takePendingSettings()
            pruneHistoryDaily()
            releaseHeldAcks()
        }
    }

    /// Sends the held acks whose writes have been tried (sealed now, so a seal's counter never
    /// runs backwards on the wire).
    private func releaseHeldAcks() {
        let done = storeWriter.completed
        let ready = heldAcks.withLock { held -> [HeldAck] in
            guard held.contains(where: { $0.request <= done }) else { return [] }
            defer { held.removeAll { $0.request <= done } }
            return held.filter { $0.request <= done }
        }
        for ack in ready { sendSealed(ack.datagram, for: ack.room, to: ack.address) }
    }

    private func sendSealed(_ plain: [UInt8], for room: RoomID, to address: IPv4Endpoint) {
        if let sealed = protection.seal(plain, for: room) { transmit(sealed, to: [address]) }
    }

    /// What a terminal behind on the site document does not take yet (`SiteCatchUp`).
    private static func startsSomething(_ message: SignalMessage) -> Bool {
        switch message {
        case .invite, .notify, .missedCall: true
        default: false
        }
    }

    /// A room's announcement named the document it holds: the site follower hears of it.
    private func hint(_ room: RoomID, holds site: SiteStamp) {
        let settings = settings
        guard room != settings.room, settings.directory[room] != nil else { return }
        catchUp.withLock { $0.heard(site, now: Self.now()) }
        let changed = siteHints.withLock { hints in
            defer { hints[room] = site }
            return hints[room] != site
        }
        if changed { siteHeard.ring() }
    }

    /// Our session announcement to every other room in the directory (terminal keys).
    private func announceToAll(_ announcement: [UInt8]) {
        let addresses = engine.withLock { e in e.settings.directory.keys.filter { $0 != e.settings.room }.compactMap { e.signalling(of: $0) } }
        transmit(announcement, to: addresses)
    }

    /// Where `room`'s signalling goes now: its directory entry, or where it moved to.
    func signalling(of room: RoomID) -> IPv4Endpoint? { engine.withLock { $0.signalling(of: room) } }

    /// The site document in force approves these rooms' terminals (empty: none): signalling is
    /// sealed per pair of terminals from now on, or goes back to the site key.
    func use(terminalKeys: [String: PublicIdentity]) {
        let before = protection.mode
        let change = protection.use(terminalKeys: terminalKeys, now: Self.now())
        if let announcement = change.announcement { announceToAll(announcement) }
        if protection.mode != before { log.notice("calls: signalling sealed by \(protection.mode.rawValue) from now on") }
        // Out of calls and offline at once, their streams dropped. A terminal falling silent
        // (its own key revoked) leaves everyone: it can open nothing sent from now on.
        let settings = settings
        let distrusted = change.fellSilent ? Set(settings.directory.keys).subtracting([settings.room])
            : Set(change.distrusted.compactMap(RoomID.init))
        if !distrusted.isEmpty {
            if !change.fellSilent { log.notice("calls: the site no longer vouches for \(distrusted.sorted().map(\.value)): out of any call, offline") }
            withEngine { e in execute(e.distrust(distrusted, now: Self.now())) }
        }
        wake.ring()
    }

    /// New settings from a reload: taken now if idle, else when the call ends. Returns true if taken now.
    @discardableResult
    func reconfigure(_ new: CallSettings) -> Bool {
        pendingSettings.withLock { $0 = new }
        let taken = takePendingSettings()
        wake.ring()
        return taken
    }

    /// Settings a reload gave wait for the running call to end.
    var hasPendingSettings: Bool { pendingSettings.withLock { $0 != nil } }

    @discardableResult
    private func takePendingSettings() -> Bool {
        guard let new = pendingSettings.withLock({ $0 }) else { return false }
        let taken = engine.withLock { $0.reconfigure(new) }
        guard taken else { return false }
        pendingSettings.withLock { if $0 == new { $0 = nil } }
        protection.setKnownRooms(Set(new.directory.keys.map(\.value)))
        log.info("calls: reloaded settings in force: \(new.directory.count) rooms, \(new.buttons.count) buttons, auto-answer \(new.autoAnswer ? "on" : "off")")
        return true
    }

    // MARK: commands (control socket, keys)

    /// Runs a command; returns the engine's rejection, if any. `fromKey`: a key asked, so a
    /// refusal sounds the error tone (someone pressed it and expects something to happen).
    @discardableResult
    func perform(_ command: CallCommand, fromKey: Bool = false) -> CommandRejection? {
        if case .rejected(let why) = perform(command, reading: { _, _ in () }) {
            if fromKey { keyDidNothing() }
            return why
        }
        return nil
    }

    /// A key press that does nothing (no such button, nothing to answer...): the error tone.
    func keyDidNothing() {
        withEngine { e in sounds.play(.error, quiet: e.call?.isConnected == true) }
    }

    private var nextPrune = 0.0
    private let pruneInterval: Double
    static let pruneIntervalSeconds = 86400.0

    /// The history's age limit, applied once a day besides at start and with each new entry.
    private func pruneHistoryDaily() {
        guard let history, history.maxAge != nil else { return }
        let now = Self.now()
        guard now >= nextPrune else { return }
        nextPrune = now + pruneInterval
        if history.prune(now: Self.wallNow()) > 0 { storeWriter.persist(history) }
    }

    private enum Performed<T> {
        case done(T)
        case rejected(CommandRejection)
    }

    /// Runs a command and reads the engine right after it, under the same lock: an answer that
    /// arrives meanwhile (a callee declining at once) cannot change what the command did.
    private func perform<T>(_ command: CallCommand, reading: (CallEngine, [CallEffect]) -> T) -> Performed<T> {
        let outcome: Performed<T> = withEngine { e in
            let effects = e.handle(command, now: Self.now())
            execute(effects)
            for case .rejected(_, let why) in effects { return .rejected(why) }
            return .done(reading(e, effects))
        }
        wake.ring()  // the next deadline may have moved
        return outcome
    }

    /// A control command about calls (`DaemonControl` answers the others).
    func handle(_ command: ControlCommand) -> Result<ControlReply, ControlFailure> {
        switch command {
        case .networkLoopback(let room, let count):
            let settings = settings
            guard settings.directory[room] != nil, room != settings.room else {
                return .failure(ControlFailure(.invalidArgument, "no other room \"\(room)\" in the directory"))
            }
            return networkLoopback.start(room: room, count: count, intervalMs: 10, timing: terminalTiming) { [weak self] sequence, micros in
                guard let self else { return false }
                return self.withEngine { e in
                    guard let effects = e.probe(room, sequence: sequence, sentMicros: micros, now: Self.now()) else { return false }
                    self.execute(effects)
                    return true
                }
            }
        case .networkLoopbackResult:
            return .success(networkLoopback.status())
        case .eraseHistory:
            withEngine { e in
                e.forgetHistory()
                history?.erase()
                if let history { storeWriter.persist(history) }
                control?.publish(.historyErased)
                log.notice("calls: history erased by the control socket")
            }
            return .success(.done)
        default: break
        }
        if case .perform(let callCommand) = command {
            switch perform(callCommand, reading: { reply(to: command, $0, effects: $1) }) {
            case .done(let reply): return reply
            case .rejected(let why): return .failure(Self.failure(why))
            }
        }
        return engine.withLock { reply(to: command, $0) }
    }

    /// The reply to `command` from the engine's state (read under its lock).
    private func reply(to command: ControlCommand, _ e: CallEngine, effects: [CallEffect] = []) -> Result<ControlReply, ControlFailure> {
        switch command {
        case .perform(.call), .perform(.callRooms), .perform(.callBack), .perform(.callMissed):
            guard let call = e.call else {
                // Nobody could be rung: the call is in the history, declined; say why.
                var refused: [RoomID] = []
                for case .event(.participantStatus(_, let room, .declined(.notPermitted))) in effects { refused.append(room) }
                guard refused.isEmpty else {
                    let me = e.settings.room
                    return .failure(ControlFailure(.notPermitted, "\(me) may not call \(refused.map(\.description).joined(separator: ", ")) (rooms.\(me).may_call)"))
                }
                return .failure(ControlFailure(.internal, "the call ended at once"))
            }
            return .success(.callPlaced(call.id, to: call.participants.map(\.room)))
        case .perform(.hangUp), .perform(.answer), .perform(.decline), .perform(.acknowledge), .eraseHistory: return .success(.done)
        case .perform(.setMicrophoneMuted), .perform(.setSpeakerMuted), .perform(.toggleMicrophoneMute), .perform(.toggleSpeakerMute):
            return .success(.mute(e.mute))
        case .perform(.setDoNotDisturb), .perform(.toggleDoNotDisturb): return .success(.doNotDisturb(e.doNotDisturb))
        case .perform(.setReadAloud), .perform(.toggleReadAloud): return .success(.readAloud(e.readAloud))
        case .perform(.notify):
            guard let sent = e.newestSentNotification else { return .failure(ControlFailure(.internal, "the notification was not sent")) }
            return .success(.notificationSent(sent.id, to: sent.notification.recipients))
        case .status: return .success(.status(status(e)))
        case .rooms: return .success(.rooms(directory(e)))
        case .site: return .success(.site(siteOverview(e)))
        case .history(let limit):
            let all = history?.all() ?? []
            let notifications = history?.notifications() ?? []
            return .success(.history(limit.map { Array(all.suffix($0)) } ?? all,
                                     notifications: limit.map { Array(notifications.suffix($0)) } ?? notifications))
        case .loopback, .loopbackResult, .networkLoopback, .networkLoopbackResult, .statistics:
            return .failure(ControlFailure(.internal, "not a calls command"))
        }
    }

    /// The calls side's counters for `stats`.
    func statistics() -> DaemonStatistics.Calls {
        let (st, pending, missed, online, moved) = engine.withLock { e in
            (e.statistics, e.receivedNotifications.count, e.missedCalls.count,
             Dictionary(uniqueKeysWithValues: e.settings.directory.keys.map { ($0.description, e.presence(of: $0).online) }),
             Dictionary(uniqueKeysWithValues: e.movedRooms.map { ($0.key.description, $0.value.description) }))
        }
        let store = storeWriter.statistics
        return DaemonStatistics.Calls(decodeErrors: st.decodeErrorCount, duplicates: st.duplicates, retransmissions: st.retransmissions,
                                      unreachable: st.unreachable, refused: refused.snapshot, storeWrites: store.written,
                                      storeFailures: store.failed, mediaTo: mediaTo.withLock { $0 },
                                      brokenByEmergency: st.callsBrokenByEmergency, speech: announcer?.statistics.snapshot ?? .none,
                                      datagramsSent: traffic.sent.load, bytesSent: traffic.sentBytes.load,
                                      datagramsReceived: traffic.received.load, bytesReceived: traffic.receivedBytes.load,
                                      protection: protection.mode, awaitingSession: protection.awaitingSession.load,
                                      sessionRenewals: protection.sessionRenewals.load,
                                      ended: st.callsEnded.sorted { ($0.key.direction.rawValue, $0.key.outcome.rawValue) < ($1.key.direction.rawValue, $1.key.outcome.rawValue) }
                                          .map { .init(direction: $0.key.direction, outcome: $0.key.outcome, count: $0.value) },
                                      notifications: .init(sent: st.notificationsSent, received: st.notificationsReceived,
                                                           acknowledged: st.notificationsAcknowledged, pending: pending,
                                                           reminders: st.notificationReminders),
                                      missedWaiting: missed, online: online, moved: moved, acksDropped: acksDropped.load,
                                      missedReminders: st.missedCallReminders)
    }

    private static func failure(_ why: CommandRejection) -> ControlFailure {
        switch why {
        case .unknownButton(let b): ControlFailure(.invalidArgument, "no button \"\(b)\"")
        case .unknownRoom(let r): ControlFailure(.invalidArgument, "no room \"\(r)\" in the directory")
        case .cannotCallSelf: ControlFailure(.invalidArgument, "a room cannot call itself")
        case .noTargets: ControlFailure(.invalidArgument, "no room to call")
        case .tooManyTargets: ControlFailure(.invalidArgument, "too many rooms for one message: at most \(SignalCodec.maxParticipants), and their ids within one datagram")
        case .alreadyInCall: ControlFailure(.busy, "already in a call")
        case .noCall: ControlFailure(.notInCall, "not in a call")
        case .nothingToAnswer: ControlFailure(.notInCall, "no incoming call to answer")
        case .nothingToDecline: ControlFailure(.notInCall, "no incoming call to decline")
        case .nobodyToCallBack: ControlFailure(.unavailable, "no call in the history to call back")
        case .noMissedCall: ControlFailure(.unavailable, "no notification or missed call waiting")
        case .unknownNotification(let t): ControlFailure(.invalidArgument, "no notification type \"\(t)\" ([notifications.\(t)])")
        case .noAudio: ControlFailure(.unavailable, "this terminal has no audio ([audio] enabled = false): it places and takes no calls")
        }
    }

    /// No call rings or runs, no tone sounds and no notification is being read or waits to be:
    /// the audio devices may be opened again without anyone hearing it.
    var isQuiet: Bool {
        engine.withLock { $0.call == nil } && announcer?.isQuiet != false && sounds.isQuiet
    }

    /// One line for a person: the call, or idle with who is reachable (systemd's STATUS=).
    func summaryLine() -> String {
        engine.withLock { e in
            let settings = e.settings
            let reachable = "\(Self.othersOnline(e)) of \(settings.directory.count - 1) rooms online"
            guard let call = e.call else {
                return "idle, \(reachable)" + (e.doNotDisturb ? ", do not disturb" : "")
            }
            let others = call.participants.map { "\($0.room.value) \(Self.word($0.status))" }.joined(separator: ", ")
            switch e.state {
            case .ringingIncoming: return "ringing: call from \(call.caller.value)"
            case .ringingOutgoing: return "calling \(others)"
            default:
                let with = call.role == .caller ? others : call.caller.value
                return "in a call with \(with)" + (e.mute.microphone ? ", microphone muted" : "") + (e.mute.speaker ? ", speaker muted" : "")
            }
        }
    }

    /// The states of the calls side the status lights show.
    func lightStates() -> Set<LightState> {
        engine.withLock { e in
            var s: Set<LightState> = []
            switch e.state {
            case .idle: break
            case .ringingIncoming: s.insert(.ringing)
            case .ringingOutgoing: s.insert(.calling)
            case .connected: s.insert(.inCall)
            }
            if e.mute.microphone { s.insert(.micMuted) }
            if e.doNotDisturb { s.insert(.doNotDisturb) }
            if !e.missedCalls.isEmpty { s.insert(.missedCall) }
            if e.settings.directory.count > 1, Self.othersOnline(e) == 0 { s.insert(.fault) }
            return s
        }
    }

    /// How many other rooms of the directory are online.
    private static func othersOnline(_ e: CallEngine) -> Int {
        let settings = e.settings
        return settings.directory.keys.filter { $0 != settings.room && e.presence(of: $0).online }.count
    }

    private static func word(_ s: ParticipantStatus) -> String {
        switch s {
        case .ringing: "ringing"
        case .connected: "connected"
        case .declined(let why): "declined (\(why.rawValue))"
        case .unavailable: "unavailable"
        case .left: "left"
        }
    }

    private func status(_ e: CallEngine) -> ControlStatus {
        let settings = e.settings
        let name = settings.directory[settings.room]?.name ?? settings.room.value
        var s = ControlStatus(room: settings.room, name: name, doNotDisturb: e.doNotDisturb, mute: e.mute, media: mediaStreams(),
                              missedCalls: e.missedCalls.count, lights: lightsReport())
        s.notifications = e.receivedNotifications.filter { !$0.held }.count
        s.readAloud = e.readAloud
        s.security = protection.mode
        if let call = e.call {
            s.call = ActiveCall(callID: call.id, direction: call.role == .caller ? .outgoing : .incoming, caller: call.caller,
                                participants: call.participants, connected: call.isConnected, kind: call.kind)
        }
        return s
    }

    /// What this terminal's hellos say of it from now on (at start, and after a site document is applied).
    func announce(_ announcement: SiteAnnouncement) {
        engine.withLock { $0.announce(announcement) }
        protection.holds(announcement.site)
        catchUp.withLock { $0.holds(announcement.site) }
        wake.ring()  // the hellos may be due now
    }

    /// The site document each online room's hellos say it holds (nil: none, or an old terminal
    /// that does not say).
    func heardSites() -> [RoomID: SiteStamp?] {
        let hints = siteHints.withLock { $0 }
        return engine.withLock { e in
            var out: [RoomID: SiteStamp?] = [:]
            for room in e.settings.directory.keys where room != e.settings.room && e.presence(of: room).online {
                out[room] = e.announcement(of: room)?.site
            }
            // A room heard only by its announcements, or whose announcement names a newer one.
            for (room, hint) in hints where e.settings.directory[room] != nil {
                if let heard = out[room] ?? nil, hint <= heard { continue }
                out[room] = hint
            }
            return out
        }
    }

    private func siteOverview(_ e: CallEngine) -> SiteOverview {
        let own = e.announcement ?? SiteAnnouncement(software: Software.version, site: nil, appliedAt: nil)
        let rooms = Array(e.settings.directory.keys)
        return SiteOverview(me: e.settings.room, own: own, directory: rooms, heard: e.announcements,
                            online: Set(rooms.filter { e.presence(of: $0).online }), ownHealth: e.health, health: e.healths)
    }

    private func directory(_ e: CallEngine) -> RoomDirectory {
        let settings = e.settings
        return RoomDirectory(
            rooms: settings.directory.keys.sorted().map { id in
                RoomDirectory.Room(id: id, name: settings.directory[id]!.name, presence: e.presence(of: id))
            },
            buttons: settings.buttons.sorted { $0.key < $1.key }.map { RoomDirectory.Button(name: $0.key, rooms: $0.value.rooms, kind: $0.value.kind) })
    }

    // MARK: effects

    /// Acks that wait for every write asked for so far; sent at once if none is outstanding.
    private func hold(_ acks: [(room: RoomID, address: IPv4Endpoint, datagram: [UInt8])]) {
        let request = storeWriter.requested
        if request <= storeWriter.completed {
            for ack in acks { sendSealed(ack.datagram, for: ack.room, to: ack.address) }
            return
        }
        let dropped = heldAcks.withLock { held in
            held += acks.map { HeldAck(request: request, room: $0.room, address: $0.address, datagram: $0.datagram) }
            let over = max(0, held.count - DaemonStatistics.Calls.heldAcksLimit)
            held.removeFirst(over)
            return over
        }
        if dropped > 0 {
            acksDropped.increment(by: dropped)
            log.warning("calls: \(dropped) acks dropped while the disk is slow (their senders try again)")
        }
        wake.ring()
    }

    private func transmit(_ datagram: [UInt8], to addresses: [IPv4Endpoint]) {
        datagram.withUnsafeBytes { bytes in
            for address in addresses { _ = socket.send(bytes, to: address) }
        }
        traffic.sent.increment(by: addresses.count)
        traffic.sentBytes.increment(by: datagram.count * addresses.count)
    }

    private func execute(_ effects: [CallEffect]) {
        defer { if !effects.isEmpty { onChange() } }
        var onceWritten: [(room: RoomID, address: IPv4Endpoint, datagram: [UInt8])] = []
        defer { if !onceWritten.isEmpty { hold(onceWritten) } }
        for effect in effects {
            switch effect {
            case .send(let room, let to, let plain):
                sendSealed(plain, for: room, to: to)
            case .sendOnceWritten(let room, let to, let plain):
                onceWritten.append((room, to, plain))  // after the batch: its writes are asked for first
            case .hello(let to, let plain):
                for (datagram, addresses) in protection.hello(plain, to: to) { transmit(datagram, to: addresses) }
            case .setMediaPlan(let plan):
                var routes = MediaRoutes(sendTo: plan.sendTo, acceptFrom: plan.receiveFrom.map(\.endpoint),
                                         joinGroups: plan.joinGroups)
                if let mediaKeys {
                    do {
                        routes.protection = try mediaKeys.protection(for: plan)
                    } catch {
                        // Without sessions nothing may flow in the clear: media stays off for this call.
                        log.error("calls: media keys for call \(plan.call.map(\.description) ?? "-"): \(error); media off")
                        routes = MediaRoutes(sendTo: [], acceptFrom: [], joinGroups: [])
                    }
                }
                _ = self.routes.post(routes)
                mediaTo.withLock { $0 = routes.sendTo.map(\.description) }
                log.info("calls: media \(plan.isIdle ? "idle" : "to \(plan.sendTo.map(\.description)), from \(plan.receiveFrom.map(\.room.value))")")
            case .ring(let r): sounds.play(r)
            case .cue(let c, let quiet): sounds.play(c, quiet: quiet)
            case .acknowledgeMissed(let ids):
                guard let history else { break }
                history.acknowledge(ids)
                storeWriter.persist(history)
            case .applyMute(let m):
                microphone.muted.set(m.microphone)
                mixer.speakerMuted.set(m.speaker)
            case .event(let event):
                control?.publish(event)
                log.info("calls: \(event)")
            case .persistHistory(let entry):
                guard let history else { break }
                history.record(entry)
                history.prune(now: Self.wallNow())
                storeWriter.persist(history)
            case .persistDoNotDisturb(let on):
                guard let state else { break }
                state.change { $0.doNotDisturb = on }
                storeWriter.persist(state)
            case .announce(let a): announcer?.announce(a)
            case .silenceAnnouncements(let ids): announcer?.silence(ids)
            case .persistNotification(let record):
                guard let history else { break }
                history.record(record)
                storeWriter.persist(history)
            case .persistReadAloud(let on):
                guard let state else { break }
                state.change { $0.readAloud = on }
                storeWriter.persist(state)
            case .peerUnreachable(let room): log.notice("calls: \(room) does not answer")
            case .rejected(let command, let why): log.notice("calls: \(command) refused: \(why)")
            case .probeReflected(let room, let sequence, let micros):
                networkLoopback.reflected(from: room, sequence: sequence, sentMicros: micros)
            case .roomMoved(let room, let address):
                log.notice("calls: \(room) \(address.map { "is heard at \($0) now (its seal proves it): answered there" } ?? "is back at its directory address")")
            }
        }
    }
}
