// Practice notifications in the call engine: sending one to its recipients (kept for those
// offline, like a missed-call notice), hearing one here (held back by do-not-disturb or a call
// when its priority allows), acknowledging it, and reminding until someone does.

extension CallEngine {
    // MARK: sender

    mutating func sendNotification(_ type: NotificationType, now: Double) {
        let recipients = type.recipients.filter { $0 != settings.room && settings.directory[$0] != nil }
        guard !recipients.isEmpty else {
            out.append(.rejected(.notify(type: type.id), .noTargets))
            return
        }
        let n = type.notification(id: NotificationID(max(1, random.next())), from: settings.room, to: recipients, sent: wall(now))
        guard recipients.count <= SignalCodec.maxParticipants,
              CallSettings.notificationMessage(from: settings.room, type: type, to: recipients) <= SignalCodec.maxDatagramBytes else {
            out.append(.rejected(.notify(type: type.id), .tooManyTargets))
            return
        }
        let record = NotificationRecord(notification: n, direction: .outgoing)
        keepSent(record)
        statistics.notificationsSent += 1
        firstRound[n.id] = []
        out.append(.persistNotification(record))
        // Sent at once whatever the presence table says (a room just started is not known yet);
        // a room that does not acknowledge gets it again with its next hello.
        for room in recipients {
            queueDeferred(.notify(n), for: room)
            deliverNotices(to: room, now: now)
        }
    }

    /// The newest notification this room sent (a reply to the `notify` command).
    public var newestSentNotification: NotificationRecord? {
        sentNotifications.values.max { $0.notification.sent < $1.notification.sent }
    }

    mutating func keepSent(_ record: NotificationRecord) {
        sentNotifications[record.id] = record
        if sentNotifications.count > settings.limits.endedCalls,
           let oldest = sentNotifications.values.min(by: { $0.notification.sent < $1.notification.sent }) {
            sentNotifications[oldest.id] = nil
        }
    }

    /// `room`'s terminal acknowledged our `notify`: it has the notification.
    mutating func notificationDelivered(_ id: NotificationID, to room: RoomID, now: Double) {
        guard var record = sentNotifications[id], !record.delivered.contains(room) else { return }
        record.delivered.append(room)
        sentNotifications[id] = record
        out.append(.persistNotification(record))
        out.append(.event(.notificationDelivered(id, room: room)))
        firstRoundTried(id, room: room)
    }

    /// A recipient has it, or did not answer in time: once every recipient is one or the other,
    /// the sender hears how it went (all have it; some, the rest get it later; none).
    mutating func firstRoundTried(_ id: NotificationID, room: RoomID) {
        guard var tried = firstRound[id], let record = sentNotifications[id] else { return }
        tried.insert(room)
        guard tried.isSuperset(of: record.notification.recipients) else {
            firstRound[id] = tried
            return
        }
        firstRound[id] = nil
        let waiting = record.notification.recipients.filter { !record.delivered.contains($0) }
        out.append(.event(.notificationSent(id, delivered: record.delivered, waiting: waiting)))
        cue(waiting.isEmpty ? .notificationSent : record.delivered.isEmpty ? .notReached : .notificationPartly)
    }

    /// Someone at `room` acknowledged our notification: the event, and the tone with the room's name.
    mutating func receiveAcknowledgement(_ id: NotificationID, from room: RoomID, now: Double) {
        guard var record = sentNotifications[id] else {
            statistics.stale += 1
            return
        }
        guard !record.acknowledgedBy.contains(room) else { return }
        record.acknowledgedBy.append(room)
        if !record.delivered.contains(room) { record.delivered.append(room) }
        sentNotifications[id] = record
        out.append(.persistNotification(record))
        out.append(.event(.notificationAcknowledged(id, by: room)))
        let inCall = call?.isConnected == true
        let name = settings.directory[room]?.name ?? room.value
        out.append(.announce(Announcement(id: id, tone: .acknowledged, text: readAloud && !inCall ? name : nil,
                                          level: inCall ? .toneOnlyQuiet : .normal, priority: .normal)))
    }

    // MARK: recipient

    mutating func receiveNotification(_ n: StaffNotification, now: Double) {
        guard !receivedNotificationIDs.contains(n.id) else {
            statistics.stale += 1
            return
        }
        receivedNotificationIDs.insert(n.id)
        statistics.notificationsReceived += 1
        if receivedNotifications.count >= settings.limits.pendingNotices {
            // Bounded: the oldest waiting one stays in the history, unacknowledged.
            receivedNotifications.removeFirst()
            statistics.noticesDropped += 1
        }
        let held = mustHold(n.priority)
        let record = NotificationRecord(notification: n, direction: .incoming, received: wall(now),
                                        heard: held ? nil : wall(now), held: held)
        receivedNotifications.append(record)
        out.append(.persistNotification(record))
        out.append(.event(.notificationReceived(record)))
        if !held {
            present(record, reminder: false)
        } else if !doNotDisturb {
            // A normal one during a call: its tone, softly; read when the call ends.
            out.append(.announce(Announcement(id: n.id, tone: n.tone, text: nil, level: .toneOnlyQuiet, priority: n.priority)))
        }
    }

