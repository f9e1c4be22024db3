import Posix
// The call state machine of one room: deterministic, no I/O, no clock. The integrator feeds it
// commands, received datagrams and ticks with the current time, and executes the effects.

public struct CallEngine: Sendable {
    public internal(set) var settings: CallSettings
    public internal(set) var statistics = CallStatistics()
    public internal(set) var doNotDisturb: Bool
    public internal(set) var mute = MuteState()
    public internal(set) var call: CallSession?
    public internal(set) var mediaPlan = MediaPlan.idle
    /// Rooms heard from another address than their directory entry's, under a seal that proves
    /// the sender by its own key (a new DHCP lease, a moved box): where they are now. Signalling
    /// and media go there until the room is heard at its directory address again (docs/calls.md).
    public internal(set) var movedRooms: [RoomID: IPv4Endpoint] = [:]

    var presenceTable = PresenceTable()
    var random: CallRandom
    /// Draws the key of each stream this room starts; nil: keys are not agreed in signalling.
    let mediaKeySource: (any MediaKeySource)?
    var nextMessageID: UInt32
    var outbox = ReliableOutbox()
    var dedupe: DedupeWindow
    var endedCalls: RecentSet<CallID>
    var receivedNotices: RecentSet<CallID>
    /// Messages kept for rooms that could not be reached (missed-call notices, notifications and
    /// their acknowledgements), oldest first; sent again with the room's next hello.
    var deferred: [(room: RoomID, message: SignalMessage, inFlight: Bool)] = []
    var nextHello: Double?
    /// During a call: when the next keepalive hello goes to the other side.
    var nextKeepalive: Double?
    /// When this terminal's health next goes to every room (nil: at the next tick).
    var nextHealth: Double?
    /// Effects of the entry point running now.
    var out: [CallEffect] = []
    /// Missed calls nobody here acknowledged yet, oldest first.
    public internal(set) var missedCalls: [MissedCall] = []
    /// The rooms `callBack` calls: the other side of the newest call in the history.
    public internal(set) var callBackRooms: [RoomID] = []
    /// When the last missed-call reminder sounded (wall clock).
    var lastReminder: Double?
    /// Reading notifications aloud here (the room's switch).
    public internal(set) var readAloud: Bool
    /// Notifications that arrived here and are not acknowledged yet, heard or held back, oldest first.
    public internal(set) var receivedNotifications: [NotificationRecord] = []
    /// Notifications this room sent, as the history has them (delivery, acknowledgements).
    var sentNotifications: [NotificationID: NotificationRecord] = [:]
    /// Sent notifications whose first delivery round is not over: the recipients tried once.
    var firstRound: [NotificationID: Set<RoomID>] = [:]
    var receivedNotificationIDs: RecentSet<NotificationID>
    /// When the last notification reminder sounded (wall clock).
    var lastNotificationReminder: Double?
    /// Wall clock minus the clock `now` counts on: history and missed-call notices are kept in
    /// seconds since 1970, timers run on `now` (the daemon's monotonic clock, which NTP cannot
    /// step). The integrator sets it before each entry point; 0 when `now` is the wall clock.
    public var wallClockOffset = 0.0
    /// What this terminal's directory-wide hellos say of its software and site (`announce`);
    /// nil: nothing.
    public private(set) var announcement: SiteAnnouncement?

    /// Sets what the hellos say (the integrator does at start and whenever it applies a site
    /// document); a change goes out with hellos at the next `tick`, not a hello interval later,
    /// so that a new site document spreads one hop per fetch.
    /// How this terminal is doing, as the integrator last reported (`report`); nil: nothing
    /// reported, and no health message is sent.
    public private(set) var health: TerminalHealth?

    /// Sets this terminal's health. It goes to every room with the next health round (every
    /// `healthInterval`; the first at the next tick): a change costs no message of its own.
    public mutating func report(_ health: TerminalHealth) { self.health = health }

    /// What each other room's newest health message said, while it is online.
    public var healths: [RoomID: TerminalHealth] {
        presenceTable.rooms.compactMapValues { $0.presence.online ? $0.health : nil }
    }

    public mutating func announce(_ announcement: SiteAnnouncement) {
        guard announcement != self.announcement else { return }
        let first = self.announcement == nil
        self.announcement = announcement
        if !first { nextHello = nil }
    }

