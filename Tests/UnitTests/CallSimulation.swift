import Calls
import Posix
import SignalTools

/// Loss, duplication and reordering of the simulated network.
struct CallNetConditions {
    var latency = 0.0005
    var loss = 0.0
    var duplication = 0.0
    /// Extra delay, uniform in 0...jitter: datagrams overtake each other.
    var jitter = 0.0

    static let clean = CallNetConditions()
    static let lossy = CallNetConditions(loss: 0.2, duplication: 0.2, jitter: 0.02)
}

/// Several call engines on an in-memory network with a simulated clock (1 ms steps). Every effect
/// is recorded per room: the latest media plan, chime, events, history.
struct CallSim {
    struct Datagram {
        var from: IPv4Endpoint
        var to: IPv4Endpoint
        var bytes: [UInt8]
        var due: Double
        var order: Int
    }

    var now = 1_700_000_000.0
    let step = 0.001
    /// On: after each tick, an engine whose next deadline lies more than a step in the past is
    /// noted here (the calls thread would wait for nothing: a busy loop).
    var checksDeadlines = false
    var stuckDeadlines: [String] = []
    var conditions: CallNetConditions
    var rng: SplitMix64
    var settings: [RoomID: CallSettings] = [:]
    var engines: [RoomID: CallEngine] = [:]
    var online: Set<RoomID> = []
    var inFlight: [Datagram] = []
    var sent = 0
    var plan: [RoomID: MediaPlan] = [:]
    var planLog: [RoomID: [(time: Double, plan: MediaPlan)]] = [:]
    var chiming: [RoomID: Bool] = [:]
    var chimeLog: [RoomID: [(time: Double, on: Bool)]] = [:]
    var events: [RoomID: [(time: Double, event: CallEvent)]] = [:]
    var history: [RoomID: [HistoryEntry]] = [:]
    var rejections: [RoomID: [CommandRejection]] = [:]
    /// Probe replies each room received: (from, sequence, the sender's clock).
    var reflected: [RoomID: [(RoomID, UInt32, UInt64)]] = [:]
    var muteApplied: [RoomID: MuteState] = [:]
    /// What each room's ring channel plays now, and the cues it played.
    var ring: [RoomID: Ring] = [:]
    var cues: [RoomID: [(time: Double, cue: Cue, quiet: Bool)]] = [:]
    var acknowledged: [RoomID: [CallID]] = [:]
    var announcements: [RoomID: [(time: Double, announcement: Announcement)]] = [:]
    var silenced: [RoomID: [NotificationID]] = [:]
    /// Every `persistNotification` effect, in order (the newest state of a record is its last).
    var notificationHistory: [RoomID: [NotificationRecord]] = [:]
    /// Where every room's engine draws its streams' keys (nil: keys are not agreed in signalling).
    let mediaKeys: (any MediaKeySource)?
    /// Rooms that moved: the address they send from and are reached at instead of their
    /// directory entry's (datagrams to the old one reach nobody).
    var movedTo: [RoomID: UInt32] = [:]
    /// Deliver as under terminal keys: the seal proved the sender, so an engine may follow a move.
    var sealedByTerminalKeys = false
    /// How long a notification's write takes on each room's disk (0: at once). `stop` is then a
    /// power cut: what is not written yet is lost, and so are the acks waiting for it.
    var writeDelay = 0.0
    var unwritten: [RoomID: [(due: Double, record: NotificationRecord)]] = [:]
    var heldAcks: [RoomID: [(after: Double, address: IPv4Endpoint, bytes: [UInt8])]] = [:]

    static func room(_ s: String) -> RoomID { RoomID(s)! }

