import Calls
import Foundation
import Posix
import XCTest

@testable import IntercomDaemon

/// What a SIGHUP applies at once, and what it names as needing a restart (`Daemon.liveParts`,
/// `Daemon.restartNeeded`); the engine side of taking new call settings between calls.
final class ReloadTests: XCTestCase {
    private let base = """
        [room]
        id = "empfang"
        [rooms.empfang]
        address = "192.168.10.11"
        [rooms.beh1]
        address = "192.168.10.12"
        [buttons.beh1]
        rooms = ["beh1"]
        [mixer]
        mic_gain_db = 0
        """

    private func config(_ extra: String = "", replacing: (String, String)? = nil) throws -> DaemonConfig {
        var text = base
        if let (old, new) = replacing { text = text.replacingOccurrences(of: old, with: new) }
        return try DaemonConfig.parse(text + "\n" + extra)
    }

    func testGainsEchoSwitchesAndTheDirectoryAreAppliedWithoutARestart() throws {
        let running = try config()
        let new = try config("""
            [rooms.beh2]
            address = "192.168.10.13"
            [buttons.alle]
            rooms = ["beh1", "beh2"]
            [echo]
            howl_guard = false
            """, replacing: ("mic_gain_db = 0", "mic_gain_db = 6"))
        let (live, sections) = Daemon.liveParts(of: new, over: running)
        XCTAssertEqual(sections, ["echo.howl_guard", "mixer.mic_gain_db", "rooms", "buttons"])
        XCTAssertEqual(live, new, "everything changed is live")
        XCTAssertEqual(Daemon.restartNeeded(new, running: running), [])
    }

    func testTheSchemaSaysWhichKeysSIGHUPApplies() {
        XCTAssertEqual(DaemonConfig.keys(reloaded: .live), ["echo.enabled", "echo.loop_canceller", "echo.howl_guard", "mixer.speaker_gain_db", "mixer.mic_gain_db",
                                                             "lights.led_dir", "lights.gpio_chip", "lights.gpio", "lights.map", "calls.chime_wav",
                                                             "keys.debounce_ms", "keys.long_press_ms", "keys.map", "keys.long_map",
                                                             "tones.level_db", "tones.in_call_db", "tones.ring_period_ms", "tones.wav", "tones.gain_db",
                                                             "speech.voice", "speech.words_per_minute", "speech.pitch", "speech.level_db", "speech.duck_db",
                                                             "speech.prepare_at_start"])
        XCTAssertEqual(DaemonConfig.keys(reloaded: .reopensAudio),
                       ["audio.capture_device", "audio.playback_device", "audio.buffer_periods", "audio.playback_fill_periods",
                        "audio.link_devices", "realtime.priority"])
        XCTAssertEqual(DaemonConfig.keys(reloaded: .betweenCalls),
                       ["calls.auto_answer", "calls.ring_ms", "calls.answer_timeout_ms", "calls.caller_voice", "calls.multicast_group",
                        "calls.missed_reminder_s", "calls.notification_reminder_s"])
    }

    func testEveryLiveKeyIsAppliedAndNoOtherKeyIs() throws {
        // Each key with a value other than its default, one at a time: a live key is taken over
        // and named, any other key is left and named as needing a restart.
        let running = try config()
        for (key, toml) in [("echo.enabled", "[echo]\nenabled = false"), ("echo.howl_guard", "[echo]\nhowl_guard = false"),
                            ("echo.loop_canceller", "[echo]\nloop_canceller = false"),
                            ("mixer.speaker_gain_db", ""), ("echo.agc", "[echo]\nagc = true"),
                            ("jitter.max_delay_ms", "[jitter]\nmax_delay_ms = 300"), ("network.dscp", "[network]\ndscp = 0")] {
            let new = toml.isEmpty ? try config(replacing: ("mic_gain_db = 0", "mic_gain_db = 0\nspeaker_gain_db = -6")) : try config(toml)
            let (live, applied) = Daemon.liveParts(of: new, over: running)
            let restart = Daemon.restartNeeded(new, running: running)
            if DaemonConfig.keys(reloaded: .live).contains(key) {
                XCTAssertEqual(applied, [key])
                XCTAssertEqual(live, new)
                XCTAssertEqual(restart, [])
            } else {
                XCTAssertEqual(applied, [], key)
                XCTAssertEqual(restart, [key])
                XCTAssertEqual(live, running, key)
            }
        }
    }

    func testDevicesPortsAndThisRoomNeedARestartAndAreNotApplied() throws {
        let running = try config()
        let new = try config("""
            [audio]
            period_ms = 5
            [jitter]
            min_delay_ms = 20
            """, replacing: ("address = \"192.168.10.11\"", "address = \"192.168.10.21\""))
        let (live, sections) = Daemon.liveParts(of: new, over: running)
        XCTAssertEqual(sections, [])
        XCTAssertEqual(live, running, "nothing applied")
        XCTAssertEqual(Daemon.restartNeeded(new, running: running), ["audio.period_ms", "jitter.min_delay_ms", "rooms"])
    }

    /// New devices are not applied with the live parts nor named for a restart: the daemon opens
    /// the devices again with them once no call runs (`reopenAudioWhenQuiet`, LiveSoundsRigTests).
    func testNewAudioDevicesWaitToBeOpenedAgainAndAreNoRestart() throws {
        let running = try config()
        let new = try config("""
            [audio]
            capture_device = "plughw:CARD=USB,DEV=0"
            buffer_periods = 6
            [realtime]
            priority = 40
            [tones]
            level_db = -20
            """)
        let (live, sections) = Daemon.liveParts(of: new, over: running)
        XCTAssertEqual(sections, ["tones.level_db"])
        XCTAssertEqual(live.audio, running.audio, "the devices are not taken with the live parts")
        XCTAssertEqual(Daemon.restartNeeded(new, running: running), [])
        let (reopened, keys) = live.adopting(.reopensAudio, from: new)
        XCTAssertEqual(keys, ["audio.capture_device", "audio.buffer_periods", "realtime.priority"])
        XCTAssertEqual(reopened, new)
    }

    func testAnEngineTakesNewSettingsOnlyBetweenCalls() throws {
        let running = try config().callSettings()
        var engine = CallEngine(settings: running, seed: 1)
        var more = running
        more.buttons["alle"] = CallButton(rooms: [RoomID("beh1")!])
        XCTAssertTrue(engine.reconfigure(more))
        XCTAssertEqual(engine.settings.buttons.count, 2)

        _ = engine.handle(.call(button: "beh1"), now: 0)
        XCTAssertNotEqual(engine.state, .idle)
        var fewer = more
        fewer.buttons["alle"] = nil
        XCTAssertFalse(engine.reconfigure(fewer), "a call keeps the rules it began with")
        XCTAssertEqual(engine.settings.buttons.count, 2)

        var moved = more
        moved.media = IPv4Endpoint("192.168.10.11:6000")!
        _ = engine.handle(.hangUp, now: 1)
        XCTAssertFalse(engine.reconfigure(moved), "this room's sockets need a restart")
        XCTAssertTrue(engine.reconfigure(fewer))
    }
}
