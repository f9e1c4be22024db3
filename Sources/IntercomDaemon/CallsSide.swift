import AudioPipeline
import Calls
import CallStore
import Foundation
import Frames
import Posix
import SiteSecurity
import Keys
import Logging
import SignalTools
import Transport

/// Everything calls add to the daemon when `[room] id` is set: the history and state files, the
/// calls thread (`CallService`) and the key reader. Media goes through the network side's routes;
/// the tones are `TerminalSounds`, fixed mixer inputs made before the mixer exists (a reload swaps their sounds). The control socket is the
/// daemon's (`DaemonControl` hands calls commands to the service).
final class CallsSide: Service, @unchecked Sendable {
    // @unchecked: built and started/stopped from the main thread.
    var serviceName: String { "calls" }
    let service: CallService
    let announcer: Announcer
    private let sounds: TerminalSounds
    private var keySettings: KeyReaderSettings?
    /// The button names in the order `call:N` counts them: every configured button, also one a
    /// site has for this room alone, which the engine then refuses.
    private var buttonNames: [String]
    private var keys: KeyReader?
    private let log: Logger
    /// This terminal's enrolment code read aloud: a tone, then the digits twice, for the installer
    /// to write down (docs/identity.md); nil without a site.
    private let enrolmentSpeech: Announcement?

    init(config: DaemonConfig, routes: NetworkLoop, microphone: MicrophoneGain, mixer: Mixer, sounds: TerminalSounds,
         callInputs: [MixerInput], site: SiteKeeper?, logger: Logger) throws {
        log = logger
        self.sounds = sounds
        enrolmentSpeech = site.map { s in
            let code = s.identity.enrolmentCode(site: s.siteID).spoken
            // Its own id: no notification's, so acknowledging one never cuts it.
            return Announcement(id: NotificationID(0), tone: .gong, text: "\(code). \(code).", level: .normal, priority: .normal)
        }
        let settings = config.callSettings()
        let texts = config.speech.prepareAtStart ? config.textsReadHere() : []
        announcer = try Announcer(sounds: sounds, speech: config.speech, sampleRate: config.audio.sampleRate, callInputs: callInputs,
                              prepare: texts, logger: logger)
        let c = config.calls
        let history = try HistoryStore(path: c.historyPath, capacity: c.historyLimit,
                                       maxAge: c.historyMaxAgeDays == 0 ? nil : config.testing.scaled(Double(c.historyMaxAgeDays) * 86400))
        if let problem = history.loadProblem { logger.warning("calls: history \(c.historyPath): \(problem); starting a new one") }
        let state = try StateStore(path: c.statePath, default: TerminalState(doNotDisturb: c.doNotDisturb))
        if let problem = state.loadProblem { logger.warning("calls: state \(c.statePath): \(problem); using the defaults") }
        let port = settings.directory[settings.room]!.signalling.port
        var seal: SignalSeal?
        var siteKey: SiteKey?
        if !config.security.siteKey.isEmpty {
            do {
                let key = try SiteKey(path: config.security.siteKey)
                seal = SignalSeal(siteKey: key, room: settings.room.value, knownRooms: Set(settings.directory.keys.map(\.value)))
                siteKey = key
            } catch {
                throw ConfigError(source: "configuration", issues: [ConfigIssue(key: "security.site_key", problem: error.description)])
            }
        }
        let lab = config.security.mode == .lab
        if lab {
            logger.warning("calls: LAB MODE (security.mode = \"lab\"): with no key, signalling and media go in the clear and anyone on the network can call, listen and be heard; never in a practice")
        } else if seal == nil, site?.terminalKeys.isEmpty ?? true {
            logger.warning("calls: no site key (security.site_key) and no terminal keys approved: nothing is sent or taken on the network until the site approves this terminal (docs/identity.md)")
        }
        // Under terminal keys each call's media keys travel in its sealed signalling; before,
        // they derive from the site key; with neither (lab mode only), media is in the clear.
        let mediaKeys = MediaKeys(siteKey: siteKey, room: settings.room, ssrc: routes.sender?.ssrc ?? 0)
        service = try CallService(settings: settings, signalling: IPv4Endpoint(address: 0, port: port), routes: routes,
                                  microphone: microphone, mixer: mixer, sounds: sounds, announcer: announcer, history: history,
                                  state: state, siteSeal: seal, lab: lab,
                                  terminal: site.map { SignalProtection.Terminal(identity: $0.terminal, boot: $0.boot) },
                                  mediaKeys: mediaKeys, timeScale: config.testing.timeScale, logger: logger)
        buttonNames = config.buttons.keys.sorted()
        keySettings = Self.keySettings(config)
        // Before the calls thread starts: its first hellos are sealed as the document says.
        service.use(terminalKeys: site?.terminalKeys ?? [:])
    }

    private static func keySettings(_ config: DaemonConfig) -> KeyReaderSettings? {
        let k = config.keys
        return k.device.isEmpty ? nil : KeyReaderSettings(path: k.device, map: config.keyMap(), debounce: k.debounce, longPress: k.longPress)
    }

    func start() throws(SystemError) {
        try announcer.start()
        try service.start()
        startKeys()
    }

    /// A reload changed the keys' map or timing, or the buttons they count (main thread): the
    /// reader starts again with them, between two presses; a key held across it is not seen.
    func reconfigureKeys(_ config: DaemonConfig) {
        keys?.stop()
        keys = nil
        keySettings = Self.keySettings(config)
        buttonNames = config.buttons.keys.sorted()
        startKeys()
    }

    /// A reload changed the tones, the chime, `[speech]` or the texts read here (main thread):
    /// they sound so from the next tone and text on; a call goes on. Returns what could not be
    /// applied and stays as it was (a WAV file not read, a voice espeak-ng refuses).
    func reconfigureSounds(_ config: DaemonConfig, tones: Bool) -> (tones: String?, speech: String?) {
        var problems: (tones: String?, speech: String?) = (nil, nil)
        if tones {
            do { try sounds.apply(config) } catch { problems.tones = "\(error)" }
        }
        let texts = config.speech.prepareAtStart ? config.textsReadHere() : []
        // The same voice keeps its cache: only new texts are synthesized.
        if let refusal = announcer.apply(config.speech, prepare: texts) { problems.speech = "\(refusal)" }
        return problems
    }

    private func startKeys() {
        guard let keySettings else { return }
        let service = service, log = log, announcer = announcer, enrolmentSpeech = enrolmentSpeech
        let buttons = buttonNames
        do {
            keys = try KeyReader(settings: keySettings, onPress: { press in
                log.info("key \(press.code)\(press.long ? " (long)" : ""): \(press.action.map(\.description) ?? "nothing")")
                // A terminal nobody hears (its key not approved) has one thing to say: its code.
                if let enrolmentSpeech, press.action == .sayEnrolmentCode || service.protection.silent {
                    announcer.announce(enrolmentSpeech)
                    return
                }
                // A key that can do nothing says so (the error tone).
                if let command = press.action?.command(buttons: buttons) {
                    service.perform(command, fromKey: true)
                } else {
                    service.keyDidNothing()
                }
            }, onEvent: { event in log.info("keys: \(event)") })
        } catch {
            log.error("keys: \(error)")
        }
    }

    func stop() {
        keys?.stop()
        keys = nil
        service.stop()
        announcer.stop()
    }
}