    /// Rooms a, b, c, ... at 10.0.0.1, .2, ...; button "all" calls every other room from a.
    init(rooms count: Int, conditions: CallNetConditions = .clean, seed: UInt64 = 1, mediaKeys: (any MediaKeySource)? = nil,
         configure: (inout CallSettings) -> Void = { _ in }) {
        self.conditions = conditions
        self.mediaKeys = mediaKeys
        rng = SplitMix64(seed: seed)
        let ids = (0..<count).map { Self.room(String(UnicodeScalar(UInt8(ascii: "a") + UInt8($0)))) }
        var directory: [RoomID: DirectoryEntry] = [:]
        for (i, id) in ids.enumerated() {
            directory[id] = DirectoryEntry(name: "Room \(id)", signalling: IPv4Endpoint(address: 0x0A00_0001 + UInt32(i), port: 5060))
        }
        for id in ids {
            var s = CallSettings(room: id, directory: directory, media: directory[id]!.signalling.with(port: 5004))
            s.buttons = ["all": CallButton(rooms: ids.filter { $0 != id })]
            for other in ids where other != id { s.buttons[other.value] = CallButton(rooms: [other]) }
            configure(&s)
            settings[id] = s
            start(id)
        }
    }

    /// Starts (or restarts, with fresh state) a room's daemon.
    mutating func start(_ room: RoomID) {
        // A restart keeps the history, as the daemon's file does.
        var h = history[room] ?? []
        for i in h.indices where acknowledged[room, default: []].contains(h[i].callID) { h[i].acknowledged = true }
        // ... and the newest state of each notification record.
        var records: [NotificationRecord] = []
        for r in notificationHistory[room, default: []] {
            if let i = records.firstIndex(where: { $0.id == r.id && $0.direction == r.direction }) { records[i] = r } else { records.append(r) }
        }
        engines[room] = CallEngine(settings: settings[room]!, history: h, notifications: records, seed: rng.next(),
                                   mediaKeys: mediaKeys)
        online.insert(room)
    }

    mutating func stop(_ room: RoomID) {
        online.remove(room)
        engines[room] = nil
        unwritten[room] = nil
        heldAcks[room] = nil
        plan[room] = nil
        chiming[room] = false
        ring[room] = .off
    }

    func timing(_ room: RoomID) -> CallTiming { settings[room]!.timing }
    /// Where a room's signalling socket is: its directory entry, or where it moved.
    func whereIs(_ room: RoomID) -> IPv4Endpoint {
        let entry = settings[room]!.directory[room]!.signalling
        return movedTo[room].map { IPv4Endpoint(address: $0, port: entry.port) } ?? entry
    }
    func engine(_ room: RoomID) -> CallEngine { engines[room]! }

    @discardableResult
    mutating func command(_ room: RoomID, _ command: CallCommand) -> [CallEffect] {
        let effects = engines[room]!.handle(command, now: now)
        apply(effects, at: room)
        return effects
    }

    /// Hands `bytes` to `room` as if `from` sent them.
    mutating func inject(_ bytes: [UInt8], to room: RoomID, from: IPv4Endpoint) {
        apply(engines[room]!.receive(datagram: bytes, from: from, now: now), at: room)
    }

    /// One datagram on the simulated network: lost, duplicated and late as `conditions` say.
    mutating func transmit(_ bytes: [UInt8], from room: RoomID, to address: IPv4Endpoint) {
        let copies = rng.nextUnit() < conditions.duplication ? 2 : 1
        for _ in 0..<copies where rng.nextUnit() >= conditions.loss {
            sent += 1
            let due = now + conditions.latency + rng.nextUnit() * conditions.jitter
            inFlight.append(Datagram(from: whereIs(room), to: address,
                                     bytes: bytes, due: due, order: sent))
        }
    }

