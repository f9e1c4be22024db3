// The caller's side: placing a call, callees answering, declining, leaving, hanging up.

extension CallEngine {
    mutating func placeCall(to targets: [RoomID], kind: CallKind = .normal, command: CallCommand, now: Double) {
        var rooms: [RoomID] = []
        for room in targets where !rooms.contains(room) { rooms.append(room) }
        let rejection: CommandRejection? =
            if rooms.isEmpty { .noTargets }
            else if rooms.contains(settings.room) { .cannotCallSelf }
            else if let unknown = rooms.first(where: { settings.directory[$0] == nil }) { .unknownRoom(unknown) }
            else if (CallSettings.largestCallMessage(from: settings.room, to: rooms, voice: settings.callerVoice) ?? .max) > SignalCodec.maxDatagramBytes { .tooManyTargets }
            // Staff in a normal call press the emergency key: that call ends, the emergency goes out.
            else if let c = call, kind != .emergency || c.kind == .emergency { .alreadyInCall }
            else { nil }
        if let rejection {
            out.append(.rejected(command, rejection))
            return
        }
        if call != nil { leaveForEmergency(now: now) }
        let id = newCallID()
        let me = settings.room
        let participants = rooms.map {
            Participant(room: $0, status: settings.permissions.allows(caller: me, callee: $0) ? .ringing : .declined(.notPermitted))
        }
        var c = CallSession(id: id, role: .caller, kind: kind, caller: me, participants: participants, started: now)
        c.ownKey = mediaKeySource?.newKey()
        call = c
        out.append(.event(.outgoingCall(id, to: rooms, kind: kind)))
        let invite = SignalMessage.invite(id, participants: rooms, media: InviteMedia(callerMedia: settings.media,
                                                                                      voice: settings.callerVoice, key: c.ownKey), kind: kind)
        for p in participants {
            out.append(.event(.participantStatus(id, room: p.room, status: p.status)))
            if p.status == .ringing { send(invite, to: p.room, now: now) }
        }
        if participants.contains(where: { $0.status == .ringing }) { out.append(.ring(.ringback)) }
        endIfNobodyRemains(now: now)
    }

    mutating func newCallID() -> CallID {
        while true {
            let id = CallID(random.next())
            if id.value != 0, !endedCalls.contains(id) { return id }
        }
    }

    mutating func hangUp(command: CallCommand, now: Double) {
        guard let call else {
            out.append(.rejected(command, .noCall))
            return
        }
        tellOtherSide(call, now: now)
        switch call.role {
        case .caller: finishCall(call.isConnected ? .finished : .notReached, cue: .callEnded, now: now)
        case .callee: finishCall(call.isConnected ? .finished : .declined, myStatus: .left, cue: .callEnded, now: now)
        }
    }

    /// This room leaves `call`: a caller sends end to every callee still in it, a callee leave to the caller.
    mutating func tellOtherSide(_ call: CallSession, now: Double) {
        switch call.role {
        case .caller:
            for p in call.participants where !call.endSent.contains(p.room) {
                switch p.status {
                // An unavailable callee may have got the invite after all (its acks lost).
                case .ringing, .connected, .unavailable: send(.end(call.id), to: p.room, now: now)
                case .declined, .left: break
                }
            }
        case .callee:
            send(.leave(call.id), to: call.caller, now: now)
        }
    }

    mutating func receiveAccept(_ id: CallID, from sender: RoomID, port: UInt16, key: MediaKey?, messageID: UInt32, now: Double) {
        guard var c = call, c.role == .caller, c.id == id else {
            statistics.stale += 1
            // It answered a call we already ended and may have missed our end.
            if endedCalls.contains(id) { send(.end(id), to: sender, now: now) }
            return
        }
        // Left and declined are final; unavailable is not (its acks may have been lost).
        guard let status = c.status(of: sender), status == .ringing || status == .unavailable,
              !c.endSent.contains(sender), let signalling = signalling(of: sender)
        else {
            statistics.stale += 1
            return
        }
        deferred.removeAll { d in
            guard d.room == sender, case .missedCall(let n) = d.message else { return false }
            return n.callID == id
        }
        c.setStatus(.connected, of: sender)
        c.calleeMedia[sender] = signalling.with(port: port)
        c.calleeKeys[sender] = key
        c.acceptIDs[sender] = messageID
        c.lastHeard[sender] = now
        let first = c.connectedAt == nil
        if first { c.connectedAt = now }
        call = c
        out.append(.event(.participantStatus(id, room: sender, status: .connected)))
        if first {
            out.append(.event(.connected(id)))
            out.append(.ring(.off))
            out.append(.cue(.connected, quiet: false))
            if let missed = c.answersMissed { acknowledge([missed], confirm: false) }
        }
        updateMediaPlan()
        if mute != MuteState() { send(.mute(id, mute), to: sender, now: now) }
    }

    mutating func receiveDecline(_ id: CallID, from sender: RoomID, reason: DeclineReason, now: Double) {
        guard let c = call, c.role == .caller, c.id == id,
              let status = c.status(of: sender), status == .ringing || status == .unavailable
        else {
            statistics.stale += 1
            return
        }
        calleeGone(sender, status: .declined(reason), now: now)
    }

    mutating func receiveLeave(_ id: CallID, from sender: RoomID, now: Double) {
        guard let c = call, c.role == .caller, c.id == id, let status = c.status(of: sender),
              status == .ringing || status == .connected || status == .unavailable
        else {
            statistics.stale += 1
            return
        }
        calleeGone(sender, status: .left, now: now)
    }

    mutating func inviteUnreachable(_ id: CallID, room: RoomID, now: Double) {
        guard let c = call, c.role == .caller, c.id == id, c.status(of: room) == .ringing else { return }
        queueNotice(MissedCallNotice(callID: id, caller: settings.room, participants: c.participants.map(\.room),
                                     started: wall(c.started)), for: room)
        calleeGone(room, status: .unavailable, now: now)
    }

    /// A callee is out of the call (declined, left, unavailable); the call ends when none remains.
    mutating func calleeGone(_ room: RoomID, status: ParticipantStatus, now: Double) {
        guard var c = call, c.role == .caller, c.status(of: room) != nil else { return }
        c.setStatus(status, of: room)
        c.calleeMedia[room] = nil
        c.calleeKeys[room] = nil
        c.lastHeard[room] = nil
        call = c
        out.append(.event(.participantStatus(c.id, room: room, status: status)))
        updateMediaPlan()
        if c.isConnected, !c.remaining.isEmpty { cue(.participantLeft) }
        endIfNobodyRemains(now: now)
    }

    mutating func endIfNobodyRemains(now: Double) {
        guard let c = call, c.role == .caller, c.remaining.isEmpty else { return }
        finishCall(c.isConnected ? .finished : .notReached, now: now)
    }

    /// A hello names the call its sender is in. Once it was sent after the sender joined our call
    /// (its id is after the invite or accept) and names another call or none, the sender dropped
    /// ours (e.g. our end or its leave was lost for good).
    mutating func checkPeerStillInCall(_ sender: RoomID, helloID: UInt32, helloCall: CallID?, now: Double) {
        guard let c = call, helloCall != c.id else { return }
        switch c.role {
        case .callee:
            guard sender == c.caller, isAfter(helloID, c.inviteMessageID) else { return }
            finishCall(c.isConnected ? .finished : .missed, myStatus: c.isConnected ? .connected : .unavailable, now: now)
        case .caller:
            guard c.status(of: sender) == .connected, let accepted = c.acceptIDs[sender], isAfter(helloID, accepted)
            else { return }
            calleeGone(sender, status: .left, now: now)
        }
    }
}