    /// `doNotDisturb`: the persisted switch, if any (else the settings' default). `history`: the
    /// persisted history, oldest first (missed calls to acknowledge, whom to call back). `seed`:
    /// from the system's randomness in the daemon, fixed in tests; call ids and message ids derive from it.
    public init(settings: CallSettings, doNotDisturb: Bool? = nil, readAloud: Bool? = nil, history: [HistoryEntry] = [],
                notifications: [NotificationRecord] = [], seed: UInt64, mediaKeys: (any MediaKeySource)? = nil) {
        mediaKeySource = mediaKeys
        missedCalls = history.filter(\.awaitsAcknowledgement).map { MissedCall(callID: $0.callID, caller: $0.caller, started: $0.started) }
        callBackRooms = history.last?.otherSide(me: settings.room) ?? []
        self.settings = settings
        self.doNotDisturb = doNotDisturb ?? settings.doNotDisturb
        self.readAloud = readAloud ?? settings.readAloud
        receivedNotificationIDs = RecentSet(capacity: settings.limits.endedCalls)
        random = CallRandom(seed: seed)
        nextMessageID = UInt32(truncatingIfNeeded: random.next())
        dedupe = DedupeWindow(capacity: settings.limits.dedupeWindow)
        endedCalls = RecentSet(capacity: settings.limits.endedCalls)
        receivedNotices = RecentSet(capacity: settings.limits.endedCalls)
        restoreNotifications(notifications)
    }

    // MARK: what the integrator reads

    public var state: CallState {
        guard let call else { return .idle }
        if call.isConnected { return .connected }
        return call.role == .caller ? .ringingOutgoing : .ringingIncoming
    }

    /// A room's presence as its hellos say; this terminal's own as it is (it runs, so it is online).
    public func presence(of room: RoomID) -> Presence {
        room == settings.room ? Presence(online: true, doNotDisturb: doNotDisturb, inCall: call != nil) : presenceTable[room].presence
    }

    /// What each other room's newest hello with an announcement said, while it is online.
    public var announcements: [RoomID: SiteAnnouncement] {
        presenceTable.rooms.compactMapValues { $0.presence.online ? $0.announcement : nil }
    }

    /// What `room`'s newest hello said, while it is online (one lookup: `announcements` builds
    /// the whole table).
    public func announcement(of room: RoomID) -> SiteAnnouncement? {
        presenceTable.rooms[room].flatMap { $0.presence.online ? $0.announcement : nil }
    }

    /// Moves whenever a hello names another site document than that room's hello before.
    public var siteChanges: UInt64 { presenceTable.siteChanges }

    /// Messages waiting for a room to come back online.
    public var pendingDeferred: Int { deferred.count }

    /// Takes new settings from a reloaded configuration: only between calls (a call keeps the rules
    /// it began with), and only if this room and its sockets stay as they are (those need a
    /// restart). Rooms no longer in the directory are forgotten. Returns false if not taken.
    public mutating func reconfigure(_ new: CallSettings) -> Bool {
        guard call == nil, new.room == settings.room, new.media == settings.media,
              new.directory[new.room]?.signalling == settings.directory[settings.room]?.signalling else { return false }
        settings = new
        movedRooms = movedRooms.filter { room, at in new.directory[room].map { $0.signalling.address != at.address } ?? false }
        presenceTable.forget(roomsNotIn: Set(new.directory.keys))
        deferred.removeAll { new.directory[$0.room] == nil }
        return true
    }

    /// Messages sent reliably and not yet acknowledged (e.g. the goodbye of a hang-up).
    public var awaitingAcknowledgement: Bool { !outbox.pending.isEmpty }