    mutating func apply(_ effects: [CallEffect], at room: RoomID) {
        var onceWritten: [(IPv4Endpoint, [UInt8])] = []
        defer {
            // As the daemon: after every write the batch asked for.
            let after = unwritten[room, default: []].map(\.due).max() ?? now
            for (address, bytes) in onceWritten {
                if after <= now { transmit(bytes, from: room, to: address) } else { heldAcks[room, default: []].append((after, address, bytes)) }
            }
        }
        for effect in effects {
            switch effect {
            case .send(_, let address, let bytes): transmit(bytes, from: room, to: address)
            case .sendOnceWritten(_, let address, let bytes): onceWritten.append((address, bytes))
            case .hello(let peers, let bytes): for peer in peers { transmit(bytes, from: room, to: peer.address) }
            case .setMediaPlan(let p):
                plan[room] = p
                planLog[room, default: []].append((now, p))
            case .ring(let r):
                let on = r == .chimeOnce || r == .chimeRepeating
                if on || chiming[room] == true {
                    chiming[room] = on
                    chimeLog[room, default: []].append((now, on))
                }
                ring[room] = r
            case .cue(let c, let quiet): cues[room, default: []].append((now, c, quiet))
            case .acknowledgeMissed(let ids): acknowledged[room, default: []] += ids
            case .event(let e): events[room, default: []].append((now, e))
            case .persistHistory(let h): history[room, default: []].append(h)
            case .rejected(_, let why): rejections[room, default: []].append(why)
            case .applyMute(let m): muteApplied[room] = m
            case .probeReflected(let from, let sequence, let micros):
                reflected[room, default: []].append((from, sequence, micros))
            case .announce(let a): announcements[room, default: []].append((now, a))
            case .silenceAnnouncements(let ids): silenced[room, default: []] += ids
            case .persistNotification(let r):
                if writeDelay > 0 { unwritten[room, default: []].append((now + writeDelay, r)) } else { notificationHistory[room, default: []].append(r) }
            case .persistDoNotDisturb, .peerUnreachable, .persistReadAloud, .roomMoved: break
            }
        }
    }

    /// One clock step: deliver what is due (in arrival order), then tick every running engine.
    mutating func advance() {
        now += step
        let due = inFlight.filter { $0.due <= now }.sorted { ($0.due, $0.order) < ($1.due, $1.order) }
        inFlight.removeAll { $0.due <= now }
        for d in due {
            guard let to = settings.keys.first(where: { whereIs($0) == d.to }), online.contains(to) else { continue }
            if sealedByTerminalKeys, case .success(let envelope) = SignalCodec.decode(d.bytes) {
                apply(engines[to]!.receive(envelope, from: d.from, vouched: true, now: now), at: to)
            } else {
                apply(engines[to]!.receive(datagram: d.bytes, from: d.from, now: now), at: to)
            }
        }
        for room in online.sorted() {
            let written = unwritten[room, default: []].filter { $0.due <= now }
            unwritten[room]?.removeAll { $0.due <= now }
            notificationHistory[room, default: []] += written.map(\.record)
            let ready = heldAcks[room, default: []].filter { $0.after <= now }
            heldAcks[room]?.removeAll { $0.after <= now }
            for ack in ready { transmit(ack.bytes, from: room, to: ack.address) }
        }
        for room in online.sorted() {
            apply(engines[room]!.tick(now: now), at: room)
            if checksDeadlines, let d = engines[room]!.nextDeadline, d < now - step {
                stuckDeadlines.append(String(format: "%@ at %.3f s: deadline %.3f s ago", room.value, now - 1_700_000_000, now - d))
            }
        }
    }

    mutating func run(for seconds: Double) {
        let end = now + seconds
        while now < end { advance() }
    }

    /// Runs until `done` holds; returns the time it took, or nil after `timeout`.
    @discardableResult
    mutating func run(until done: (CallSim) -> Bool, timeout: Double) -> Double? {
        let start = now
        while now - start < timeout {
            if done(self) { return now - start }
            advance()
        }
        return done(self) ? now - start : nil
    }

    /// Lets presence settle: every room has had a hello from every other.
    mutating func warmUp() {
        run(for: timing(engines.keys.first!).helloInterval * 2)
    }

    func status(_ caller: RoomID, of callee: RoomID) -> ParticipantStatus? { engine(caller).call?.status(of: callee) }
    func ended(_ room: RoomID) -> [CallOutcome] {
        events[room, default: []].compactMap { if case .callEnded(_, let o) = $0.event { o } else { nil } }
    }
    func mediaEndpoint(_ room: RoomID) -> IPv4Endpoint { settings[room]!.media }
}

extension CallSim {
    func cueNames(_ room: RoomID) -> [Cue] { cues[room, default: []].map(\.cue) }
}
