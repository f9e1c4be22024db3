// The callee's side: an invite rings (or is refused), opens after the ring time, ends or is left.
// An emergency call opens at once, ending whatever normal call this room is in; an announcement
// opens after the chime, whatever auto-answer says, and only listens.

extension CallEngine {
    mutating func receiveInvite(_ id: CallID, from caller: RoomID, participants: [RoomID], media: InviteMedia,
                                kind: CallKind, messageID: UInt32, now: Double) {
        let me = settings.room
        guard participants.contains(me), !endedCalls.contains(id), call?.id != id else {
            statistics.stale += 1
            return
        }
        if let c = call, c.role == .callee, c.caller == caller {
            // A caller has one call at a time: its new invite means the old call is over there.
            finishCall(c.isConnected ? .finished : .missed, myStatus: c.isConnected ? .connected : .unavailable, now: now)
        }
        let invited = participants.map { Participant(room: $0, status: .ringing) }
        // An emergency call breaks into any other call; only another emergency call keeps it out.
        let breaksIn = kind == .emergency && call.map { $0.kind != .emergency } ?? false
        let refusal: (DeclineReason, CallOutcome)? =
            if !settings.audio || !settings.permissions.allows(caller: caller, callee: me) { (.notPermitted, .declined) }
            // The person here did not get the call: for them it is a missed call. An
            // announcement that passed by is not one (there is nobody to call back).
            else if doNotDisturb, kind != .emergency { (.doNotDisturb, kind == .announcement ? .declined : .missed) }
            else if call != nil, !breaksIn { (.busy, kind == .announcement ? .declined : .missed) }
            else { nil }
        if let (reason, outcome) = refusal {
            send(.decline(id, reason), to: caller, now: now)
            endedCalls.insert(id)
            var entry = invited
            if let i = entry.firstIndex(where: { $0.room == me }) { entry[i].status = .declined(reason) }
            record(HistoryEntry(callID: id, direction: .incoming, caller: caller, participants: entry,
                                outcome: outcome, reason: reason, started: wall(now), ended: wall(now), kind: kind))
            return
        }
        if breaksIn { leaveForEmergency(now: now) }
        var c = CallSession(id: id, role: .callee, kind: kind, caller: caller, participants: invited, started: now)
        c.invite = media
        c.inviteMessageID = messageID
        c.lastHeard[caller] = now
        let autoAnswer = settings.autoAnswer || kind != .normal
        c.ringDeadline = autoAnswer ? now + (kind == .emergency ? 0 : settings.timing.ringTime) : nil
        call = c
        out.append(.event(.incomingCall(id, from: caller, participants: participants, kind: kind)))
        if kind == .emergency {
            // Heard whatever the room set: the speaker opens, the call opens with its own tone.
            if mute.speaker { setMute(MuteState(microphone: mute.microphone, speaker: false), now: now) }
            acceptIncoming(now: now)
            return
        }
        out.append(.ring(autoAnswer ? .chimeOnce : .chimeRepeating))
        if autoAnswer, settings.timing.ringTime <= 0 { acceptIncoming(now: now) }
    }

    /// An emergency call arrives during a normal call or announcement: this room's part of it
    /// ends, and the other side is told as if it hung up (a caller ends the call for every callee).
    mutating func leaveForEmergency(now: Double) {
        guard let c = call else { return }
        statistics.callsBrokenByEmergency += 1
        tellOtherSide(c, now: now)
        switch c.role {
        case .caller: finishCall(c.isConnected ? .finished : .notReached, quietly: true, now: now)
        case .callee:
            finishCall(c.isConnected ? .finished : .missed, myStatus: c.isConnected ? .left : .unavailable, quietly: true,
                       now: now)
        }
    }

    /// The ring time is over (or the person answered): stop the chime, open the audio.
    mutating func acceptIncoming(now: Double) {
        guard var c = call, c.role == .callee, !c.isConnected else { return }
        c.ringDeadline = nil
        c.connectedAt = now
        c.setStatus(.connected, of: settings.room)
        c.ownKey = mediaKeySource?.newKey()
        call = c
        out.append(.ring(.off))
        send(.accept(c.id, mediaPort: settings.media.port, key: c.ownKey), to: c.caller, now: now)
        out.append(.event(.connected(c.id)))
        out.append(.cue(c.kind == .emergency ? .emergencyCall : .connected, quiet: false))
        updateMediaPlan()
        if mute != MuteState() { send(.mute(c.id, mute), to: c.caller, now: now) }
    }

    mutating func answer(command: CallCommand, now: Double) {
        guard let c = call, c.role == .callee, !c.isConnected else {
            out.append(.rejected(command, .nothingToAnswer))
            return
        }
        acceptIncoming(now: now)
    }

    /// Refuses the ringing call: the caller sees it declined (refused), this room keeps it as declined.
    mutating func decline(command: CallCommand, now: Double) {
        guard let c = call, c.role == .callee, !c.isConnected else {
            out.append(.rejected(command, .nothingToDecline))
            return
        }
        send(.decline(c.id, .refused), to: c.caller, now: now)
        finishCall(.declined, reason: .refused, myStatus: .declined(.refused), cue: .callEnded, now: now)
    }

    mutating func receiveEnd(_ id: CallID, from sender: RoomID, now: Double) {
        guard let c = call, c.role == .callee, c.id == id, sender == c.caller else {
            statistics.stale += 1
            // An end overtaking its invite: the invite, when it comes, is then ignored.
            endedCalls.insert(id)
            return
        }
        finishCall(c.isConnected ? .finished : .missed, myStatus: c.isConnected ? .connected : .unavailable, now: now)
    }
}