    /// The next time `tick` has something to do; the integrator may sleep until then (or until a
    /// datagram or command arrives).
    public var nextDeadline: Double? {
        // A running minimum, not an array: the calls thread asks before each wait.
        let t = settings.timing
        var first = nextHello ?? -.infinity
        func consider(_ time: Double?) { if let time, time < first { first = time } }
        consider(outbox.nextDeadline(timing: t))
        for (_, r) in presenceTable.rooms where r.presence.online { consider(r.lastHeard + t.offlineAfter) }
        // The times `callTimers` acts on, and only those: one it no longer acts on (the answer
        // timeout of a callee long connected, the silence of a room that left) would stay in the
        // past and turn the calls thread's wait into a busy loop.
        if let call {
            consider(call.ringDeadline)
            if call.role == .callee {
                if !call.isConnected { consider(call.started + t.answerTimeout) }
                consider(call.lastHeard[call.caller].map { $0 + t.peerSilenceTimeout })
            } else {
                for p in call.participants {
                    if p.status == .ringing { consider(call.started + t.answerTimeout) }
                    if p.status == .connected { consider(call.lastHeard[p.room].map { $0 + t.peerSilenceTimeout }) }
                }
            }
            consider(nextKeepalive ?? -.infinity)
        }
        consider(nextReminder.map { $0 - wallClockOffset })
        consider(nextNotificationReminder.map { $0 - wallClockOffset })
        if health != nil { consider(nextHealth ?? -.infinity) }  // only while `tick` sends it
        return first
    }

    // MARK: entry points

    public mutating func handle(_ command: CallCommand, now: Double) -> [CallEffect] {
        out = []
        switch command {
        case .call, .callRooms, .callBack, .callMissed:
            // Nobody could talk or listen here: refused before anything goes out.
            guard settings.audio else {
                out.append(.rejected(command, .noAudio))
                return take()
            }
        default: break
        }
        switch command {
        case .call(let button):
            if let b = settings.buttons[button] {
                placeCall(to: b.rooms, kind: b.kind, command: command, now: now)
            } else {
                out.append(.rejected(command, .unknownButton(button)))
            }
        case .callRooms(let rooms, let kind): placeCall(to: rooms, kind: kind, command: command, now: now)
        case .hangUp: hangUp(command: command, now: now)
        case .answer: answer(command: command, now: now)
        case .decline: decline(command: command, now: now)
        case .callBack:
            if callBackRooms.isEmpty { out.append(.rejected(command, .nobodyToCallBack)) }
            else { placeCall(to: callBackRooms, command: command, now: now) }
        case .callMissed:
            if let first = missedCalls.first {
                placeCall(to: [first.caller], command: command, now: now)
                if call?.role == .caller { call?.answersMissed = first.callID }
            } else {
                out.append(.rejected(command, .noMissedCall))
            }
        case .acknowledge(let all):
            if acknowledgeNotifications(all: all, now: now) {
            } else if missedCalls.isEmpty {
                out.append(.rejected(command, .noMissedCall))
            } else {
                acknowledge(all ? missedCalls.map(\.callID) : [missedCalls[0].callID])
            }
        case .notify(let type):
            if let t = settings.notifications[type] { sendNotification(t, now: now) }
            else { out.append(.rejected(command, .unknownNotification(type))) }
        case .setReadAloud(let on): setReadAloud(on)
        case .toggleReadAloud: setReadAloud(!readAloud)
        case .setMicrophoneMuted(let on): setMute(MuteState(microphone: on, speaker: mute.speaker), now: now)
        case .setSpeakerMuted(let on): setMute(MuteState(microphone: mute.microphone, speaker: on), now: now)
        case .toggleMicrophoneMute: setMute(MuteState(microphone: !mute.microphone, speaker: mute.speaker), now: now)
        case .toggleSpeakerMute: setMute(MuteState(microphone: mute.microphone, speaker: !mute.speaker), now: now)
        case .setDoNotDisturb(let on): setDoNotDisturb(on, now: now)
        case .toggleDoNotDisturb: setDoNotDisturb(!doNotDisturb, now: now)
        }
        return take()
    }

    /// A datagram from the signalling socket. Malformed ones are counted and dropped.
    public mutating func receive(datagram: [UInt8], from source: IPv4Endpoint, now: Double) -> [CallEffect] {
        switch SignalCodec.decode(datagram) {
        case .success(let envelope): return receive(envelope, from: source, now: now)
        case .failure(let error):
            statistics.decodeErrors[error, default: 0] += 1
            return []
        }
    }

