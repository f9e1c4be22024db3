import Foundation

/// SIGHUP: the configuration file is read again. What can change while audio runs changes now:
/// the gains, the echo switches, and the room directory, buttons and call rules (between calls; a
/// call in progress keeps its rules). Everything else is named as waiting for a restart, because
/// it would mean reopening devices or sockets mid-call. A file with problems changes nothing.
extension Daemon {
    public struct ReloadOutcome: Sendable, Equatable {
        /// Sections whose changes were applied.
        public var applied: [String] = []
        /// Sections whose changes need `systemctl restart intercomd`.
        public var needRestart: [String] = []
        /// Calls settings that wait for the running call to end.
        public var deferredUntilIdle = false
        /// The problems if the file could not be used (nothing was changed then).
        public var error: String?

        public var summary: String {
            if let error { return "reload failed, configuration unchanged: \(error)" }
            var parts = [applied.isEmpty ? "nothing to apply" : "applied " + applied.joined(separator: ", ")]
            if deferredUntilIdle { parts.append("call settings wait for the running call to end") }
            if !needRestart.isEmpty { parts.append("restart needed for " + needRestart.joined(separator: ", ")) }
            return "reloaded: " + parts.joined(separator: "; ")
        }
    }

    /// `running` with the parts of `new` that a reload applies, and which sections those were.
    static func liveParts(of new: DaemonConfig, over running: DaemonConfig) -> (config: DaemonConfig, sections: [String]) {
        var c = running
        var sections: [String] = []
        if new.mixer.micGainDb != c.mixer.micGainDb || new.mixer.speakerGainDb != c.mixer.speakerGainDb {
            c.mixer.micGainDb = new.mixer.micGainDb
            c.mixer.speakerGainDb = new.mixer.speakerGainDb
            sections.append("mixer gains")
        }
        if new.echo.enabled != c.echo.enabled || new.echo.howlGuard != c.echo.howlGuard {
            c.echo.enabled = new.echo.enabled
            c.echo.howlGuard = new.echo.howlGuard
            sections.append("echo switches")
        }
        // Calls: only when this room and its sockets stay (the engine checks the same).
        if running.callsEnabled, new.callsEnabled, new.room == running.room,
           new.rooms[new.room.id] == running.rooms[running.room.id] {
            var candidate = c
            candidate.rooms = new.rooms
            candidate.buttons = new.buttons
            candidate.calls.autoAnswer = new.calls.autoAnswer
            candidate.calls.ringMs = new.calls.ringMs
            candidate.calls.answerTimeoutMs = new.calls.answerTimeoutMs
            candidate.calls.callerVoice = new.calls.callerVoice
            candidate.calls.multicastGroup = new.calls.multicastGroup
            if candidate.callSettings() != c.callSettings() {
                c = candidate
                sections.append("rooms, buttons and call rules")
            }
        }
        return (c, sections)
    }

    /// The sections in which `new` differs from `running` beyond what a reload applies.
    static func restartNeeded(_ new: DaemonConfig, running: DaemonConfig) -> [String] {
        let live = liveParts(of: new, over: running).config
        var out: [String] = []
        func compare<T: Equatable>(_ name: String, _ path: KeyPath<DaemonConfig, T>) {
            if live[keyPath: path] != new[keyPath: path] { out.append(name) }
        }
        compare("audio", \.audio); compare("realtime", \.realtime); compare("echo", \.echo)
        compare("mixer", \.mixer); compare("retry", \.retry); compare("log", \.log)
        compare("local", \.local); compare("network", \.network); compare("opus", \.opus)
        compare("jitter", \.jitter); compare("room", \.room); compare("rooms", \.rooms)
        compare("buttons", \.buttons); compare("calls", \.calls); compare("control", \.control); compare("security", \.security)
        compare("keys", \.keys)
        return out
    }

    /// Reads `path` again and applies what can change now (main thread).
    func reload(from path: String) -> ReloadOutcome {
        var outcome = ReloadOutcome()
        var new: DaemonConfig
        do {
            new = try DaemonConfig.load(path: path)
        } catch {
            outcome.error = "\(error)"
            return outcome
        }
        // Local mode's settings come from the command line as often as from the file.
        new.local = config.local
        let running = config
        let (live, sections) = Self.liveParts(of: new, over: running)
        outcome.applied = sections
        outcome.needRestart = Self.restartNeeded(new, running: running)
        let chain = engine.microphoneChain
        chain.gain.gain.store(decibelsToGain(live.mixer.micGainDb))
        engine.mixer.speakerGain.store(decibelsToGain(live.mixer.speakerGainDb))
        chain.canceller.bypass.set(!live.echo.enabled)
        chain.howlGuard?.enabled.set(live.echo.enabled && live.echo.howlGuard)
        if live.callsEnabled, let service = calls?.service, live.callSettings() != running.callSettings() {
            outcome.deferredUntilIdle = !service.reconfigure(live.callSettings())
        }
        config = live
        return outcome
    }
}
