import Calls
import Control
import Foundation

/// Readable text for people; `--json` prints the protocol's lines instead.
enum Render {
    static func reply(_ reply: ControlReply, to command: ControlCommand) -> String {
        switch reply {
        case .pong(let version):
            return "the daemon answers (control protocol \(version))"
        case .subscribed:
            return "subscribed"
        case .networkLoopback(let status):
            return status.result.map { Loopback.render($0, room: status.room ?? RoomID("unknown")!) } ?? "network loopback test \(status.state.rawValue)"
        case .loopback(let status):
            return status.result.map(Loopback.render) ?? "loopback test \(status.state.rawValue)"
        case .done:
            switch command {
            case .perform(.answer): return "answered"
            case .perform(.decline): return "declined"
            case .perform(.acknowledge(let all)): return all ? "all acknowledged" : "acknowledged"
            case .eraseHistory: return "history erased"
            default: return "hung up"
            }
        case .callPlaced(let id, let to):
            return "calling \(list(to)) (call \(id))"
        case .mute(let m):
            return "microphone \(m.microphone ? "muted" : "on"), speaker \(m.speaker ? "muted" : "on")"
        case .doNotDisturb(let on):
            return "do-not-disturb \(on ? "on" : "off")"
        case .readAloud(let on):
            return "reading aloud \(on ? "on" : "off")"
        case .notificationSent(let id, let to):
            return "notification \(id) sent to \(list(to))"
        case .status(let s):
            var lines = [
                "room            \(s.room) (\(s.name))",
                "do-not-disturb  \(s.doNotDisturb ? "on" : "off")",
                "microphone      \(s.mute.microphone ? "muted" : "on")",
                "speaker         \(s.mute.speaker ? "muted" : "on")",
            ]
            if let c = s.call {
                let side = c.direction == .outgoing ? "outgoing" : "incoming from \(c.caller)"
                lines.append("call            \(c.callID) \(side), \(c.connected ? "connected" : "not connected yet")")
                for p in c.participants { lines.append("  \(pad(p.room.value, 14)) \(status(p.status))") }
            } else {
                lines.append("call            none")
            }
            if let security = s.security { lines.append("security        \(Self.security(security))") }
            lines.append("missed calls    \(s.missedCalls == 0 ? "none waiting" : "\(s.missedCalls) not acknowledged")")
            lines.append("notifications   \(s.notifications == 0 ? "none waiting" : "\(s.notifications) not acknowledged"), read aloud \(s.readAloud ? "on" : "off")")
            for m in s.media {
                lines.append(String(format: "audio from      %@: %d packets, %d frames played, %.1f ms buffered", m.source, m.received, m.played, m.delayMs))
            }
            return lines.joined(separator: "\n")
        case .rooms(let d):
            let width = max(4, d.rooms.map(\.id.value.count).max() ?? 0)
            var lines = d.rooms.map { r in
                var flags = [r.presence.online ? "online" : "offline"]
                if r.presence.doNotDisturb { flags.append("do-not-disturb") }
                if r.presence.inCall { flags.append("in a call") }
                return "\(pad(r.id.value, width))  \(pad(r.name, 20))  \(flags.joined(separator: ", "))"
            }
            if lines.isEmpty { lines.append("no rooms in the directory") }
            if !d.buttons.isEmpty {
                lines.append("buttons:")
                lines += d.buttons.map { "  \($0.name): \(list($0.rooms))" + ($0.kind == .normal ? "" : " (\($0.kind.rawValue))") }
            }
            return lines.joined(separator: "\n")
        case .history(let entries, let notifications):
            guard !entries.isEmpty || !notifications.isEmpty else { return "no calls or notifications yet" }
            let lines = entries.map { ($0.started, history($0)) } + notifications.map { ($0.time, notification($0)) }
            return lines.sorted { $0.0 < $1.0 }.map(\.1).joined(separator: "\n")
        case .statistics(let s):
            return statistics(s)
        case .site(let o):
            return site(o)
        }
    }

    /// One line per terminal: software, site version and digest, when applied; who is behind.
    static func site(_ o: SiteOverview) -> String {
        let width = max(4, o.terminals.map(\.room.count).max() ?? 0)
        var lines = o.terminals.enumerated().map { k, t -> String in
            guard t.online else { return "\(pad(t.room, width))  offline" }
            guard let software = t.software else { return "\(pad(t.room, width))  online, announces nothing (older software)" }
            let document = t.siteVersion.map { "site version \($0) (\(t.digest ?? "-"))" } ?? "no site document"
            let applied = t.appliedAt.map { ", applied \(timestamp($0))" } ?? ""
            return "\(pad(t.room, width))  \(pad(software, 12))  \(document)\(applied)\(t.behind ? "  BEHIND" : "")\(t.health.map { "; " + health($0) } ?? "")\(k == 0 ? "  (this terminal)" : "")"
        }
        let behind = o.terminals.filter(\.behind).map(\.room)
        lines.append(o.newestVersion.map { "newest site version \($0); " + (behind.isEmpty ? "no terminal is behind" : "behind: \(behind.joined(separator: ", "))") }
                     ?? "no terminal holds a site document")
        return lines.joined(separator: "\n")
    }