    /// `vouched`: the seal proved the sender by a key of its own (terminal keys), so it may speak
    /// from another address than its directory entry's, and is answered there from now on.
    public mutating func receive(_ envelope: Envelope, from source: IPv4Endpoint, vouched: Bool = false, now: Double) -> [CallEffect] {
        out = []
        let sender = envelope.sender
        guard sender != settings.room, let entry = settings.directory[sender] else {
            statistics.unknownSender += 1
            return []
        }
        let wasOnline = presenceTable[sender].presence.online
        // In the clear, or under the one site key that every terminal holds (any of them could
        // name another room as sender), a room speaks from its own host alone.
        if entry.signalling.address != source.address {
            guard vouched else {
                statistics.addressMismatch += 1
                return []
            }
            moved(sender, to: IPv4Endpoint(address: source.address, port: entry.signalling.port))
        } else if movedRooms[sender] != nil {
            moved(sender, to: nil)
        }
        if envelope.message.keptOnReceipt {
            // A duplicate's ack waits too: the first one's write may still be under way.
            acknowledgeOnceWritten(envelope.messageID, to: sender)
        } else if envelope.message.needsAck {
            send(.ack(envelope.messageID), to: sender, now: now)
        }
        // A hello reports presence itself (with its do-not-disturb bit); any other message proves
        // the room is up.
        if case .hello = envelope.message {} else if let presence = presenceTable.heard(sender, now: now) {
            out.append(.event(.presenceChanged(room: sender, presence)))
            deliverNotices(to: sender, now: now)
        }
        if let id = call?.id, envelope.message.callID == id { call?.lastHeard[sender] = now }

        if envelope.message.needsAck, !dedupe.firstTime(envelope.messageID, from: sender) {
            statistics.duplicates += 1
        } else {
            dispatch(envelope, now: now)
        }
        // A room just come online hears how this terminal is doing at once, not up to an
        // interval later: the page shows a terminal's health as soon as it shows it online.
        if !wasOnline, presenceTable[sender].presence.online { sendHealth(to: [sender]) }
        return take()
    }

    /// Timers: retransmissions, hellos, presence, ring and answer times. Call at least every
    /// few milliseconds, or at `nextDeadline`.
    public mutating func tick(now: Double) -> [CallEffect] {
        out = []
        let t = settings.timing
        let (resend, gaveUp) = outbox.due(now: now, timing: t)
        for m in resend {
            statistics.retransmissions += 1
            out.append(.send(to: m.room, address: m.address, datagram: m.datagram))
        }
        for m in gaveUp { unreachable(m, now: now) }
        if nextHello.map({ now >= $0 }) ?? true {
            sendHellos(now: now)
        }
        if health != nil, nextHealth.map({ now >= $0 }) ?? true {
            sendHealth(now: now)
        }
        sendKeepalives(now: now)
        for room in presenceTable.expire(now: now, offlineAfter: t.offlineAfter) {
            out.append(.event(.presenceChanged(room: room, presence(of: room))))
        }
        callTimers(now: now)
        if let reminder = nextReminder, now + wallClockOffset >= reminder {
            lastReminder = now + wallClockOffset
            statistics.missedCallReminders += 1
            cue(.missedCall)
        }
        notificationTimers(now: now)
        return take()
    }

    /// The wall-clock time of the next missed-call reminder; nil while none is due (none waits,
    /// reminders off, or a call rings: its chime or ringback says enough).
    var nextReminder: Double? {
        let every = settings.timing.missedReminder
        guard every > 0, let oldest = missedCalls.first, state != .ringingIncoming, state != .ringingOutgoing else { return nil }
        return max(oldest.started, lastReminder ?? -.infinity) + every
    }

    /// The site document no longer vouches for these rooms' terminals (revoked, or another box's
    /// key approved for the room): each leaves this room's call at once, its stream dropped with
    /// it, and shows offline. Nothing is sent to them: nobody can seal to them any more.
    public mutating func distrust(_ rooms: Set<RoomID>, now: Double) -> [CallEffect] {
        for room in rooms.sorted() where presenceTable.drop(room) {
            out.append(.event(.presenceChanged(room: room, presence(of: room))))
        }
        if let c = call {
            switch c.role {
            case .caller:
                for room in c.remaining where rooms.contains(room) { calleeGone(room, status: .left, now: now) }
            case .callee where rooms.contains(c.caller):
                finishCall(c.isConnected ? .finished : .missed, myStatus: c.isConnected ? .connected : .unavailable, now: now)
            case .callee:
                break
            }
        }
        return take()
    }

    /// Forgets the history's part of the state (the technician erased it).
    public mutating func forgetHistory() {
        missedCalls = []
        callBackRooms = []
        lastReminder = nil
        receivedNotifications = []
        sentNotifications = [:]
        lastNotificationReminder = nil
    }

    // MARK: shared helpers

