import Calls
import Control
import Foundation
import Posix
import Site
import Synchronization

/// SIGHUP: the configuration file is read again (with its site document, `TerminalConfiguration`). The keys whose schema entry says `.live` change
/// now (gains, echo switches, keys, lights, tones, speech), those that say `.betweenCalls` and the
/// room directory and buttons when no call runs (a call in progress keeps its rules), those that
/// say `.reopensAudio` by opening the audio devices again once no call runs. Everything else is
/// named as waiting for a restart (the frame size, sockets). A file with problems changes nothing.
extension Daemon {
    public struct ReloadOutcome: Sendable, Equatable {
        /// Keys ("mixer.mic_gain_db") and tables ("rooms") whose changes were applied.
        public var applied: [String] = []
        /// Keys and tables whose changes need `systemctl restart intercomd`.
        public var needRestart: [String] = []
        /// Calls settings (keys and tables) that wait for the running call to end.
        public var waitingForCallEnd: [String] = []
        /// Audio settings that open the devices again once no call runs (at once when none does).
        public var audioWaiting: [String] = []
        public var deferredUntilIdle: Bool { !waitingForCallEnd.isEmpty }
        /// The problems if the file could not be used (nothing was changed then).
        public var error: String?
        /// Settings the file names that could not be put in force (a WAV file not read, a
        /// voice espeak-ng refuses), each with its reason; the ones held stay.
        public var notApplied: [String] = []
        /// Why the site document on disk was refused (the one held stays in force, and is
        /// written back there).
        public var siteRefusal: String?

        public var summary: String {
            if let error { return "reload failed, configuration unchanged: \(error)" }
            var parts = [applied.isEmpty ? "nothing to apply" : "applied " + applied.joined(separator: ", ")]
            if !audioWaiting.isEmpty {
                parts.append("the audio devices open again once no call runs, for " + audioWaiting.joined(separator: ", "))
            }
            if deferredUntilIdle {
                parts.append("call settings wait for the running call to end: " + waitingForCallEnd.joined(separator: ", "))
            }
            if !needRestart.isEmpty { parts.append("restart needed for " + needRestart.joined(separator: ", ")) }
            if !notApplied.isEmpty { parts.append("not applied: " + notApplied.joined(separator: "; ")) }
            if let siteRefusal { parts.append(siteRefusal + "; the site document held stays") }
            return "reloaded: " + parts.joined(separator: "; ")
        }
    }

    /// `running` with the parts of `new` that a reload applies, and which keys those were.
    static func liveParts(of new: DaemonConfig, over running: DaemonConfig) -> (config: DaemonConfig, sections: [String]) {
        var (c, applied) = running.adopting(.live, from: new)
        // Calls: only when this room and its sockets stay (the engine checks the same); its
        // name and whom it may call may change.
        if running.callsEnabled, new.callsEnabled, new.room == running.room, ownSockets(new) == ownSockets(running) {
            var (candidate, keys) = c.adopting(.betweenCalls, from: new)
            candidate.rooms = new.rooms
            candidate.buttons = new.buttons
            candidate.groups = new.groups
            candidate.notifications = new.notifications
            if candidate.callSettings() != c.callSettings() {
                if c.rooms != new.rooms { keys.append("rooms") }
                if c.buttons != new.buttons { keys.append("buttons") }
                if c.groups != new.groups { keys.append("groups") }
                if c.notifications != new.notifications { keys.append("notifications") }
                c = candidate
                applied += keys
            }
        }
        return (c, applied)
    }

    /// Where this room's terminal is reached: what a running terminal cannot change.
    private static func ownSockets(_ c: DaemonConfig) -> [String]? {
        c.rooms[c.room.id].map { [$0.address, "\($0.signallingPort)", "\($0.mediaPort)"] }
    }

    /// The keys in which `new` differs from `running` beyond what a reload applies (now, between
    /// calls, or by opening the audio devices again).
    static func restartNeeded(_ new: DaemonConfig, running: DaemonConfig) -> [String] {
        liveParts(of: new, over: running).config.adopting(.reopensAudio, from: new).config.differingKeys(from: new)
    }