    /// A terminal's health message in words: its faults first, else "fine".
    static func health(_ h: TerminalHealth) -> String {
        var words: [String] = []
        if h.audio == .unavailable { words.append("SOUND DEVICES NOT WORKING") }
        if h.selfTest == .failed { words.append("SELF-TEST FAILED") }
        if words.isEmpty { words.append(h.audio == .off ? "no sound (audio off)" : "fine") }
        return words.joined(separator: ", ") + ", \(h.xruns) xruns, up \(h.uptimeSeconds / 3600) h \(h.uptimeSeconds % 3600 / 60) min"
    }

    static func statistics(_ s: DaemonStatistics) -> String {
        let a = s.audio
        var lines = [
            "audio           \(a.running ? "running" : "not running"), \(a.frames) frames, \(a.sessions) sessions; capture \(a.captureDevice), playback \(a.playbackDevice)",
            "xruns           \(a.xruns) (capture \(a.captureXruns), playback \(a.playbackXruns)); capture lost: \(a.captureGapFrames) frames (\(a.staleCaptureFrames) stale), capture delay \(String(format: "%.1f", a.captureDelayMs)) ms",
            String(format: "echo canceller  ERLE %.1f dB, echo delay %@, %d resets, %d realignments", a.echoReturnLossEnhancementDB,
                   a.echoDelayMs.map { String(format: "%.1f ms", $0) } ?? "unmeasured", a.echoCancellerResets, a.echoCancellerRealignments),
            String(format: "processing      %.2f ms per frame at most", a.processMaxMs),
            "clipped         \(a.microphoneClippedSamples) samples sent, \(a.speakerClippedSamples) played",
        ]
        if let howls = a.howls {
            lines.append(String(format: "howl guard      %d loops broken, -%.1f dB now", howls, a.howlGuardAttenuationDB ?? 0))
        }
        if let removed = a.loopRemovedDB {
            lines.append(String(format: "loop canceller  %@, engaged %d times; %.1f dB removed, %d sent frames late",
                                (a.loopEngaged ?? false) ? "engaged" : "idle", a.loopEngagements ?? 0, removed, a.loopLateFrames ?? 0))
        }
        if let n = s.network {
            lines.append("network         sent \(n.sent)\(n.sentPeakDBFS.map { String(format: ", peak %.1f dBFS", $0) } ?? "") (\(n.sendErrors) errors), received \(n.accepted) of \(n.datagrams) datagrams, \(n.malformed) malformed, \(n.notRouted) not routed")
            if let o = n.opus {
                lines.append(String(format: "opus            %@ %d bit/s%@%@, look-ahead %.1f ms", o.application, o.bitrate,
                                    o.fec ? " FEC" : "", o.dtx ? " DTX" : "", o.lookaheadMs))
            }
            let r = n.srtp
            lines.append("srtp            \(r.authenticated) authenticated, \(r.unauthenticated) unauthenticated, \(r.replayed) replayed, \(r.failed) failed; \(r.protectErrors) not protected")
            for st in n.streams {
                lines.append(String(format: "  stream %08x from %@: delay %.1f ms (target %.1f), %d received, %d played, %d concealed, %d late, %d underruns, %d inserted, %d dropped, %d new timelines, drift %.0f ppm (trim %.0f, slewed %.1f ms, jumped in pauses %.1f ms, path shifted %.1f ms)",
                                    st.ssrc, st.source, st.delayMs, st.targetMs, st.received, st.played, st.concealed, st.late, st.underruns,
                                    st.inserted, st.dropped, st.newTimelines, st.driftPPM, st.trimPPM, st.slewedMs, st.pauseJumpedMs, st.pathShiftMs))
            }
        } else {
            lines.append("network         off")
        }
        if let c = s.calls {
            lines.append("calls           \(c.retransmissions) retransmissions, \(c.unreachable) unreachable, \(c.decodeErrors) undecodable, \(c.refused.total) refused (\(c.refused.authentication) authentication, \(c.refused.replay) replay), sealed by \(c.protection.rawValue)\(c.awaitingSession > 0 ? ", \(c.awaitingSession) held until a session was heard" : ""); store: \(c.storeWrites) writes, \(c.storeFailures) failed")
            lines.append("media to        \(c.mediaTo.isEmpty ? "nobody" : c.mediaTo.joined(separator: ", "))")
            if c.brokenByEmergency > 0 { lines.append("emergency       \(c.brokenByEmergency) calls left for an emergency call") }
            let ended = c.ended.map { "\($0.count) \($0.direction.rawValue) \($0.outcome.rawValue.replacingOccurrences(of: "_", with: " "))" }
            lines.append("calls ended     \(ended.isEmpty ? "none" : ended.joined(separator: ", ")); \(c.missedWaiting) missed waiting, \(c.missedReminders) reminders")
            let online = c.online.sorted { $0.key < $1.key }
            lines.append("rooms online    \(online.filter(\.value).map(\.key).joined(separator: ", "))\(online.contains { !$0.value } ? "; offline: " + online.filter { !$0.value }.map(\.key).joined(separator: ", ") : "")")
            if !c.moved.isEmpty {
                lines.append("moved           " + c.moved.sorted { $0.key < $1.key }.map { "\($0.key) is at \($0.value)" }.joined(separator: ", ") + " (not its directory address)")
            }
            let no = c.notifications
            lines.append("notices         \(no.sent) sent, \(no.received) received, \(no.acknowledged) acknowledged here, \(no.pending) pending, \(no.reminders) reminders")
            let sp = c.speech
            lines.append(String(format: "notifications   %d played, %d read aloud (%d from the cache, %d failed); last synthesis %.0f ms, speech %.0f ms after its tone",
                                sp.announcements, sp.spoken, sp.cached, sp.failures, sp.lastSynthesisMs, sp.lastGapMs))
        }
        let r = s.reload
        var reload = "\(r.count) reloads, \(r.failed) refused"
        if r.count > 0 {
            reload += "; last applied: \(r.applied.isEmpty ? "nothing" : r.applied.joined(separator: ", "))"
            if !r.waitingForCallEnd.isEmpty { reload += "; waiting for the call to end: " + r.waitingForCallEnd.joined(separator: ", ") }
            if !r.restartNeeded.isEmpty { reload += "; restart needed: " + r.restartNeeded.joined(separator: ", ") }
            if !r.notApplied.isEmpty { reload += "; not applied: " + r.notApplied.joined(separator: "; ") }
        }
        if !r.audioWaiting.isEmpty { reload += "; audio devices open again once no call runs, for " + r.audioWaiting.joined(separator: ", ") }
        if r.audioReopens > 0 { reload += "; audio devices opened again \(r.audioReopens) times" }
        if let e = r.lastError { reload += "; last refused: \(e)" }
        lines.append("configuration   " + reload)
        if let site = s.site {
            var line = "site            \(site.id) version \(site.version)"
            if let t = site.terminal {
                line += "; this terminal \(t.key): \(t.standing.rawValue)" + (t.room.map { " for \($0)" } ?? "")
                if let code = t.enrolmentCode { line += ", enrolment code \(code)" }
            }
            if let administrator = site.administrator { line += "; administrator key \(administrator)" }
            lines.append(line)
        }
        if let t = s.selfTest {
            var line = "self-test       \(t.runs) run, \(t.failures) failed, \(t.postponed) waited for quiet, \(t.aborted) cut short"
            if let last = t.last {
                let when = ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: last.at))
                line += "; last \(when): " + (last.passed
                    ? "passed, round trip \(String(format: "%.1f", last.roundTripMs ?? 0)) ms, chirp at \(String(format: "%.0f", last.echoLevelDb)) dBFS"
                    : "FAILED: " + last.problems.joined(separator: "; "))
            }
            lines.append(line)
        }
        return lines.joined(separator: "\n")
    }

    static func event(_ event: ControlEvent) -> String {
        let text: String
        switch event {
        case .eventsLost(let n):
            text = "\(n) events lost (the daemon's queue was full)"
        case .call(let e):
            switch e {
            case .incomingCall(let id, let from, let participants, let kind):
                text = "incoming \(kindWord(kind)) \(id) from \(from)" + (participants.count > 1 ? " (to \(list(participants)))" : "")
            case .outgoingCall(let id, let to, let kind): text = "\(kind == .announcement ? "announcing to" : "calling") \(list(to)) (\(kindWord(kind)) \(id))"
            case .participantStatus(let id, let room, let s): text = "call \(id): \(room) \(status(s))"
            case .connected(let id): text = "call \(id): connected"
            case .callEnded(let id, let outcome): text = "call \(id) ended: \(outcome.rawValue.replacingOccurrences(of: "_", with: " "))"
            case .muteChanged(let room, let m):
                text = "\(room): microphone \(m.microphone ? "muted" : "on"), speaker \(m.speaker ? "muted" : "on")"
            case .presenceChanged(let room, let p):
                text = "\(room) \(p.online ? "online" : "offline")" + (p.doNotDisturb ? ", do-not-disturb" : "") + (p.inCall ? ", in a call" : "")
            case .doNotDisturbChanged(let on): text = "do-not-disturb \(on ? "on" : "off")"
            case .historyAdded(let entry): text = "history: " + history(entry)
            case .missedAcknowledged(let ids): text = "missed call\(ids.count == 1 ? "" : "s") acknowledged: \(ids.map(\.description).joined(separator: ", "))"
            case .historyErased: text = "history erased"
            case .notificationReceived(let r):
                text = "notification \(r.id) from \(r.notification.sender): \(r.notification.label) (\(r.notification.priority.rawValue))" + (r.held ? ", held back" : "")
            case .notificationReleased(let id): text = "notification \(id): heard now"
            case .notificationDelivered(let id, let room): text = "notification \(id): \(room) has it"
            case .notificationSent(let id, let delivered, let waiting):
                text = "notification \(id): " + (waiting.isEmpty ? "every recipient has it" : delivered.isEmpty ? "reached nobody yet, kept for \(list(waiting))" : "\(list(delivered)) have it, kept for \(list(waiting))")
            case .notificationAcknowledged(let id, let by): text = "notification \(id) acknowledged by \(by)"
            case .notificationReminded(let id): text = "notification \(id) reminded"
            case .readAloudChanged(let on): text = "reading aloud \(on ? "on" : "off")"
            }
        }
        return "\(clock()) \(text)"
    }

    static func history(_ e: HistoryEntry) -> String {
        let who = e.direction == .incoming ? "from \(e.caller)" : "to \(list(e.participants.map(\.room)))"
        var outcome = e.outcome.rawValue.replacingOccurrences(of: "_", with: " ")
        if let reason = e.reason { outcome += " (\(reason.rawValue.replacingOccurrences(of: "_", with: " ")))" }
        if e.awaitsAcknowledgement { outcome += ", not acknowledged" }
        let seconds = Int((e.ended - e.started).rounded())
        let kind = e.callKind == .normal ? "" : "\(kindWord(e.callKind)) "
        return "\(timestamp(e.started))  \(pad(e.direction.rawValue, 8))  \(kind)\(who)  \(outcome), \(seconds) s"
    }

    static func notification(_ r: NotificationRecord) -> String {
        let n = r.notification
        var state: String
        if r.direction == .outgoing {
            let waiting = n.recipients.filter { !r.delivered.contains($0) }
            state = waiting.isEmpty ? "delivered" : "waiting for \(list(waiting))"
            if !r.acknowledgedBy.isEmpty { state += ", acknowledged by \(list(r.acknowledgedBy))" }
        } else {
            state = r.acknowledged ? "acknowledged" : r.held ? "held back" : "not acknowledged"
        }
        let who = r.direction == .incoming ? "from \(n.sender)" : "to \(list(n.recipients))"
        return "\(timestamp(r.time))  \(pad(r.direction.rawValue, 8))  notification \"\(n.label)\" (\(n.priority.rawValue)) \(who)  \(state)"
    }

    /// How signalling is sealed, in the words an installer reads.
    static func security(_ mode: SignalProtectionMode) -> String {
        switch mode {
        case .clear: "LAB MODE: signalling and media in the clear, anyone on the network can take part"
        case .unkeyed: "no key yet: nothing sent or taken on the network until the site approves this terminal"
        case .siteKey: "sealed with the site key"
        case .terminalKeys: "sealed per pair of terminals (terminal keys)"
        }
    }

    static func status(_ s: ParticipantStatus) -> String {
        switch s {
        case .ringing: "ringing"
        case .connected: "connected"
        case .declined(let r): "declined (\(r.rawValue.replacingOccurrences(of: "_", with: " ")))"
        case .unavailable: "unavailable"
        case .left: "left"
        }
    }

    static func clock() -> String { format(Date(), "HH:mm:ss") }
    static func timestamp(_ seconds: Double) -> String { format(Date(timeIntervalSince1970: seconds), "yyyy-MM-dd HH:mm:ss") }

    private static func format(_ date: Date, _ pattern: String) -> String {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.dateFormat = pattern
        return f.string(from: date)
    }

    static func kindWord(_ kind: CallKind) -> String {
        switch kind {
        case .normal: "call"
        case .emergency: "emergency call"
        case .announcement: "announcement"
        }
    }

    private static func list(_ rooms: [RoomID]) -> String { rooms.map(\.value).joined(separator: ", ") }
    private static func pad(_ s: String, _ width: Int) -> String { s.count >= width ? s : s + String(repeating: " ", count: width - s.count) }
}