    mutating func take() -> [CallEffect] {
        defer { out = [] }
        return out
    }

    /// Where `room`'s signalling goes: its directory entry, or where it moved to.
    public func signalling(of room: RoomID) -> IPv4Endpoint? {
        movedRooms[room] ?? settings.directory[room]?.signalling
    }

    /// `room` is now at `address` (nil: back at its directory entry's).
    mutating func moved(_ room: RoomID, to address: IPv4Endpoint?) {
        guard movedRooms[room] != address else { return }
        movedRooms[room] = address
        if address != nil { statistics.addressChanges += 1 }
        if let now = signalling(of: room) { outbox.readdress(room: room, to: now) }
        out.append(.roomMoved(room, to: address))
    }

    /// The ack of a message kept on receipt: sent by whoever writes the stores, once this
    /// message's changes are on disk.
    mutating func acknowledgeOnceWritten(_ messageID: UInt32, to room: RoomID) {
        guard let address = signalling(of: room) else { return }
        let id = nextMessageID
        nextMessageID &+= 1
        let datagram = SignalCodec.encode(Envelope(sender: settings.room, messageID: id, message: .ack(messageID)))
        out.append(.sendOnceWritten(to: room, address: address, datagram: datagram))
    }

    mutating func send(_ message: SignalMessage, to room: RoomID, now: Double) {
        guard let address = signalling(of: room) else { return }
        let id = nextMessageID
        nextMessageID &+= 1
        let datagram = SignalCodec.encode(Envelope(sender: settings.room, messageID: id, message: message))
        out.append(.send(to: room, address: address, datagram: datagram))
        if message.needsAck {
            let first = settings.timing.retransmitInitial
            outbox.add(PendingMessage(room: room, address: address, messageID: id, message: message,
                                      datagram: datagram, firstSent: now, nextSend: now + first, interval: first))
        }
    }

    /// A round-trip probe to `room` (the network loopback test); nil if the room is not in the directory.
    public mutating func probe(_ room: RoomID, sequence: UInt32, sentMicros: UInt64, now: Double) -> [CallEffect]? {
        guard room != settings.room, settings.directory[room] != nil else { return nil }
        out = []
        send(.probe(sequence: sequence, sentMicros: sentMicros), to: room, now: now)
        return take()
    }

    mutating func sendHellos(now: Double) {
        nextHello = now + settings.timing.helloInterval
        let to = settings.directory.keys.sorted().filter { $0 != settings.room }.compactMap { room in
            signalling(of: room).map { SignallingPeer(room: room, address: $0) }
        }
        guard !to.isEmpty else { return }
        let id = nextMessageID
        nextMessageID &+= 1
        let hello = SignalMessage.hello(doNotDisturb: doNotDisturb, call: call?.id, announcement: announcement)
        out.append(.hello(to: to, datagram: SignalCodec.encode(Envelope(sender: settings.room, messageID: id, message: hello))))
    }

    /// This terminal's health to every room online (one gone hears it when back, with the next
    /// round): one message id, sealed for each room on its own (a seal for every room is a
    /// hello's alone).
    mutating func sendHealth(now: Double) {
        nextHealth = now + settings.timing.healthInterval
        sendHealth(to: settings.directory.keys.sorted())
    }

    /// Health to those of `rooms` that are online now.
    mutating func sendHealth(to rooms: [RoomID]) {
        guard let health else { return }
        let id = nextMessageID
        nextMessageID &+= 1
        let datagram = SignalCodec.encode(Envelope(sender: settings.room, messageID: id, message: .health(health)))
        for room in rooms where room != settings.room && presenceTable[room].presence.online {
            if let address = signalling(of: room) { out.append(.send(to: room, address: address, datagram: datagram)) }
        }
    }

    /// In a call, a hello to the rooms on the other side every `callKeepalive` (the caller's
    /// remaining callees, or a callee's caller), so that each side's `lastHeard` stays fresh.
    mutating func sendKeepalives(now: Double) {
        guard let call else { nextKeepalive = nil; return }
        guard nextKeepalive.map({ now >= $0 }) ?? true else { return }
        nextKeepalive = now + settings.timing.callKeepalive
        let peers = call.role == .caller ? call.remaining : [call.caller]
        for room in peers {
            send(.hello(doNotDisturb: doNotDisturb, call: call.id), to: room, now: now)
        }
    }

