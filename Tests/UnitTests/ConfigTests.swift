import Foundation
import XCTest

@testable import IntercomDaemon
@testable import IntercomConfig

final class ConfigTests: XCTestCase {
    // MARK: Helpers

    /// The issues `parse` reports for `text`; fails the test if it parses.
    private func issues(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> [ConfigIssue] {
        do {
            let config = try DaemonConfig.parse(text, source: "room.toml")
            XCTFail("expected an error, parsed \(config)", file: file, line: line)
            return []
        } catch let error as ConfigError {
            XCTAssertEqual(error.source, "room.toml", file: file, line: line)
            XCTAssertFalse(error.issues.isEmpty, "ConfigError without issues", file: file, line: line)
            return error.issues
        } catch {
            XCTFail("unexpected error type \(type(of: error)): \(error)", file: file, line: line)
            return []
        }
    }

    /// The single issue `parse` reports for `text`.
    private func issue(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> ConfigIssue? {
        let found = issues(text, file: file, line: line)
        XCTAssertEqual(found.count, 1, "issues: \(found)", file: file, line: line)
        return found.first
    }

    private var repositoryRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
    }

    private func temporaryFile(_ contents: String) throws -> String {
        let url = FileManager.default.temporaryDirectory
            .appendingPathComponent("intercomd-config-\(UUID().uuidString).toml")
        try contents.write(to: url, atomically: true, encoding: .utf8)
        addTeardownBlock { try? FileManager.default.removeItem(at: url) }
        return url.path
    }

    // MARK: Defaults

    func testDefaults() throws {
        let d = DaemonConfig.default
        XCTAssertEqual(d.audio.captureDevice, "default")
        XCTAssertEqual(d.audio.playbackDevice, "default")
        XCTAssertEqual(d.audio.sampleRate, 48000)
        XCTAssertEqual(d.audio.periodMs, 10)
        XCTAssertEqual(d.audio.bufferPeriods, 3)
        XCTAssertEqual(d.audio.playbackFillPeriods, 2)
        XCTAssertEqual(d.audio.playbackQueuePeriods, 2, "two of the three periods queued, one in reserve")
        var full = d
        full.audio.playbackFillPeriods = 0
        XCTAssertEqual(full.audio.playbackQueuePeriods, 3, "0 keeps the whole buffer full")
        XCTAssertEqual(d.audio.linkDevices, true)
        XCTAssertEqual(d.audio.framesPerPeriod, 480)
        XCTAssertEqual(d.realtime.priority, 70)
        XCTAssertEqual(d.realtime.lockMemory, true)
        XCTAssertEqual(d.echo.enabled, true)
        XCTAssertEqual(d.echo.tailMs, 200)
        XCTAssertEqual(d.echo.noiseSuppressDb, 0, "speexdsp's denoiser costs clean speech more than 0.1 PESQ (BENCHMARKS.md)")
        XCTAssertEqual(d.echo.echoSuppressDb, -40)
        XCTAssertEqual(d.echo.echoSuppressActiveDb, -15)
        XCTAssertEqual(d.echo.agc, false)
        XCTAssertEqual(d.mixer.micMuted, false)
        XCTAssertEqual(d.mixer.speakerMuted, false)
        XCTAssertEqual(d.mixer.speakerGainDb, 0)
        XCTAssertEqual(d.mixer.micGainDb, 0)
        XCTAssertEqual(d.retry.enabled, true)
        XCTAssertEqual(d.retry.initialMs, 250)
        XCTAssertEqual(d.retry.maxMs, 10000)
        XCTAssertEqual(d.log.level, "info")
        XCTAssertEqual(d.log.loggerLevel, .info)
        XCTAssertEqual(d.log.statsIntervalS, 10)
        XCTAssertNil(d.local.farEndWav)
        XCTAssertNil(d.local.recordWav)
        XCTAssertNil(d.local.recordRawWav)
        XCTAssertEqual(d.local.durationS, 0)

        XCTAssertNoThrow(try d.validate(), "the defaults must satisfy the rules")
        XCTAssertEqual(try DaemonConfig.parse(""), d)
        XCTAssertEqual(try DaemonConfig.parse("# nothing\n\n[audio]\n[log]\n"), d)
    }

    func testFramesPerPeriod() {
        var audio = AudioSection()
        for (ms, frames) in [(2.5, 120), (5, 240), (10, 480), (20, 960)] {
            audio.periodMs = ms
            XCTAssertEqual(audio.framesPerPeriod, frames, "period \(ms) ms")
        }
    }

    // MARK: Valid files

    func testFullValidFile() throws {
        let text = """
            [audio]
            capture_device = "plughw:CARD=USB,DEV=0"
            playback_device = "hw:0,0"
            sample_rate = 48000
            period_ms = 2.5
            buffer_periods = 2
            link_devices = false

            [realtime]
            priority = 0
            lock_memory = false

            [echo]
            enabled = false
            tail_ms = 500
            noise_suppress_db = -30
            echo_suppress_db = -60
            echo_suppress_active_db = -20
            agc = true

            [mixer]
            mic_muted = true
            speaker_muted = true
            speaker_gain_db = -6.5
            mic_gain_db = 12

            [retry]
            enabled = false
            initial_ms = 100
            max_ms = 100

            [log]
            level = "debug"
            stats_interval_s = 0.5

            [local]
            far_end_wav = "/srv/far.wav"
            record_wav = "out/mic.wav"
            record_raw_wav = "out/raw.wav"
            duration_s = 30
            """
        let c = try DaemonConfig.parse(text)
        var expected = DaemonConfig()
        expected.audio.captureDevice = "plughw:CARD=USB,DEV=0"
        expected.audio.playbackDevice = "hw:0,0"
        expected.audio.periodMs = 2.5
        expected.audio.bufferPeriods = 2
        expected.audio.linkDevices = false
        expected.realtime.priority = 0
        expected.realtime.lockMemory = false
        expected.echo.enabled = false
        expected.echo.tailMs = 500
        expected.echo.noiseSuppressDb = -30
        expected.echo.echoSuppressDb = -60
        expected.echo.echoSuppressActiveDb = -20
        expected.echo.agc = true
        expected.mixer.micMuted = true
        expected.mixer.speakerMuted = true
        expected.mixer.speakerGainDb = -6.5
        expected.mixer.micGainDb = 12
        expected.retry.enabled = false
        expected.retry.initialMs = 100
        expected.retry.maxMs = 100
        expected.log.level = "debug"
        expected.log.statsIntervalS = 0.5
        expected.local.farEndWav = "/srv/far.wav"
        expected.local.recordWav = "out/mic.wav"
        expected.local.recordRawWav = "out/raw.wav"
        expected.local.durationS = 30
        XCTAssertEqual(c, expected)
        XCTAssertEqual(c.audio.framesPerPeriod, 120)
        XCTAssertEqual(c.log.loggerLevel, .debug)
    }

    func testPartialFileKeepsOtherDefaults() throws {
        let c = try DaemonConfig.parse("[echo]\ntail_ms = 300\n")
        var expected = DaemonConfig.default
        expected.echo.tailMs = 300
        XCTAssertEqual(c, expected)
    }

    func testNumericConversions() throws {
        // An integer where a number is expected; an integral float where an integer is expected.
        let c = try DaemonConfig.parse("""
            [audio]
            period_ms = 5
            buffer_periods = 4.0
            [mixer]
            speaker_gain_db = -6
            [log]
            stats_interval_s = 0
            """)
        XCTAssertEqual(c.audio.periodMs, 5)
        XCTAssertEqual(c.audio.bufferPeriods, 4)
        XCTAssertEqual(c.mixer.speakerGainDb, -6)
        XCTAssertEqual(c.log.statsIntervalS, 0)
    }

    func testDottedKeysAndInlineTables() throws {
        let c = try DaemonConfig.parse("""
            audio.period_ms = 20
            echo = { tail_ms = 64, agc = true }
            """)
        XCTAssertEqual(c.audio.periodMs, 20)
        XCTAssertEqual(c.echo.tailMs, 64)
        XCTAssertTrue(c.echo.agc)
    }

    func testEmptyPathMeansNone() throws {
        let c = try DaemonConfig.parse("[local]\nfar_end_wav = \"\"\nrecord_wav = \"a.wav\"\n")
        XCTAssertNil(c.local.farEndWav)
        XCTAssertEqual(c.local.recordWav, "a.wav")
    }

    // MARK: Errors name the key

    func testBadValueNamesKeyAndAllowedValues() throws {
        let text = "[audio]\nperiod_ms = 7\n"
        let found = issue(text)
        XCTAssertEqual(found, ConfigIssue(key: "audio.period_ms", problem: "7 is not one of 2.5, 5, 10, 20", line: 2))
        do {
            _ = try DaemonConfig.parse(text, source: "room.toml")
        } catch let error as ConfigError {
            XCTAssertEqual(error.description, "room.toml: audio.period_ms: 7 is not one of 2.5, 5, 10, 20 (line 2)")
        }
    }

    func testEveryRangeIsChecked() {
        let cases: [(text: String, key: String, problem: String)] = [
            ("[audio]\ncapture_device = \"\"", "audio.capture_device", "must not be empty"),
            ("[audio]\nplayback_device = \"\"", "audio.playback_device", "must not be empty"),
            ("[audio]\nsample_rate = 44100", "audio.sample_rate", "44100 is not supported (only 48000 for now)"),
            ("[audio]\nperiod_ms = 2.4", "audio.period_ms", "2.4 is not one of 2.5, 5, 10, 20"),
            ("[audio]\nbuffer_periods = 1", "audio.buffer_periods", "1 is not in range 2...8"),
            ("[audio]\nbuffer_periods = 9", "audio.buffer_periods", "9 is not in range 2...8"),
            ("[realtime]\npriority = 100", "realtime.priority",
             "100 is not in range 0...99 (0 = normal scheduling, 1...99 = SCHED_FIFO)"),
            ("[realtime]\npriority = -1", "realtime.priority",
             "-1 is not in range 0...99 (0 = normal scheduling, 1...99 = SCHED_FIFO)"),
            ("[audio]\nplayback_fill_periods = -1", "audio.playback_fill_periods", "-1 is not in range 0...3"),
            ("[audio]\nplayback_fill_periods = 4\nbuffer_periods = 3", "audio.playback_fill_periods", "4 is more than audio.buffer_periods (3)"),
            ("[echo]\ntail_ms = 31", "echo.tail_ms", "31 is not in range 32...1000"),
            ("[echo]\ntail_ms = 1001", "echo.tail_ms", "1001 is not in range 32...1000"),
            ("[echo]\nnoise_suppress_db = 3", "echo.noise_suppress_db", "3 is not in range -60...0"),
            ("[echo]\nnoise_suppress_db = -61", "echo.noise_suppress_db", "-61 is not in range -60...0"),
            ("[echo]\necho_suppress_db = -91", "echo.echo_suppress_db", "-91 is not in range -90...0"),
            ("[echo]\necho_suppress_active_db = 1", "echo.echo_suppress_active_db", "1 is not in range -90...0"),
            ("[mixer]\nspeaker_gain_db = 12.5", "mixer.speaker_gain_db", "12.5 is not in range -60...12"),
            ("[mixer]\nmic_gain_db = -60.5", "mixer.mic_gain_db", "-60.5 is not in range -60...24"),
            ("[mixer]\nmic_gain_db = nan", "mixer.mic_gain_db", "nan is not in range -60...24"),
            ("[retry]\ninitial_ms = 9", "retry.initial_ms", "9 is not in range 10...60000"),
            ("[retry]\ninitial_ms = 60001\nmax_ms = 70000", "retry.initial_ms", "60001 is not in range 10...60000"),
            ("[retry]\nmax_ms = 499\ninitial_ms = 500", "retry.max_ms", "499 is less than retry.initial_ms (500)"),
            ("[log]\nlevel = \"verbose\"", "log.level",
             "\"verbose\" is not one of trace, debug, info, notice, warning, error, critical"),
            ("[log]\nlevel = \"INFO\"", "log.level",
             "\"INFO\" is not one of trace, debug, info, notice, warning, error, critical (did you mean info?)"),
            ("[log]\nstats_interval_s = 0.25", "log.stats_interval_s", "0.25 is neither 0 (off) nor in range 0.5...3600"),
            ("[log]\nstats_interval_s = 3601", "log.stats_interval_s", "3601 is neither 0 (off) nor in range 0.5...3600"),
            ("[local]\nduration_s = -1", "local.duration_s",
             "-1 is neither 0 (until stopped) nor a positive number of seconds"),
            ("[local]\nduration_s = inf", "local.duration_s",
             "inf is neither 0 (until stopped) nor a positive number of seconds"),
        ]
        for c in cases {
            guard let found = issue(c.text) else { continue }
            XCTAssertEqual(found.key, c.key, c.text)
            XCTAssertEqual(found.problem, c.problem, c.text)
            XCTAssertEqual(found.line, 2, c.text)
        }
    }

    func testDefaultClashingWithAnotherKeySaysSo() {
        let found = issue("[retry]\ninitial_ms = 20000\n")
        XCTAssertEqual(found?.key, "retry.max_ms")
        XCTAssertEqual(
            found?.problem,
            "10000 is less than retry.initial_ms (20000); retry.max_ms is not set, so it has its default value")
        XCTAssertEqual(found?.line, 1, "no max_ms line: the [retry] header's line")
    }

    func testWrongTypeNamesExpectedType() {
        let cases: [(text: String, key: String, problem: String)] = [
            ("[realtime]\nlock_memory = \"yes\"", "realtime.lock_memory",
             "expected a boolean (true or false), got a string (\"yes\")"),
            ("[audio]\nperiod_ms = \"10\"", "audio.period_ms", "expected a number, got a string (\"10\")"),
            ("[echo]\ntail_ms = 200.5", "echo.tail_ms", "expected an integer, got a floating-point number (200.5)"),
            ("[echo]\ntail_ms = true", "echo.tail_ms", "expected an integer, got a boolean (true)"),
            ("[audio]\ncapture_device = 3", "audio.capture_device",
             "expected a string (in double quotes), got an integer (3)"),
            ("[local]\nrecord_wav = [\"a.wav\"]", "local.record_wav", "expected a string (in double quotes), got an array"),
            ("[log]\nlevel = { name = \"info\" }", "log.level", "expected a string (in double quotes), got a table"),
            ("\naudio = 5", "audio", "expected a table (the [audio] section), got an integer (5)"),
            ("\n[[audio]]\nperiod_ms = 5", "audio", "expected a table (the [audio] section), got an array"),
        ]
        for c in cases {
            guard let found = issue(c.text) else { continue }
            XCTAssertEqual(found.key, c.key, c.text)
            XCTAssertEqual(found.problem, c.problem, c.text)
            XCTAssertEqual(found.line, 2, c.text)
        }
    }

    func testUnknownKeyWithSuggestion() {
        XCTAssertEqual(
            issue("[audio]\nperod_ms = 10\n"),
            ConfigIssue(key: "audio.perod_ms", problem: "unknown key (did you mean audio.period_ms?)", line: 2))
        // A swap of neighbouring letters counts as one edit.
        XCTAssertEqual(issue("[echo]\ntail_sm = 100\n")?.problem, "unknown key (did you mean echo.tail_ms?)")
        // A known key in the wrong section.
        XCTAssertEqual(
            issue("[audio]\npriority = 50\n"),
            ConfigIssue(key: "audio.priority", problem: "unknown key (did you mean realtime.priority?)", line: 2))
        // A key outside any section.
        XCTAssertEqual(
            issue("period_ms = 10\n"),
            ConfigIssue(key: "period_ms", problem: "unknown key (did you mean audio.period_ms?)", line: 1))
        // Nothing close: no suggestion.
        XCTAssertEqual(
            issue("[audio]\nvolume = 3\n"),
            ConfigIssue(key: "audio.volume", problem: "unknown key", line: 2))
        // A sub-table inside a known section is an unknown key too.
        XCTAssertEqual(issue("[audio]\n[audio.extra]\nx = 1\n")?.key, "audio.extra")
    }

    func testUnknownSection() {
        XCTAssertEqual(
            issue("[audio]\nperiod_ms = 5\n[audoi]\nperiod_ms = 5\n"),
            ConfigIssue(key: "audoi", problem: "unknown section (did you mean [audio]?)", line: 3))
        XCTAssertEqual(
            issue("[phone]\nport = 5000\n"),
            ConfigIssue(key: "phone", problem: "unknown section", line: 1))
    }

    func testSyntaxErrorGivesLineColumnAndTOMLMessage() throws {
        let text = "[audio]\ncapture_device = \"roomA\"\nperiod_ms = \n"
        guard let found = issue(text) else { return }
        XCTAssertEqual(found.key, "audio.period_ms")
        XCTAssertEqual(found.line, 3)
        XCTAssertEqual(found.column, 13)
        XCTAssertTrue(found.problem.contains("expected value"), found.problem)
        do {
            _ = try DaemonConfig.parse(text, source: "room.toml")
        } catch let error as ConfigError {
            XCTAssertTrue(error.description.hasPrefix("room.toml: audio.period_ms: "), error.description)
            XCTAssertTrue(error.description.hasSuffix("(line 3, column 13)"), error.description)
        }

        let header = issue("[audio]\nperiod_ms = 5\n[echo\ntail_ms = 100\n")
        XCTAssertEqual(header?.line, 3)
        XCTAssertEqual(header?.key, "echo")
        XCTAssertEqual(issue("[audio]\nperiod_ms = 5\nperiod_ms = 10\n")?.line, 3, "duplicate key")
        XCTAssertEqual(issue("[log]\nlevel = \"info\n")?.key, "log.level", "unterminated string")
        let unquoted = issue("[audio]\ncapture_device = roomA\n")
        XCTAssertEqual(unquoted?.key, "audio.capture_device")
        XCTAssertEqual(unquoted?.line, 2)
        XCTAssertTrue(unquoted?.problem.hasSuffix("(text values need double quotes: key = \"value\")") ?? false)
    }

    func testNetworkAddressesAreCheckedPerElement() {
        XCTAssertEqual(
            issue("[network]\npeers = [\"10.0.0.2:5004\", \"10.0.0.300:5004\"]\n"),
            ConfigIssue(key: "network.peers", problem: "element 2 \"10.0.0.300:5004\": is not an IPv4 address and port (a.b.c.d:port): \"300\" is not a number 0...255", line: 2))
        // Forms an earlier lenient parser read as another address (10.0.0.300.2:5004 sent to 10.0.0.2).
        for bad in IPv4EndpointTests.malformedEndpoints {
            let found = issue("[network]\npeers = [\"\(bad)\"]\n")
            XCTAssertEqual(found?.key, "network.peers", bad)
            XCTAssertTrue(found?.problem.contains("is not an IPv4 address and port") ?? false, "\(bad): \(String(describing: found))")
        }
        for bad in IPv4EndpointTests.malformedAddresses {
            XCTAssertEqual(issue("[network]\nbind_address = \"\(bad)\"\n")?.key, "network.bind_address", bad)
            XCTAssertTrue(issues("[room]\nid = \"a\"\n[rooms.a]\naddress = \"10.0.0.1\"\n[rooms.b]\naddress = \"\(bad)\"\n")
                .contains { $0.key == "rooms.b.address" }, bad)
        }
        XCTAssertEqual(
            issue("[network]\nmulticast_groups = [\"10.0.0.1\"]\n")?.problem,
            "element 1 \"10.0.0.1\": is not a multicast address (224...239.x.x.x)")
        XCTAssertEqual(issue("[network]\npeers = \"10.0.0.2:5004\"\n")?.problem,
                       "expected an array of strings ([\"...\", ...]), got a string (\"10.0.0.2:5004\")")
        XCTAssertEqual(issue("[jitter]\nmin_delay_ms = 50\nmax_delay_ms = 40\n")?.key, "jitter.max_delay_ms")
        XCTAssertEqual(issue("[opus]\napplication = \"lowdelay\"\n")?.key, "opus.application")
        XCTAssertEqual(
            try DaemonConfig.parse("[network]\npeers = [\"239.255.0.1:5004\"]\nmulticast_groups = [\"239.255.0.1\"]\n[security]\nmode = \"lab\"\n").network.multicastGroups,
            ["239.255.0.1"])
    }

    /// Fixed streams have no keys: outside lab mode they are refused, naming the key and the way out.
    func testFixedStreamsAreClearTextAndNeedLabMode() throws {
        for (text, key) in [("[network]\npeers = [\"10.0.0.2:5004\"]\n", "network.peers"),
                            ("[network]\nmulticast_groups = [\"239.255.0.1\"]\n", "network.multicast_groups")] {
            let found = issues(text)
            XCTAssertEqual(found.map(\.key), [key], text)
            XCTAssertTrue(found.first?.problem.contains("security.mode = \"lab\"") == true, "\(found)")
            XCTAssertNoThrow(try DaemonConfig.parse(text + "[security]\nmode = \"lab\"\n"), text)
        }
        XCTAssertEqual(issue("[security]\nmode = \"open\"\n")?.key, "security.mode")
        let secure = try DaemonConfig.parse("[network]\nlisten_port = 5004\n")
        XCTAssertFalse(secure.networkMediaEnabled, "no calls, no lab mode: no media at all")
        XCTAssertTrue(try DaemonConfig.parse("[network]\nlisten_port = 5004\n[security]\nmode = \"lab\"\n").networkMediaEnabled)
    }

    func testAllErrorsAreCollectedInFileOrder() throws {
        let text = """
            [realtime]
            priority = 120
            [audio]
            perod_ms = 10
            buffer_periods = "3"
            sample_rate = 44100
            [echo]
            tail_ms = 10
            [network]
            port = 1
            [log]
            level = "loud"
            """
        let found = issues(text)
        XCTAssertEqual(found.map(\.key), [
            "realtime.priority", "audio.perod_ms", "audio.buffer_periods", "audio.sample_rate", "echo.tail_ms",
            "network.port", "log.level",
        ])
        XCTAssertEqual(found.map(\.line), [2, 4, 5, 6, 8, 10, 12])
        do {
            _ = try DaemonConfig.parse(text, source: "room.toml")
        } catch let error as ConfigError {
            let lines = error.description.split(separator: "\n")
            XCTAssertEqual(lines.count, 7)
            XCTAssertTrue(lines.allSatisfy { $0.hasPrefix("room.toml: ") }, error.description)
            XCTAssertEqual(lines[1], "room.toml: audio.perod_ms: unknown key (did you mean audio.period_ms?) (line 4)")
        }
    }

    func testNulByteIsRejected() {
        let found = issue("[audio]\ncapture_device = \"a\u{0}b\"\n")
        XCTAssertEqual(found?.line, 2)
        XCTAssertEqual(found?.problem, "the file contains a NUL byte")
    }

    /// toml++ aborts the process on these (an assertion in its table-header parser); before the
    /// header check, each of them killed the test run. The last one is what the fuzzer found.
    func testTableHeaderWithoutANameIsAnErrorNotACrash() {
        let cases: [(text: String, line: Int, column: Int)] = [
            ("[\n", 1, 2),
            ("[room]\nid = \"a\"\n  [ .rooms]\n", 3, 5),
            ("[[+]]\n", 1, 3),
            ("[audio]\n[\r\n", 2, 2),
            ("\u{FEFF}[.a]\n", 1, 5),
            ("[.\"\n[[ooms.empfanpgle for a rcomd \nmay_callation:llr", 1, 2),
        ]
        for c in cases {
            let found = issue(c.text)
            XCTAssertEqual(found?.line, c.line, "\(c.text.debugDescription)")
            XCTAssertEqual(found?.column, c.column, "\(c.text.debugDescription)")
            XCTAssertEqual(found?.problem, "a table header must begin with a name, like [room] or [rooms.empfang]")
        }
        XCTAssertEqual(issue("[audio]\n[ .x]\n")?.key, "audio")
    }

    /// The header check must not refuse valid TOML whose lines start with `[` inside values.
    func testHeaderCheckLeavesBracketsInsideValuesAlone() {
        let valid = [
            "x = [\n  [1, 2],\n  [+3],\n  [ {a = 1} ],\n]\n",
            "s = \"\"\"\n[.not a header]\n\"\"\"\n",
            "s = '''\n[+]\n'''\n",
            "s = \"\"\"a\\\n[.b]\"\"\"\"\n[ok]\n",
            "\"a[\" = 1 # [.\n['q.x']\n[ \"y\" ]\n[[t]]\n",
        ]
        for text in valid {
            XCTAssertNil(TOMLHeaderCheck.firstBadHeader(in: text), text.debugDescription)
        }
        XCTAssertNotNil(TOMLHeaderCheck.firstBadHeader(in: "s = \"\"\"\n\"\"\"\n[.b]\n"))
    }

    func testValidateChecksValuesSetInCode() {
        var c = DaemonConfig()
        c.audio.periodMs = 7
        c.retry.maxMs = 1
        XCTAssertThrowsError(try c.validate(source: "command line")) { error in
            XCTAssertEqual(
                (error as? ConfigError)?.description,
                """
                command line: audio.period_ms: 7 is not one of 2.5, 5, 10, 20
                command line: retry.max_ms: 1 is less than retry.initial_ms (250)
                """)
        }
    }

    // MARK: Files

    func testLoadReadsFileAndNamesItInErrors() throws {
        let good = try temporaryFile("[audio]\ncapture_device = \"roomA\"\n")
        XCTAssertEqual(try DaemonConfig.load(path: good).audio.captureDevice, "roomA")

        let bad = try temporaryFile("[audio]\nperiod_ms = 7\n")
        XCTAssertThrowsError(try DaemonConfig.load(path: bad)) { error in
            XCTAssertEqual(
                "\(error)", "\(bad): audio.period_ms: 7 is not one of 2.5, 5, 10, 20 (line 2)")
        }
    }

    func testUnreadableFileNamesPathAndReason() {
        let missing = "/nonexistent/intercomd.toml"
        XCTAssertThrowsError(try DaemonConfig.load(path: missing)) { error in
            XCTAssertEqual("\(error)", "\(missing): cannot open: No such file or directory")
        }
        let directory = FileManager.default.temporaryDirectory.path
        XCTAssertThrowsError(try DaemonConfig.load(path: directory)) { error in
            XCTAssertEqual("\(error)", "\(directory): cannot read: Is a directory")
        }
    }

    func testExampleFileParsesAndDocumentsEveryKey() throws {
        let path = repositoryRoot.appendingPathComponent("config/intercomd.example.toml").path
        let example = try DaemonConfig.load(path: path)
        XCTAssertEqual(example.audio.captureDevice, "roomA")
        XCTAssertEqual(example.audio.playbackDevice, "roomA")

        // Apart from the device names, the example shows the defaults (secure: no fixed peers, which would be clear text).
        var backToDefaults = example
        backToDefaults.audio.captureDevice = DaemonConfig.default.audio.captureDevice
        backToDefaults.audio.playbackDevice = DaemonConfig.default.audio.playbackDevice
        XCTAssertEqual(backToDefaults, DaemonConfig.default)

        let text = try String(contentsOfFile: path, encoding: .utf8)
        XCTAssertEqual(text, DaemonConfig.exampleFile(),
                       "the example is rendered from the schema: intercomd --print-example-config > config/intercomd.example.toml")
        let locator = KeyLocator(text)
        for section in DaemonConfig.sections {
            for key in section.keys {
                XCTAssertTrue(locator.defines([section.name, key.name]), "example lacks \(section.name).\(key.name)")
            }
        }
    }

    // MARK: Rendering

    /// `--print-default-config` is where an installer starts: it has every section and table of
    /// the example configuration, in the same order, each key documented (issue 51: it printed 11
    /// of 18 sections, no calls, keys, tones or speech), and it is a valid file.
    func testDefaultConfigHasEverySectionOfTheExample() throws {
        let example = try String(contentsOfFile: repositoryRoot.appendingPathComponent("config/intercomd.example.toml").path, encoding: .utf8)
        let printed = DaemonConfig.default.rendered()
        func headers(_ text: String) -> [String] {
            text.split(separator: "\n").filter { $0.hasPrefix("[") || $0.hasPrefix("#   [") }
                .map { $0.replacingOccurrences(of: "#   ", with: "") }
        }
        XCTAssertEqual(headers(printed), headers(example), "the same sections and commented tables, in order")
        XCTAssertEqual(printed.split(separator: "\n").filter { $0.hasPrefix("[") }.count, DaemonConfig.sections.count)
        assertEveryKeyRenderedUnderAComment(printed, DaemonConfig.sections)
        for table in ["[rooms.", "[buttons.", "[groups]", "[notifications."] {
            XCTAssertTrue(printed.contains("#   \(table)"), "the tables are documented: \(table)")
        }
        XCTAssertNoThrow(try DaemonConfig.parse(printed, source: "printed").validate(source: "printed"))
    }

    func testRenderedDefaultsRoundTrip() throws {
        let text = DaemonConfig.default.rendered()
        XCTAssertEqual(try DaemonConfig.parse(text, source: "rendered"), DaemonConfig.default)
        XCTAssertTrue(text.contains("\n[audio]\n"), text)
        XCTAssertTrue(text.contains("\nperiod_ms = 10\n"), text)
        XCTAssertTrue(text.contains("# Allowed: one of 2.5, 5, 10, 20. Default: 10. Takes effect at restart.\nperiod_ms = 10\n"), text)
        XCTAssertTrue(text.contains("# Allowed: -60...24. Default: 0. SIGHUP applies it at once.\nmic_gain_db = 0\n"), text)

        // Every key is written, each under a comment.
        assertEveryKeyRenderedUnderAComment(text, DaemonConfig.sections)
    }

    func testRenderedNonDefaultsRoundTrip() throws {
        var c = DaemonConfig()
        c.audio.captureDevice = "plughw:CARD=\"Weird\\Name\",DEV=0"
        c.audio.playbackDevice = "gerät\tmit tab\nund zeile"
        c.audio.periodMs = 2.5
        c.audio.bufferPeriods = 4
        c.audio.linkDevices = false
        c.realtime.priority = 99
        c.realtime.lockMemory = false
        c.echo.enabled = false
        c.echo.tailMs = 32
        c.echo.noiseSuppressDb = -60
        c.echo.echoSuppressDb = -90
        c.echo.echoSuppressActiveDb = 0
        c.echo.agc = true
        c.mixer.micMuted = true
        c.mixer.speakerMuted = true
        c.mixer.speakerGainDb = -0.1
        c.mixer.micGainDb = 23.75
        c.retry.enabled = false
        c.retry.initialMs = 10
        c.retry.maxMs = 60000
        c.log.level = "critical"
        c.log.statsIntervalS = 0.5
        c.local.farEndWav = "/tmp/far end.wav"
        c.local.recordWav = "mic.wav"
        c.local.recordRawWav = "C:\\raw.wav"
        c.local.durationS = 1e-3
        XCTAssertNoThrow(try c.validate())
        XCTAssertEqual(try DaemonConfig.parse(c.rendered(), source: "rendered"), c)
    }

    // MARK: Helpers of the reader

    func testSpellingDistance() {
        XCTAssertEqual(Spelling.distance("period_ms", "period_ms"), 0)
        XCTAssertEqual(Spelling.distance("perod_ms", "period_ms"), 1)
        XCTAssertEqual(Spelling.distance("peirod_ms", "period_ms"), 1)
        XCTAssertEqual(Spelling.distance("Period_MS", "period_ms"), 0)
        XCTAssertEqual(Spelling.distance("", "abc"), 3)
        XCTAssertEqual(Spelling.distance("kitten", "sitting"), 3)
        XCTAssertEqual(Spelling.closest(to: "agx", among: ["enabled", "agc"]), "agc")
        XCTAssertNil(Spelling.closest(to: "volume", among: ["enabled", "agc"]))
    }

    func testLineLocatorSkipsMultilineValues() {
        let text = """
            [audio]
            capture_device = \"\"\"
            [echo]
            x = 1
            \"\"\"
            list = [
              "[log]",
              { a = 1 },
            ]
            period_ms = 5
            """
        let locator = KeyLocator(text)
        XCTAssertEqual(locator.line(of: ["audio", "period_ms"]), 10)
        XCTAssertFalse(locator.defines(["echo"]))
        XCTAssertFalse(locator.defines(["echo", "x"]))
        XCTAssertEqual(locator.line(of: ["audio", "list", "a"]), 6, "falls back to the parent's line")
    }
}

/// Every key of `schema` is written in `text`, each under a comment line.
func assertEveryKeyRenderedUnderAComment(_ text: String, _ schema: [SchemaSection], file: StaticString = #filePath, line: UInt = #line) {
    let locator = KeyLocator(text)
    let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
    for section in schema {
        for key in section.keys {
            let path = [section.name, key.name]
            guard let at = locator.line(of: path), locator.defines(path) else {
                XCTFail("rendered() lacks \(section.name).\(key.name)", file: file, line: line)
                continue
            }
            XCTAssertTrue(lines[at - 2].hasPrefix("# "), "no comment above \(section.name).\(key.name)", file: file, line: line)
        }
    }
}