    /// Do-not-disturb holds back normal notifications (never urgent or emergency ones); so does a call.
    func mustHold(_ priority: NotificationPriority) -> Bool {
        priority == .normal && (doNotDisturb || call != nil)
    }

    /// Plays a notification here: its tone (or the reminder's), then its text when it is read
    /// aloud; against a call as its priority says.
    mutating func present(_ record: NotificationRecord, reminder: Bool) {
        let n = record.notification
        let level: AnnouncementLevel
        if call?.isConnected == true {
            switch n.priority {
            case .normal: level = .toneOnlyQuiet
            case .urgent: level = .overCall
            case .emergency: level = .callMuted
            }
        } else {
            level = .normal
        }
        let speak = n.readAloud && readAloud && level != .toneOnlyQuiet
        out.append(.announce(Announcement(id: n.id, tone: reminder ? .reminder : n.tone, text: speak ? n.spokenText : nil,
                                          level: level, priority: n.priority)))
    }

    /// Plays what was held back once nothing holds it any more.
    mutating func releaseHeldNotifications(now: Double) {
        for i in receivedNotifications.indices where receivedNotifications[i].held {
            guard !mustHold(receivedNotifications[i].notification.priority) else { continue }
            receivedNotifications[i].held = false
            receivedNotifications[i].heard = wall(now)
            let record = receivedNotifications[i]
            out.append(.persistNotification(record))
            out.append(.event(.notificationReleased(record.id)))
            present(record, reminder: false)
        }
    }

    /// Acknowledges the oldest heard notification, or all; false when none waits.
    mutating func acknowledgeNotifications(all: Bool, now: Double) -> Bool {
        let waiting = receivedNotifications.filter { !$0.held }
        guard !waiting.isEmpty else { return false }
        let chosen = all ? waiting : [waiting[0]]
        statistics.notificationsAcknowledged += chosen.count
        for var record in chosen {
            record.acknowledged = true
            receivedNotifications.removeAll { $0.id == record.id }
            out.append(.persistNotification(record))
            out.append(.event(.notificationAcknowledged(record.id, by: settings.room)))
            let sender = record.notification.sender
            queueDeferred(.notificationAcknowledged(record.id), for: sender)
            deliverNotices(to: sender, now: now)
        }
        out.append(.silenceAnnouncements(chosen.map(\.id)))
        if !receivedNotifications.contains(where: { !$0.held }) { lastNotificationReminder = nil }
        cue(.acknowledged)
        return true
    }

    mutating func setReadAloud(_ on: Bool) {
        guard on != readAloud else { return }
        readAloud = on
        out.append(.persistReadAloud(on))
        out.append(.event(.readAloudChanged(on)))
        cue(on ? .readAloudOn : .readAloudOff)
    }

    // MARK: timers

    /// The wall-clock time of the next notification reminder; nil while none is due (none heard
    /// and waiting, reminders off, or a call rings).
    var nextNotificationReminder: Double? {
        let every = settings.timing.notificationReminder
        guard every > 0, state != .ringingIncoming, state != .ringingOutgoing,
              let oldest = receivedNotifications.first(where: { !$0.held }) else { return nil }
        return max(oldest.heard ?? oldest.received ?? 0, lastNotificationReminder ?? -.infinity) + every
    }

    mutating func notificationTimers(now: Double) {
        // Held ones restored from the history, with nothing holding them now.
        if receivedNotifications.contains(where: \.held) { releaseHeldNotifications(now: now) }
        guard let due = nextNotificationReminder, wall(now) >= due else { return }
        lastNotificationReminder = wall(now)
        statistics.notificationReminders += 1
        for record in receivedNotifications where !record.held {
            present(record, reminder: true)
            out.append(.event(.notificationReminded(record.id)))
        }
    }

    // MARK: restart

    /// Takes up the history's notifications: those heard and not acknowledged are reminded and
    /// can be acknowledged; ours that some recipient does not have yet are kept for it.
    mutating func restoreNotifications(_ records: [NotificationRecord]) {
        for record in records {
            switch record.direction {
            case .incoming:
                receivedNotificationIDs.insert(record.id)
                if !record.acknowledged { receivedNotifications.append(record) }
            case .outgoing:
                keepSent(record)
                for room in record.notification.recipients where !record.delivered.contains(room) && settings.directory[room] != nil {
                    queueDeferred(.notify(record.notification), for: room)
                }
            }
        }
    }
}