    /// Adds a history entry (times already on the wall clock): a missed call waits to be
    /// acknowledged, and the entry's other side is whom `callBack` calls.
    mutating func record(_ entry: HistoryEntry) {
        var entry = entry
        if entry.outcome == .missed, entry.direction == .incoming {
            entry.acknowledged = false
            missedCalls.append(MissedCall(callID: entry.callID, caller: entry.caller, started: entry.started))
        }
        callBackRooms = entry.otherSide(me: settings.room)
        statistics.callsEnded[CallTally(entry.direction, entry.outcome), default: 0] += 1
        out.append(.persistHistory(entry))
        out.append(.event(.historyAdded(entry)))
    }

    /// `now` on the wall clock, for the history.
    func wall(_ now: Double) -> Double { now + wallClockOffset }

    /// `confirm`: play the acknowledged cue (a key press wants it; a call back has its own cues).
    mutating func acknowledge(_ ids: [CallID], confirm: Bool = true) {
        let known = ids.filter { id in missedCalls.contains { $0.callID == id } }
        guard !known.isEmpty else { return }
        missedCalls.removeAll { known.contains($0.callID) }
        if missedCalls.isEmpty { lastReminder = nil }
        out.append(.acknowledgeMissed(known))
        out.append(.event(.missedAcknowledged(known)))
        if confirm { cue(.acknowledged) }
    }

    /// Plays a cue: quiet while a call's audio is open.
    mutating func cue(_ c: Cue) {
        out.append(.cue(c, quiet: call?.isConnected == true))
    }

    mutating func updateMediaPlan() {
        let plan = computeMediaPlan()
        guard plan != mediaPlan else { return }
        mediaPlan = plan
        out.append(.setMediaPlan(plan))
    }

    func computeMediaPlan() -> MediaPlan {
        guard let call, call.isConnected else { return .idle }
        switch call.role {
        case .caller:
            let peers = call.connectedRooms.compactMap { room in
                call.calleeMedia[room].map { MediaPeer(room: room, endpoint: $0, key: call.calleeKeys[room]) }
            }
            guard !peers.isEmpty else { return .idle }
            // An announcement hears nobody back: whatever comes from a callee is dropped.
            let hear = call.kind == .announcement ? [] : peers
            switch settings.callerVoice {
            case .unicast: return MediaPlan(sendTo: peers.map(\.endpoint), receiveFrom: hear, call: call.id, sendKey: call.ownKey)
            case .multicast(let group): return MediaPlan(sendTo: [group], receiveFrom: hear, call: call.id, sendKey: call.ownKey)
            }
        case .callee:
            guard let invite = call.invite else { return .idle }
            // A caller that moved names its directory address in its invite: its media come from where it is.
            let callerMedia = movedRooms[call.caller].map { IPv4Endpoint(address: $0.address, port: invite.callerMedia.port) } ?? invite.callerMedia
            let caller = MediaPeer(room: call.caller, endpoint: callerMedia, key: invite.key)
            // An announcement's callee only listens: its microphone goes nowhere.
            var plan = MediaPlan(sendTo: call.kind == .announcement ? [] : [callerMedia], receiveFrom: [caller],
                                 call: call.id, sendKey: call.ownKey)
            if case .multicast(let group) = invite.voice { plan.joinGroups = [group] }
            return plan
        }
    }

    /// Ends this room's side of the call: history, events, media off.
    /// `cue`: what this room hears; nil = what the outcome says (the call ended; or for a caller
    /// that reached nobody, why).
    /// `quietly`: no cue at all (an emergency call that breaks in plays its own).
    mutating func finishCall(_ outcome: CallOutcome, reason: DeclineReason? = nil, myStatus: ParticipantStatus? = nil,
                             cue endCue: Cue? = nil, quietly: Bool = false, now: Double) {
        guard var call else { return }
        if let myStatus { call.setStatus(myStatus, of: settings.room) }
        if !call.isConnected { out.append(.ring(.off)) }
        endedCalls.insert(call.id)
        let id = call.id
        // Invites, accepts and mute updates of a finished call need not arrive any more.
        outbox.cancel { m in
            guard m.message.callID == id else { return false }
            switch m.message {
            case .end, .leave, .decline: return false
            default: return true
            }
        }
        self.call = nil
        updateMediaPlan()
        out.append(.event(.callEnded(id, outcome: outcome)))
        if !quietly, let c = endCue ?? Self.endCue(call) { cue(c) }
        record(HistoryEntry(callID: id, direction: call.role == .caller ? .outgoing : .incoming, caller: call.caller,
                            participants: call.participants, outcome: outcome, reason: reason,
                            started: wall(call.started), ended: wall(now), kind: call.kind))
        releaseHeldNotifications(now: now)
    }