    /// Reads `path` again and applies what can change now (main thread).
    func reload(from path: String) -> ReloadOutcome {
        var outcome = ReloadOutcome()
        var new: DaemonConfig
        let version: UInt64
        do {
            let loaded = try TerminalConfiguration.load(path: path, keeper: site)
            new = loaded.config
            version = loaded.siteVersion
            outcome.siteRefusal = loaded.refusal
        } catch {
            outcome.error = "\(error)"
            // Tried once per version: the main loop does not try this one again.
            appliedSiteVersion = site?.version ?? 0
            return outcome
        }
        // The version joined in (a newer one kept meanwhile is applied at the next look); the
        // hellos say when.
        defer {
            appliedSiteVersion = version
            site?.applied(version)
            announceSite()
        }
        // Local mode's settings come from the command line as often as from the file.
        new.local = config.local
        let running = config
        var (live, sections) = Self.liveParts(of: new, over: running)
        outcome.applied = sections
        let liveNow = running.adopting(.live, from: new).1
        let chain = engine.microphoneChain
        chain.gain.gain.store(decibelsToGain(live.mixer.micGainDb))
        engine.mixer.speakerGain.store(decibelsToGain(live.mixer.speakerGainDb))
        chain.canceller.bypass.set(!live.echo.enabled)
        chain.howlGuard?.enabled.set(live.echo.enabled && live.echo.howlGuard)
        chain.loopCanceller?.enabled.set(live.echo.enabled && live.echo.loopCanceller)
        if live.callsEnabled, let service = calls?.service, live.callSettings() != running.callSettings(),
           !service.reconfigure(live.callSettings()) {
            outcome.applied = sections.filter(liveNow.contains)
            outcome.waitingForCallEnd = sections.filter { !liveNow.contains($0) }
        }
        // Approvals and revocations hold at once, in a call too: a revoked terminal is heard no more.
        if let site, let service = calls?.service { service.use(terminalKeys: site.terminalKeys) }
        if live.keys != running.keys || live.buttons.keys.sorted() != running.buttons.keys.sorted() {
            calls?.reconfigureKeys(live)
        }
        // Tones and speech: from the next tone and text on; what could not be read stays as it was.
        let tonesChanged = live.tones != running.tones || live.calls.chimeWav != running.calls.chimeWav
        let speechChanged = live.speech != running.speech
        if let calls, tonesChanged || speechChanged || live.textsReadHere() != running.textsReadHere() {
            let problems = calls.reconfigureSounds(live, tones: tonesChanged)
            if let problem = problems.tones {
                live.tones = running.tones
                live.calls.chimeWav = running.calls.chimeWav
                outcome.notApplied.append("tones: \(problem)")
            }
            if let problem = problems.speech {
                live.speech = running.speech
                outcome.notApplied.append("speech: \(problem)")
            }
            outcome.applied.removeAll { key in
                (problems.tones != nil && (key.hasPrefix("tones.") || key == "calls.chime_wav")) || (problems.speech != nil && key.hasPrefix("speech."))
            }
        }
        if live.lightsSettings() != running.lightsSettings() {
            do throws(SystemError) { try lights.apply(live.lightsSettings()) } catch { log.error("lights: \(error)") }
        }
        // The audio devices: opened again once no call runs (`reopenAudioWhenQuiet`); a later
        // reload that changes them back leaves nothing waiting.
        let (withAudio, audioKeys) = live.adopting(.reopensAudio, from: new)
        pendingAudio = audioKeys.isEmpty ? nil : PendingAudio(audio: withAudio.audio, realtime: withAudio.realtime, keys: audioKeys)
        outcome.needRestart = Self.restartNeeded(new, running: running)
        outcome.audioWaiting = audioKeys
        config = live
        return outcome
    }

    /// Tells the calls side what its hellos say of this terminal: the software and the site
    /// document held, with when it was applied.
    func announceSite() {
        guard let service = calls?.service else { return }
        if let site { site.announce(to: service) } else { service.announce(SiteAnnouncement(software: Software.version, site: nil, appliedAt: nil)) }
    }
}

/// The reloads since start, for `stats`: written on the main thread, read by the control thread.
final class ReloadHistory: Sendable {
    private let state = Mutex(DaemonStatistics.Reload.none)

    func record(_ outcome: Daemon.ReloadOutcome) {
        state.withLock { r in
            if let error = outcome.error {
                r.failed += 1
                r.lastError = error
            } else {
                r.count += 1
                r.applied = outcome.applied
                r.waitingForCallEnd = outcome.waitingForCallEnd
                r.restartNeeded = outcome.needRestart
                r.audioWaiting = outcome.audioWaiting
                r.notApplied = outcome.notApplied
            }
        }
    }

    /// The call ended and the calls side took the settings that waited for it.
    func callSettingsTaken() {
        state.withLock { r in if !r.waitingForCallEnd.isEmpty { r.waitingForCallEnd = [] } }
    }

    /// The devices were opened again for the audio settings that waited; `waiting` are those a
    /// later reload left waiting.
    func audioReopened(waiting: [String]) {
        state.withLock { r in
            r.audioWaiting = waiting
            r.audioReopens += 1
        }
    }

    var snapshot: DaemonStatistics.Reload { state.withLock { $0 } }
}