    /// What a room hears when its call ends by itself: the end of a call that was open; for a
    /// caller that reached nobody, the worst news among the callees (busy, then refused, then not
    /// reached); nothing for a callee whose call never opened (it is a missed call).
    static func endCue(_ call: CallSession) -> Cue? {
        if call.isConnected { return .callEnded }
        guard call.role == .caller else { return nil }
        let statuses = call.participants.map(\.status)
        if statuses.contains(.declined(.busy)) { return .busy }
        if statuses.contains(where: { if case .declined = $0 { true } else { false } }) { return .declined }
        return .notReached
    }

    mutating func setMute(_ state: MuteState, now: Double) {
        guard state != mute else { return }
        let micChanged = state.microphone != mute.microphone
        mute = state
        out.append(.applyMute(state))
        out.append(.event(.muteChanged(room: settings.room, state)))
        if micChanged { cue(state.microphone ? .microphoneMuted : .microphoneUnmuted) }
        if let call {
            for room in call.peers { send(.mute(call.id, state), to: room, now: now) }
        }
    }

    mutating func setDoNotDisturb(_ on: Bool, now: Double) {
        guard on != doNotDisturb else { return }
        doNotDisturb = on
        out.append(.persistDoNotDisturb(on))
        out.append(.event(.doNotDisturbChanged(on)))
        cue(on ? .doNotDisturbOn : .doNotDisturbOff)
        sendHellos(now: now)  // the others see it at once, not a second later
        if !on { releaseHeldNotifications(now: now) }
    }

    // MARK: dispatch

    mutating func dispatch(_ envelope: Envelope, now: Double) {
        let sender = envelope.sender
        switch envelope.message {
        case .probe(let sequence, let micros):
            send(.probeReply(sequence: sequence, sentMicros: micros), to: sender, now: now)
        case .probeReply(let sequence, let micros):
            out.append(.probeReflected(from: sender, sequence: sequence, sentMicros: micros))
        case .ack(let id):
            if let acked = outbox.acknowledge(room: sender, messageID: id) {
                deferred.removeAll { $0.room == sender && $0.message == acked.message }
                if case .notify(let n) = acked.message { notificationDelivered(n.id, to: sender, now: now) }
            }
        case .hello(let dnd, let helloCall, let announcement):
            let (changed, stale) = presenceTable.hello(sender, id: envelope.messageID, doNotDisturb: dnd,
                                                       call: helloCall, announcement: announcement, now: now)
            if stale {
                statistics.stale += 1
                return
            }
            if let changed { out.append(.event(.presenceChanged(room: sender, changed))) }
            deliverNotices(to: sender, now: now)
            checkPeerStillInCall(sender, helloID: envelope.messageID, helloCall: helloCall, now: now)
        case .invite(let id, let participants, let media, let kind):
            receiveInvite(id, from: sender, participants: participants, media: media, kind: kind,
                          messageID: envelope.messageID, now: now)
        case .accept(let id, let port, let key):
            receiveAccept(id, from: sender, port: port, key: key, messageID: envelope.messageID, now: now)
        case .decline(let id, let reason): receiveDecline(id, from: sender, reason: reason, now: now)
        case .end(let id): receiveEnd(id, from: sender, now: now)
        case .leave(let id): receiveLeave(id, from: sender, now: now)
        case .mute(let id, let state):
            guard var c = call, c.id == id, c.peers.contains(sender) || sender == c.caller else {
                statistics.stale += 1
                return
            }
            if let last = c.lastMuteID[sender], !isAfter(envelope.messageID, last) {
                statistics.stale += 1
                return
            }
            c.lastMuteID[sender] = envelope.messageID
            c.remoteMute[sender] = state
            call = c
            out.append(.event(.muteChanged(room: sender, state)))
        case .missedCall(let notice): receiveMissedCall(notice, now: now)
        case .notify(let n): receiveNotification(n, now: now)
        case .notificationAcknowledged(let id): receiveAcknowledgement(id, from: sender, now: now)
        case .health(let h): presenceTable.health(sender, h)
        }
    }

    /// A message went unacknowledged for `giveUpAfter`.
    mutating func unreachable(_ m: PendingMessage, now: Double) {
        statistics.unreachable += 1
        out.append(.peerUnreachable(m.room))
        switch m.message {
        case .invite(let id, _, _, _): inviteUnreachable(id, room: m.room, now: now)
        case .accept(let id, _, _):
            // The caller is gone: our side of the call cannot work.
            if let call, call.id == id { finishCall(.finished, now: now) }
        case .missedCall, .notify, .notificationAcknowledged:
            // Kept; tried again with the room's next hello.
            if let i = deferred.firstIndex(where: { $0.room == m.room && $0.message == m.message }) {
                deferred[i].inFlight = false
            }
            if case .notify(let n) = m.message { firstRoundTried(n.id, room: m.room) }
            // The room spoke while this was on its way (it came back meanwhile): again at once,
            // not with its next hello.
            if presenceTable[m.room].lastHeard > m.firstSent { deliverNotices(to: m.room, now: now) }
        default: break
        }
    }

    // MARK: messages kept for rooms that were offline

    /// Keeps `message` for `room` until the room acknowledges it (send it with `deliverNotices`).
    mutating func queueDeferred(_ message: SignalMessage, for room: RoomID) {
        guard settings.limits.pendingNotices > 0 else {
            statistics.noticesDropped += 1
            return
        }
        if deferred.count >= settings.limits.pendingNotices {
            deferred.removeFirst()
            statistics.noticesDropped += 1
        }
        deferred.append((room, message, false))
    }

    mutating func queueNotice(_ notice: MissedCallNotice, for room: RoomID) {
        queueDeferred(.missedCall(notice), for: room)
    }

    /// Sends what is kept for `room` and not on its way already (it is online, or worth a try),
    /// and at once again what is on its way and waits for its ack.
    mutating func deliverNotices(to room: RoomID, now: Double) {
        for m in outbox.expedite(room: room, now: now, initial: settings.timing.retransmitInitial) {
            statistics.retransmissions += 1
            out.append(.send(to: m.room, address: m.address, datagram: m.datagram))
        }
        for i in deferred.indices where deferred[i].room == room && !deferred[i].inFlight {
            deferred[i].inFlight = true
            send(deferred[i].message, to: room, now: now)
        }
    }

    mutating func receiveMissedCall(_ notice: MissedCallNotice, now: Double) {
        guard !receivedNotices.contains(notice.callID) else {
            statistics.stale += 1
            return
        }
        receivedNotices.insert(notice.callID)
        let me = settings.room
        let participants = notice.participants.map { Participant(room: $0, status: $0 == me ? .unavailable : .ringing) }
        // The notice's time is the caller's wall clock.
        record(HistoryEntry(callID: notice.callID, direction: .incoming, caller: notice.caller, participants: participants,
                            outcome: .missed, started: notice.started, ended: notice.started))
    }

    // MARK: timers

    mutating func callTimers(now: Double) {
        guard let call else { return }
        let t = settings.timing
        if call.role == .callee {
            if let ring = call.ringDeadline, now >= ring {
                acceptIncoming(now: now)
            } else if !call.isConnected, now >= call.started + t.answerTimeout {
                // Told, so that a caller with a longer timeout stops ringing too.
                send(.leave(call.id), to: call.caller, now: now)
                finishCall(.missed, myStatus: .unavailable, now: now)
            } else if let heard = call.lastHeard[call.caller], now - heard > t.peerSilenceTimeout {
                finishCall(call.isConnected ? .finished : .missed, now: now)
            }
            return
        }
        for room in call.remaining {
            let status = call.status(of: room)
            if status == .ringing, now >= call.started + t.answerTimeout {
                self.call?.endSent.insert(room)
                send(.end(call.id), to: room, now: now)
                calleeGone(room, status: .unavailable, now: now)
            } else if status == .connected, let heard = call.lastHeard[room], now - heard > t.peerSilenceTimeout {
                calleeGone(room, status: .unavailable, now: now)
            }
        }
    }
}

/// A missed call waiting to be acknowledged.
public struct MissedCall: Sendable, Equatable {
    public var callID: CallID
    public var caller: RoomID
    /// Seconds since 1970.
    public var started: Double
}
