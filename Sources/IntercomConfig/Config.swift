import Logging
import Posix
import TOMLKit

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

// The daemon's configuration: a TOML file technicians edit by hand.
//
// ALL DEFAULTS live in the property initializers of the section structs below, and nowhere else:
// a key missing from the file keeps that value, `DaemonConfig.default` is `DaemonConfig()`,
// `rendered()` and the error messages read them from there. The allowed values live in
// `DaemonConfig.schema` (bottom of this file) and `callSchema` (ConfigCalls.swift), next to the
// one-line comment of each key.

/// The whole configuration file: one property per `[section]`.
public struct DaemonConfig: Sendable, Equatable {
    public var audio = AudioSection()
    public var realtime = RealtimeSection()
    public var echo = EchoSection()
    public var mixer = MixerSection()
    public var retry = RetrySection()
    public var log = LogSection()
    public var local = LocalSection()
    public var network = NetworkSection()
    public var opus = OpusSection()
    public var jitter = JitterSection()
    public var metrics = MetricsSection()
    public var selfTest = SelfTestSection()
    // Calls (ConfigCalls.swift).
    public var room = RoomSection()
    public var rooms: [String: RoomEntry] = [:]
    public var buttons: [String: ButtonEntry] = [:]
    public var calls = CallsSection()
    public var control = ControlSection()
    public var security = SecuritySection()
    public var keys = KeysSection()
    public var tones = TonesSection()
    public var lights = LightsSection()
    // Notifications (ConfigNotifications.swift).
    public var groups: [String: [String]] = [:]
    public var notifications: [String: NotificationEntry] = [:]
    public var speech = SpeechSection()
    // The site this terminal belongs to (ConfigSite.swift).
    public var site = SiteSection()
    // Test runs only (ConfigTesting.swift).
    public var testing = TestingSection()

    /// All defaults.
    public init() {}

    /// The configuration used when no file is given; every key at its default.
    public static let `default` = DaemonConfig()

    /// A copy with `change` applied (the defaults with a few keys set, in tests and tools).
    public func with(_ change: (inout DaemonConfig) -> Void) -> DaemonConfig {
        var copy = self
        change(&copy)
        return copy
    }
}

/// `[audio]`: sound devices and timing.
public struct AudioSection: Sendable, Equatable {
    /// false: a terminal without sound devices (the site service's member on a server): it takes
    /// part in signalling, sends and receives notifications, and places and takes no calls.
    public var enabled: Bool = true
    /// ALSA capture (microphone) device, as `arecord -L` lists it.
    public var captureDevice: String = "default"
    /// ALSA playback (speaker) device, as `aplay -L` lists it.
    public var playbackDevice: String = "default"
    /// Sample rate in Hz; only 48000 is supported for now.
    public var sampleRate: Int = 48000
    /// Period (audio block) length in milliseconds: one of `supportedPeriodsMs`.
    public var periodMs: Double = 10
    /// ALSA buffer size in periods, 2...8: the most playback can hold.
    public var bufferPeriods: Int = 3
    /// Periods kept queued in the playback buffer, 1...bufferPeriods: its latency; the rest is a
    /// reserve for a late wake-up. 0: the whole buffer, kept full.
    public var playbackFillPeriods: Int = 2
    /// What the engine keeps queued, in periods.
    public var playbackQueuePeriods: Int { playbackFillPeriods == 0 ? bufferPeriods : min(playbackFillPeriods, bufferPeriods) }
    /// Start capture and playback together (snd_pcm_link) when the devices allow it.
    public var linkDevices: Bool = true

    public init() {}

    public static let supportedSampleRates = [48000]
    public static let supportedPeriodsMs: [Double] = [2.5, 5, 10, 20]
    public static let bufferPeriodsRange = 2...8

    /// Frames per period at `sampleRate`: 120, 240, 480 or 960 at 48 kHz.
    public var framesPerPeriod: Int { Int((Double(sampleRate) * periodMs / 1000).rounded()) }
}

/// `[realtime]`: scheduling of the audio thread.
public struct RealtimeSection: Sendable, Equatable {
    /// 0 = normal scheduling, 1...99 = SCHED_FIFO priority of the audio thread.
    public var priority: Int = 70
    /// Lock all memory (mlockall) so the audio thread never waits for paging.
    public var lockMemory: Bool = true

    public init() {}

    public static let priorityRange = 0...99
}

/// `[echo]`: acoustic echo cancellation and preprocessing (speexdsp).
public struct EchoSection: Sendable, Equatable {
    /// Echo cancellation on or off.
    public var enabled: Bool = true
    /// Longest echo path cancelled, in milliseconds, 32...1000.
    public var tailMs: Int = 200
    /// Maximum noise attenuation in dB, -60...0 (0 = no noise suppression): off by default, since
    /// speexdsp's denoiser costs clean speech more than 0.1 PESQ and a frame of delay.
    public var noiseSuppressDb: Int = 0
    /// Maximum residual echo attenuation in dB, -90...0.
    public var echoSuppressDb: Int = -40
    /// Maximum residual echo attenuation while the near end talks too, in dB, -90...0.
    public var echoSuppressActiveDb: Int = -15
    /// Automatic gain control of the microphone.
    public var agc: Bool = false
    /// The howl guard on the sent microphone (`HowlGuard`), with echo cancellation on.
    public var howlGuard: Bool = true
    /// The loop canceller (`LoopCanceller`): removes our own voice where another terminal's
    /// speaker brings it back, with echo cancellation on and a network. It subtracts only where a
    /// loop shows, so with none the talker passes untouched (BENCHMARKS, the stage table).
    public var loopCanceller: Bool = true
    /// How long a loop through another terminal it models, past the shortest, in milliseconds.
    public var loopTailMs: Int = 300
    /// Attenuate the echo the canceller leaves while the far end talks (`EchoGate`).
    public var residualGate: Bool = true

    public init() {}

    public static let tailMsRange = 32...1000
    public static let loopTailMsRange = 50...1000
    public static let noiseSuppressDbRange = -60...0
    public static let echoSuppressDbRange = -90...0
}

/// `[mixer]`: start-up mute and gain.
public struct MixerSection: Sendable, Equatable {
    public var micMuted: Bool = false
    public var speakerMuted: Bool = false
    /// Speaker gain in dB, -60...12.
    public var speakerGainDb: Double = 0
    /// Microphone gain in dB, -60...24.
    public var micGainDb: Double = 0

    public init() {}

    public static let speakerGainDbRange: ClosedRange<Double> = -60...12
    public static let micGainDbRange: ClosedRange<Double> = -60...24
}

/// `[retry]`: what to do when a sound device cannot be opened.
public struct RetrySection: Sendable, Equatable {
    /// Keep retrying a device that can't be opened instead of exiting.
    public var enabled: Bool = true
    /// Delay before the first retry in milliseconds, 10...60000.
    public var initialMs: Int = 250
    /// Longest delay between retries in milliseconds, >= `initialMs`.
    public var maxMs: Int = 10000

    public init() {}

    public static let initialMsRange = 10...60000
}

/// `[log]`: logging.
public struct LogSection: Sendable, Equatable {
    /// Least severe level logged: trace, debug, info, notice, warning, error or critical.
    public var level: String = "info"
    /// Seconds between statistics log messages; 0 = off, else 0.5...3600.
    public var statsIntervalS: Double = 10

    public init() {}

    /// The names `level` accepts (swift-log's levels).
    public static let levels = Logger.Level.allCases.map(\.rawValue)
    public static let statsIntervalRange: ClosedRange<Double> = 0.5...3600

    /// `level` as a swift-log level (`.info` if `level` was never validated and is unknown).
    public var loggerLevel: Logger.Level { Logger.Level(rawValue: level) ?? .info }
}

/// `[local]`: local mode (no network): play a file as the far end, record the microphone.
public struct LocalSection: Sendable, Equatable {
    /// WAV played (looping) as far-end speech; nil = none (`""` in the file).
    public var farEndWav: String? = nil
    /// WAV file receiving the processed microphone signal; nil = none.
    public var recordWav: String? = nil
    /// WAV file receiving the unprocessed microphone signal; nil = none.
    public var recordRawWav: String? = nil
    /// Run time in seconds; 0 = until stopped.
    public var durationS: Double = 0

    public init() {}
}

/// `[network]`: media to and from the connected rooms (RTP/Opus over UDP).
public struct NetworkSection: Sendable, Equatable {
    /// UDP port media is received on; 0 = receive nothing.
    public var listenPort: Int = 5004
    /// Local IPv4 address the media socket is bound to.
    public var bindAddress: String = "0.0.0.0"
    /// Where this room's microphone is sent: "a.b.c.d:port" each, unicast or multicast.
    public var peers: [String] = []
    /// Multicast groups ("a.b.c.d") received on `listenPort`.
    public var multicastGroups: [String] = []
    /// Address of the interface multicast is sent and received on; 0.0.0.0 = the kernel's choice.
    public var multicastInterface: String = "0.0.0.0"
    /// Hops multicast may cross (1 = this network only).
    public var multicastTtl: Int = 1
    /// Whether this host receives its own multicast (only for several rooms on one host, e.g. tests).
    public var multicastLoopback: Bool = false
    /// DiffServ code point of media packets (46 = EF, expedited forwarding for voice).
    public var dscp: Int = 46
    /// RTP payload type of Opus, 96...127.
    public var payloadType: Int = 96
    /// Remote streams mixed at once; more are refused until one goes idle.
    public var maxStreams: Int = 8
    /// A remote stream silent this long (ms) is dropped from the mix.
    public var streamTimeoutMs: Int = 3000
    /// SCHED_FIFO priority of the network thread; 0 = normal. Below the audio thread's.
    public var priority: Int = 60

    public init() {}

    public static let maxStreamsRange = 1...32
    public static let streamTimeoutMsRange = 200...60000
    public static let multicastTtlRange = 0...255
    public static let dscpRange = 0...63
    public static let payloadTypeRange = 96...127

    /// Whether this room sends or receives anything.
    public var isEnabled: Bool { !peers.isEmpty || listenPort > 0 }
}

/// `[opus]`: the codec.
public struct OpusSection: Sendable, Equatable {
    /// "voip" (speech, FEC and DTX available) or "restricted_lowdelay" (CELT only, 2.5 ms less delay, no FEC).
    public var application: String = "voip"
    /// Bits per second, 6000...510000. 64 kbit/s leaves room for FEC at full band: through the
    /// codec alone PESQ-WB 3.43 with FEC in 414 of 530 speech packets, where 32 kbit/s with FEC
    /// (at 10 % expected loss) measured 2.11, 3.23 without (`OpusDefaultsQualityTests`).
    public var bitrate: Int = 64000
    /// Encoder effort 0...10 (more = better quality for the bits, more CPU).
    public var complexity: Int = 8
    /// In-band forward error correction: the next packet carries a coarse copy of this one.
    public var fec: Bool = true
    /// Loss the encoder prepares FEC for, percent. At 5 % or less libopus 1.3 adds FEC only if
    /// the bitrate leaves room for it (64 kbit/s does, 32 does not: 0 packets of 530); above 5 %
    /// it narrows the band until FEC fits, which costs clean speech more than the FEC gives back.
    public var expectedLossPercent: Int = 5
    /// Discontinuous transmission: send almost nothing while the room is silent.
    public var dtx: Bool = false

    public init() {}

    public static let applications = ["voip", "restricted_lowdelay"]
    public static let bitrateRange = 6000...510_000
    public static let complexityRange = 0...10
    public static let expectedLossRange = 0...100
}

/// `[jitter]`: the receive buffer of each remote stream.
public struct JitterSection: Sendable, Equatable {
    /// Smallest and largest delay the adaptive buffer may choose, ms. The target is the measured
    /// jitter's 95th percentile plus half a frame plus the margin the path's tail needs (a quarter
    /// to half a frame, see `TargetPolicy`): no floor is needed, 0 leaves it to the measurement.
    public var minDelayMs: Double = 0
    public var maxDelayMs: Double = 200
    /// Follow the remote sound card's clock by resampling (±1000 ppm at most).
    public var driftCorrection: Bool = true

    public init() {}

    public static let delayRange: ClosedRange<Double> = 0...1000
}

// MARK: - Loading, parsing, validating, rendering

extension DaemonConfig {
    /// Reads and parses the file at `path`.
    /// - Throws: `ConfigError` (source `path`) when the file cannot be read or is invalid.
    public static func load(path: String) throws -> DaemonConfig {
        try parse(readTextFile(path), source: path)
    }

    /// Parses configuration text. Missing keys take their defaults.
    /// - Parameter source: the file name used in error messages.
    /// - Throws: `ConfigError` listing every problem found (a TOML syntax error stops parsing,
    ///   so it is reported alone).
    public static func parse(_ text: String, source: String = "<config>") throws -> DaemonConfig {
        try readTerminalFile(text, source: source).config
    }

    /// A terminal's file: its values and the dotted keys it set. A terminal of a site (`[site] id`
    /// set) keeps only the box's own keys here; the site's come signed (`SiteDocument`), and the
    /// checks across keys wait for them (`SiteDocument.configuration(for:local:)`).
    static func readTerminalFile(_ text: String, source: String) throws -> (config: DaemonConfig, present: Set<String>) {
        let (root, locator) = try tomlRoot(text, source: source)
        var config = DaemonConfig()
        var issues: [ConfigIssue] = []
        var present: Set<String> = []  // dotted keys read from the file

        func report(_ path: [String], _ problem: String) {
            issues.append(ConfigIssue(key: path.joined(separator: "."), problem: problem, line: locator.line(of: path)))
        }

        let ofSite = (root["site"]?.table?["id"]?.string).map { !$0.isEmpty } ?? false
        readSections(root, at: [], into: &config, present: &present, report: report) { section, key in
            guard ofSite, isSiteWide(section, key) else { return nil }
            return "belongs in the site document: site.id is set, so this file keeps only the terminal's own settings"
        }
        // A key whose value could not be read is reported once, for that: its rules would only
        // see the default it kept.
        let unreadable = Set(issues.map(\.key))
        if ofSite {
            for (path, problem) in config.ruleIssues(present: present, terminalOnly: true)
            where !unreadable.contains(path.joined(separator: ".")) { report(path, problem) }
        } else {
            config.applyCallDefaults(present: present)
            for (path, problem) in config.ruleIssues(present: present)
            where !unreadable.contains(path.joined(separator: ".")) { report(path, problem) }
        }
        try throwIfAny(issues, source: source)
        return (config, present)
    }

    /// The TOML table of `text`, after the checks toml++ would get wrong (a NUL byte ends its C
    /// string; a header without a name), and a locator for line numbers.
    static func tomlRoot(_ text: String, source: String) throws -> (TOMLTable, KeyLocator) {
        if let nul = text.utf8.firstIndex(of: 0) {
            let line = text.utf8[..<nul].count(where: { $0 == UInt8(ascii: "\n") }) + 1
            throw ConfigError(source: source, issues: [
                ConfigIssue(key: "", problem: "the file contains a NUL byte", line: line)
            ])
        }
        if let bad = TOMLHeaderCheck.firstBadHeader(in: text) {
            throw ConfigError(source: source, issues: [
                ConfigIssue(
                    key: KeyLocator(text).context(ofLine: bad.line).joined(separator: "."),
                    problem: "a table header must begin with a name, like [room] or [rooms.empfang]",
                    line: bad.line, column: bad.column)
            ])
        }
        do {
            return (try TOMLTable(string: text), KeyLocator(text))
        } catch let error as TOMLParseError {
            let line = error.source.begin.line
            let key = KeyLocator(text).context(ofLine: line).joined(separator: ".")
            var problem = error.description
            if problem.hasSuffix("could not determine value type") {
                problem += " (text values need double quotes: key = \"value\")"
            }
            throw ConfigError(source: source, issues: [
                ConfigIssue(key: key, problem: problem, line: line, column: error.source.begin.column)
            ])
        }
    }

    /// Reads the sections and tables of `table` into `config`, recording the dotted keys found
    /// ("audio.period_ms", "rooms.labor.address") in `present`. `path` is where `table` sits
    /// ([] for a whole file, ["kinds", "wall"] inside a site document); names in `skipping` are the
    /// caller's; `misplaced` says why a key (nil: a whole table such as rooms) may not be set here.
    static func readSections(_ table: TOMLTable, at path: [String], skipping: Set<String> = [],
                             into config: inout DaemonConfig, present: inout Set<String>,
                             report: ([String], String) -> Void,
                             misplaced: (_ section: String, _ key: String?) -> String?) {
        func reportHere(_ p: [String], _ problem: String) { report(path + p, problem) }
        for (sectionName, sectionValue) in table where !skipping.contains(sectionName) {
            if tableOfTablesNames.contains(sectionName) {
                if let problem = misplaced(sectionName, nil) {
                    reportHere([sectionName], problem)
                    continue
                }
                _ = readCallTables(sectionName, sectionValue, into: &config, present: &present, report: reportHere)
                continue
            }
            guard let section = sections.first(where: { $0.name == sectionName }) else {
                if sectionValue.type == .table {
                    let hint = Spelling.closest(to: sectionName, among: sections.map(\.name) + tableOfTablesNames)
                    reportHere([sectionName], "unknown section" + (hint.map { " (did you mean [\($0)]?)" } ?? ""))
                } else {
                    reportHere([sectionName], "unknown key" + didYouMean(sectionName, in: nil))
                }
                continue
            }
            guard let fields = sectionValue.table else {
                reportHere([sectionName], "expected a table (the [\(sectionName)] section), got \(TOMLRead.describe(sectionValue))")
                continue
            }
            for (keyName, value) in fields {
                let keyPath = [sectionName, keyName]
                guard let key = section.keys.first(where: { $0.name == keyName }) else {
                    reportHere(keyPath, "unknown key" + didYouMean(keyName, in: section))
                    continue
                }
                if let problem = misplaced(sectionName, keyName) {
                    reportHere(keyPath, problem)
                    continue
                }
                do {
                    try key.read(value, &config)
                    present.insert(keyPath.joined(separator: "."))
                } catch {
                    reportHere(keyPath + (error.entry.map { [$0] } ?? []), error.text)
                }
            }
        }
    }

    /// Throws `ConfigError` with `issues` in file order, when there are any.
    static func throwIfAny(_ issues: [ConfigIssue], source: String) throws {
        guard !issues.isEmpty else { return }
        // File order; issues without a line last, in the order found.
        let ordered = issues.enumerated().sorted {
            ($0.element.line ?? Int.max, $0.offset) < ($1.element.line ?? Int.max, $1.offset)
        }.map(\.element)
        throw ConfigError(source: source, issues: ordered)
    }

    /// Checks values set in code (e.g. from command-line overrides) against the same rules as
    /// the file. Issues name the file keys.
    /// - Throws: `ConfigError` with source `source`.
    public func validate(source: String = "<config>") throws {
        let issues = ruleIssues(present: nil).map {
            ConfigIssue(key: $0.path.joined(separator: "."), problem: $0.problem)
        }
        if !issues.isEmpty { throw ConfigError(source: source, issues: issues) }
    }

    /// A complete TOML file with every key, its current value and its documentation (meaning,
    /// allowed values, default, whether SIGHUP applies it). `parse(rendered())` gives back `self`.
    public func rendered() -> String {
        """
            # intercomd configuration (TOML), as printed by `intercomd --print-default-config`.
            # Every key is optional: a missing key takes the default shown in its comment.
            # Unknown keys and sections are errors.

            """ + renderedSections()
    }

    /// `config/intercomd.example.toml`: every section, calls included, with example values where a
    /// terminal needs one, and commented examples of the tables. A unit test keeps the file equal to it.
    public static func exampleFile() -> String {
        var example = DaemonConfig.default
        example.audio.captureDevice = "roomA"
        example.audio.playbackDevice = "roomA"
        return """
            # intercomd configuration: example for a room terminal (rendered from the configuration
            # schema by `intercomd --print-example-config`; edit the schema, not this file).
            #
            # Copy to /etc/intercomd.toml (or any path given with --config) and edit. Every key is
            # optional: a key you delete takes the default named in its comment. Misspelled or unknown
            # keys are errors; intercomd lists every problem with its line and refuses to start.

            """ + example.renderedSections()
    }

    /// Every section in schema order, each key under its documentation; after `[room]` the
    /// practice's tables (rooms, buttons, groups, notification types), or a commented example of
    /// them when there are none.
    func renderedSections() -> String {
        var out = ""
        for section in Self.sections {
            out += Self.render(section, of: self)
            // A site's terminal: the tables and the site's keys are in its site document.
            if section.name == "room", !ofSite { out += renderedTables() }
        }
        return out
    }

    /// One section of a rendered file: its header, and each key under its documentation.
    static func render(_ section: SchemaSection, of config: DaemonConfig) -> String {
        let keys = section.keys.filter { !config.ofSite || !isSiteWide(section.name, $0.name) }
        guard !keys.isEmpty else { return "" }
        var out = "\n[\(section.name)]\n" + comment(section.comment)
        for key in keys {
            let allowed = key.allowed.isEmpty ? "" : "Allowed: \(key.allowed). "
            out += "\n" + comment(key.comment + ".")
            out += comment("\(allowed)Default: \(key.render(.default)). \(key.reload.words).")
            out += "\(key.name) = \(key.render(config))\n"
        }
        return out
    }

    /// `text` as TOML comment lines, wrapped at 96 columns unless `wrap` is false.
    static func comment(_ text: String, wrap: Bool = true) -> String {
        var out = ""
        for paragraph in text.split(separator: "\n", omittingEmptySubsequences: false) {
            guard wrap else { out += "# \(paragraph)\n"; continue }
            var line = ""
            for word in paragraph.split(separator: " ") {
                if !line.isEmpty, line.count + 1 + word.count > 94 {
                    out += "# \(line)\n"
                    line = ""
                }
                line += (line.isEmpty ? "" : " ") + word
            }
            out += "# \(line)\n"
        }
        return out
    }

    /// Problems with values against the rules of `schema`. `present` is the set of keys that
    /// came from the file (nil: all values are explicit), so that a default that clashes with
    /// another key's value can say so.
    /// `terminalOnly`: only the terminal's own keys, each alone (a terminal's file, before its
    /// site document joins it).
    func ruleIssues(present: Set<String>?, terminalOnly: Bool = false) -> [(path: [String], problem: String)] {
        var found: [(path: [String], problem: String)] = []
        for section in Self.sections {
            for key in section.keys where !terminalOnly || !Self.isSiteWide(section.name, key.name) {
                guard var problem = key.check(self) else { continue }
                let dotted = section.name + "." + key.name
                if let present, !present.contains(dotted) {
                    problem += "; \(dotted) is not set, so it has its default value"
                }
                found.append(([section.name, key.name], problem))
            }
        }
        if terminalOnly { return found }
        return found + callIssues(present: present, othersFound: !found.isEmpty)
    }

    /// `" (did you mean audio.period_ms?)"` for a close known key, preferring `section`,
    /// else `""`.
    static func didYouMean(_ keyName: String, in section: SchemaSection?) -> String {
        if let section, let hint = Spelling.closest(to: keyName, among: section.keys.map(\.name)) {
            return " (did you mean \(section.name).\(hint)?)"
        }
        let all = sections.flatMap { s in s.keys.map { (s.name, $0.name) } }
        if let hint = Spelling.closest(to: keyName, among: all.map(\.1)),
            let match = all.first(where: { $0.1 == hint })
        {
            return " (did you mean \(match.0).\(match.1)?)"
        }
        return ""
    }

    /// The whole text of a file, or `ConfigError` naming the path and the system's reason.
    static func readTextFile(_ path: String) throws -> String {
        func failure(_ problem: String) -> ConfigError {
            ConfigError(source: path, issues: [ConfigIssue(key: "", problem: problem)])
        }
        let bytes: [UInt8]
        do {
            guard let read = try WholeFile.read(path) else {
                throw failure(SystemError("open", .noSuchFileOrDirectory).cannotText)
            }
            bytes = read
        } catch let error as SystemError {
            throw failure(error.cannotText)
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw failure("the file is not valid UTF-8 text")
        }
        return text
    }
}

// MARK: - Schema: every section and key of the file, in file order

/// A `[section]` of the file.
struct SchemaSection: Sendable {
    let name: String
    let comment: String
    let keys: [SchemaKey]
}

/// One key: everything known about it in one place. How it is read from TOML, checked and
/// written back; its documentation (rendered into `--print-default-config` and the example file);
/// whether SIGHUP applies it (`Daemon.reload` reads that from here). Its default is the
/// section struct's initial value, the one place a default is written.
struct SchemaKey: Sendable {
    let name: String
    /// What the key means, written above it by `rendered()` (wrapped there; may be several sentences).
    let comment: String
    /// Allowed values in words ("2...4", "one of 2.5, 5, 10, 20"); empty when anything goes.
    let allowed: String
    /// Converts the TOML value and stores it; throws when the type is wrong.
    let read: @Sendable (TOMLValueConvertible, inout DaemonConfig) throws(ValueProblem) -> Void
    /// The problem with the stored value, or nil.
    let check: @Sendable (DaemonConfig) -> String?
    /// The stored value as a TOML literal.
    let render: @Sendable (DaemonConfig) -> String
    /// Copies this key's value from the second configuration into the first.
    let adopt: @Sendable (inout DaemonConfig, DaemonConfig) -> Void
    /// When a changed value takes effect.
    var reload: Reload = .restart

    init(name: String, comment: String, allowed: String,
         read: @escaping @Sendable (TOMLValueConvertible, inout DaemonConfig) throws(ValueProblem) -> Void,
         check: @escaping @Sendable (DaemonConfig) -> String?, render: @escaping @Sendable (DaemonConfig) -> String,
         adopt: @escaping @Sendable (inout DaemonConfig, DaemonConfig) -> Void) {
        self.name = name
        self.comment = comment
        self.allowed = allowed
        self.read = read
        self.check = check
        self.render = render
        self.adopt = adopt
    }

    /// Whether the key has different values in `a` and `b`.
    func differs(_ a: DaemonConfig, _ b: DaemonConfig) -> Bool { render(a) != render(b) }

    /// The same key, applied by SIGHUP as `reload` says.
    func reloaded(_ reload: Reload) -> SchemaKey {
        var k = self
        k.reload = reload
        return k
    }
}

/// When a changed key takes effect.
public enum Reload: Sendable, Equatable {
    /// At the next start: it would mean reopening devices or sockets.
    case restart
    /// SIGHUP applies it at once, while audio runs.
    case live
    /// SIGHUP applies it once no call is running (a call in progress keeps its rules).
    case betweenCalls
    /// SIGHUP applies it once no call is running, by opening the audio devices again.
    case reopensAudio

    var words: String {
        switch self {
        case .restart: "Takes effect at restart"
        case .live: "SIGHUP applies it at once"
        case .betweenCalls: "SIGHUP applies it between calls"
        case .reopensAudio: "SIGHUP applies it between calls, opening the audio devices again"
        }
    }
}

/// Allowed values of a key.
struct Rule<Value>: Sendable {
    let allowed: String
    let problem: @Sendable (Value) -> String?

    static var any: Rule { Rule(allowed: "", problem: { _ in nil }) }
}

/// The unit a time is written in, in a configuration file.
enum DurationUnit: Sendable {
    case milliseconds, seconds

    func duration(_ count: Int) -> Duration {
        switch self {
        case .milliseconds: .milliseconds(count)
        case .seconds: .seconds(count)
        }
    }

    func count(_ d: Duration) -> Int {
        switch self {
        case .milliseconds: Int(d.milliseconds)
        case .seconds: Int(d.microseconds / 1_000_000)
        }
    }
}

extension Rule where Value == Int {
    static func range(_ r: ClosedRange<Int>) -> Rule {
        Rule(allowed: "\(r.lowerBound)...\(r.upperBound)") { v in
            r.contains(v) ? nil : "\(v) is not in range \(r.lowerBound)...\(r.upperBound)"
        }
    }
}

extension Rule where Value == Double {
    static func range(_ r: ClosedRange<Double>) -> Rule {
        let text = "\(formatNumber(r.lowerBound))...\(formatNumber(r.upperBound))"
        return Rule(allowed: text) { v in r.contains(v) ? nil : "\(formatNumber(v)) is not in range \(text)" }
    }

    static func oneOf(_ values: [Double]) -> Rule {
        let list = values.map(formatNumber).joined(separator: ", ")
        return Rule(allowed: "one of \(list)") { v in
            values.contains(v) ? nil : "\(formatNumber(v)) is not one of \(list)"
        }
    }
}

extension Rule where Value == String {
    static var nonEmpty: Rule { Rule(allowed: "") { $0.isEmpty ? "must not be empty" : nil } }

    static func oneOf(_ values: [String]) -> Rule {
        let list = values.joined(separator: ", ")
        return Rule(allowed: "one of \(list)") { v in
            if values.contains(v) { return nil }
            let hint = Spelling.closest(to: v, among: values).map { " (did you mean \($0)?)" } ?? ""
            return "\(TOMLWrite.string(v)) is not one of \(list)" + hint
        }
    }
}

extension SchemaKey {
    /// The same key with a further check that may look at other keys.
    func alsoChecking(_ extra: @escaping @Sendable (DaemonConfig) -> String?) -> SchemaKey {
        let first = check
        return SchemaKey(
            name: name, comment: comment, allowed: allowed, read: read,
            check: { first($0) ?? extra($0) }, render: render, adopt: adopt).reloaded(reload)
    }

    typealias Path<V> = WritableKeyPath<DaemonConfig, V> & Sendable

    static func string(_ name: String, _ path: Path<String>, _ comment: String, _ rule: Rule<String> = .nonEmpty) -> SchemaKey {
        SchemaKey(
            name: name, comment: comment, allowed: rule.allowed,
            read: { value, config throws(ValueProblem) in config[keyPath: path] = try TOMLRead.string(value) },
            check: { rule.problem($0[keyPath: path]) },
            render: { TOMLWrite.string($0[keyPath: path]) },
            adopt: { $0[keyPath: path] = $1[keyPath: path] })
    }

    /// An optional file path; `""` in the file means none.
    static func optionalPath(_ name: String, _ path: Path<String?>, _ comment: String) -> SchemaKey {
        SchemaKey(
            name: name, comment: comment, allowed: "\"\" = none",
            read: { value, config throws(ValueProblem) in
                let s = try TOMLRead.string(value)
                config[keyPath: path] = s.isEmpty ? nil : s
            },
            check: { _ in nil },
            render: { TOMLWrite.string($0[keyPath: path] ?? "") },
            adopt: { $0[keyPath: path] = $1[keyPath: path] })
    }

    /// An array of strings, each checked by `element` (nil = fine).
    static func strings(_ name: String, _ path: Path<[String]>, _ comment: String, allowed: String,
                        _ element: @escaping @Sendable (String) -> String?) -> SchemaKey {
        SchemaKey(
            name: name, comment: comment, allowed: allowed,
            read: { value, config throws(ValueProblem) in config[keyPath: path] = try TOMLRead.strings(value) },
            check: { c in
                for (i, v) in c[keyPath: path].enumerated() {
                    if let p = element(v) { return "element \(i + 1) \(TOMLWrite.string(v)): \(p)" }
                }
                return nil
            },
            render: { "[" + $0[keyPath: path].map(TOMLWrite.string).joined(separator: ", ") + "]" },
            adopt: { $0[keyPath: path] = $1[keyPath: path] })
    }

    static func bool(_ name: String, _ path: Path<Bool>, _ comment: String) -> SchemaKey {
        SchemaKey(
            name: name, comment: comment, allowed: "true or false",
            read: { value, config throws(ValueProblem) in config[keyPath: path] = try TOMLRead.bool(value) },
            check: { _ in nil },
            render: { String($0[keyPath: path]) },
            adopt: { $0[keyPath: path] = $1[keyPath: path] })
    }

    static func int(_ name: String, _ path: Path<Int>, _ comment: String, _ rule: Rule<Int>) -> SchemaKey {
        SchemaKey(
            name: name, comment: comment, allowed: rule.allowed,
            read: { value, config throws(ValueProblem) in config[keyPath: path] = try TOMLRead.int(value) },
            check: { rule.problem($0[keyPath: path]) },
            render: { String($0[keyPath: path]) },
            adopt: { $0[keyPath: path] = $1[keyPath: path] })
    }

    /// A time, written in the file as a whole number of `unit`s and kept as a `Duration`.
    static func duration(_ name: String, _ path: Path<Duration>, _ unit: DurationUnit, _ comment: String,
                         _ range: ClosedRange<Int>) -> SchemaKey {
        let rule = Rule<Int>.range(range)
        return SchemaKey(
            name: name, comment: comment, allowed: rule.allowed,
            read: { value, config throws(ValueProblem) in config[keyPath: path] = unit.duration(try TOMLRead.int(value)) },
            check: { rule.problem(unit.count($0[keyPath: path])) },
            render: { String(unit.count($0[keyPath: path])) },
            adopt: { $0[keyPath: path] = $1[keyPath: path] })
    }

    /// One of an enumeration's cases, written as its raw string.
    static func choice<E: RawRepresentable & CaseIterable & Sendable>(_ name: String, _ path: Path<E>, _ comment: String) -> SchemaKey
        where E.RawValue == String {
        let rule = Rule<String>.oneOf(E.allCases.map(\.rawValue))
        return SchemaKey(
            name: name, comment: comment, allowed: rule.allowed,
            read: { value, config throws(ValueProblem) in
                let text = try TOMLRead.string(value)
                guard let chosen = E(rawValue: text) else { throw ValueProblem(rule.problem(text) ?? "not allowed") }
                config[keyPath: path] = chosen
            },
            check: { _ in nil },
            render: { TOMLWrite.string($0[keyPath: path].rawValue) },
            adopt: { $0[keyPath: path] = $1[keyPath: path] })
    }

    /// An optional "a.b.c.d:port" (`""` in the file: none), parsed once when read; `problem`
    /// checks the parsed endpoint further.
    static func endpoint(_ name: String, _ path: Path<IPv4Endpoint?>, _ comment: String, allowed: String,
                         _ problem: @escaping @Sendable (IPv4Endpoint?) -> String?) -> SchemaKey {
        SchemaKey(
            name: name, comment: comment, allowed: allowed,
            read: { value, config throws(ValueProblem) in
                let text = try TOMLRead.string(value)
                if text.isEmpty { config[keyPath: path] = nil; return }
                do throws(IPv4ParseError) { config[keyPath: path] = try IPv4Endpoint.parse(text) } catch {
                    throw ValueProblem("\(TOMLWrite.string(text)) is not an IPv4 address and port (a.b.c.d:port): \(error.problem)")
                }
            },
            check: { problem($0[keyPath: path]) },
            render: { TOMLWrite.string($0[keyPath: path]?.description ?? "") },
            adopt: { $0[keyPath: path] = $1[keyPath: path] })
    }

    static func double(_ name: String, _ path: Path<Double>, _ comment: String, _ rule: Rule<Double>) -> SchemaKey {
        SchemaKey(
            name: name, comment: comment, allowed: rule.allowed,
            read: { value, config throws(ValueProblem) in config[keyPath: path] = try TOMLRead.double(value) },
            check: { rule.problem($0[keyPath: path]) },
            render: { formatNumber($0[keyPath: path]) },
            adopt: { $0[keyPath: path] = $1[keyPath: path] })
    }
}

extension DaemonConfig {
    /// Every section and key without calls, in the order `rendered()` writes them. Defaults are NOT here
    /// (see the section structs); only names, comments and allowed values.
    static let schema: [SchemaSection] = [
        SchemaSection(name: "audio", comment: "Sound devices and timing.", keys: [
            .bool("enabled", \.audio.enabled,
                  "false: no sound devices are opened. For a terminal that only takes part in the site's signalling, such as the site service's member on a server (docs/site-service.md): it sends and receives notifications, shows presence and history, and neither places nor takes calls (callers see it decline, not permitted)"),
            .string("capture_device", \.audio.captureDevice,
                    "ALSA capture (microphone) device. On a real sound card use the name `arecord -L` prints, e.g. \"plughw:CARD=Device,DEV=0\" (stable across reboots, ALSA converts formats) or \"hw:0,0\" (card 0, device 0: no conversion, numbers can change). \"roomA\" is a room of the virtual test rig").reloaded(.reopensAudio),
            .string("playback_device", \.audio.playbackDevice,
                    "ALSA playback (loudspeaker) device, as `aplay -L` lists it").reloaded(.reopensAudio),
            .int("sample_rate", \.audio.sampleRate, "Sample rate in Hz",
                 Rule(allowed: "only 48000 is supported for now") { v in
                     AudioSection.supportedSampleRates.contains(v)
                         ? nil : "\(v) is not supported (only 48000 for now)"
                 }),
            .double("period_ms", \.audio.periodMs,
                    "Period (audio block) in milliseconds. Shorter = less latency, but more CPU wake-ups and more risk of dropouts; 10 ms = 480 frames at 48 kHz",
                    .oneOf(AudioSection.supportedPeriodsMs)),
            .int("buffer_periods", \.audio.bufferPeriods,
                 "ALSA buffer length in periods: the most the speaker can have queued. What it holds beyond playback_fill_periods is a reserve for a late wake-up and costs no latency",
                 .range(AudioSection.bufferPeriodsRange)).reloaded(.reopensAudio),
            SchemaKey(name: "playback_fill_periods",
                      comment: "Periods the engine keeps queued in the speaker's ALSA buffer: its playback latency (2 x 10 ms = 20 ms), plus what a sound server holds beyond the buffer; the rest of the buffer is a reserve for a late wake-up. 0 keeps the whole buffer full. Fewer = less delay, but a late wake-up is heard as a dropout (counted as an xrun); two is what a sound card needs at least",
                      allowed: "0 (the whole buffer) or 1...buffer_periods",
                      read: { value, config throws(ValueProblem) in config.audio.playbackFillPeriods = try TOMLRead.int(value) },
                      check: { c in
                          let v = c.audio.playbackFillPeriods, buffer = c.audio.bufferPeriods
                          let valid = AudioSection.bufferPeriodsRange.contains(buffer)
                          if v < 0 { return "\(v) is not in range 0...\(valid ? buffer : AudioSection.bufferPeriodsRange.upperBound)" }
                          // An invalid buffer_periods is reported under its own key.
                          return valid && v > buffer ? "\(v) is more than audio.buffer_periods (\(buffer))" : nil
                      },
                      render: { String($0.audio.playbackFillPeriods) },
                      adopt: { $0.audio.playbackFillPeriods = $1.audio.playbackFillPeriods }).reloaded(.reopensAudio),
            .bool("link_devices", \.audio.linkDevices,
                  "Start capture and playback together (snd_pcm_link) when the devices allow it, so they stay in step").reloaded(.reopensAudio),
        ]),
        SchemaSection(name: "realtime", comment: "Scheduling of the audio thread.", keys: [
            .int("priority", \.realtime.priority,
                 "SCHED_FIFO priority of the audio thread. Needs CAP_SYS_NICE or an rtprio limit (e.g. /etc/security/limits.d)",
                 Rule(allowed: "0 = normal scheduling, 1...99 = SCHED_FIFO") { v in
                     RealtimeSection.priorityRange.contains(v)
                         ? nil : "\(v) is not in range 0...99 (0 = normal scheduling, 1...99 = SCHED_FIFO)"
                 }).reloaded(.reopensAudio),
            .bool("lock_memory", \.realtime.lockMemory,
                  "Lock all memory (mlockall) so the audio thread never waits for paging. Needs CAP_IPC_LOCK or a memlock limit"),
        ]),
        SchemaSection(name: "echo", comment: "Acoustic echo cancellation and noise suppression (speexdsp).", keys: [
            .bool("enabled", \.echo.enabled, "Cancel the loudspeaker's echo in the microphone signal (speexdsp)").reloaded(.live),
            .int("tail_ms", \.echo.tailMs,
                 "Longest echo path cancelled, in milliseconds: the room's reverberation plus the sound devices' latency. Larger costs more CPU",
                 .range(EchoSection.tailMsRange)),
            .int("noise_suppress_db", \.echo.noiseSuppressDb,
                 "Maximum noise attenuation in dB (speexdsp's preprocessor); 0 = no noise suppression. Below 0 (or with agc) the preprocessor runs: it reshapes the voice's spectrum (about -0.2 PESQ on clean speech at -15) and delays by one frame (10 ms)",
                 .range(EchoSection.noiseSuppressDbRange)),
            .int("echo_suppress_db", \.echo.echoSuppressDb,
                 "Maximum attenuation of the echo left after cancellation, in dB, in the bands where it is and in the frame it is in (no delay); 0 with echo_suppress_active_db = 0 turns it off. Where the far end is silent nothing is touched",
                 .range(EchoSection.echoSuppressDbRange)),
            .int("echo_suppress_active_db", \.echo.echoSuppressActiveDb,
                 "The same while the person in the room talks too, in dB. Closer to 0 keeps double talk natural; more negative hides more echo",
                 .range(EchoSection.echoSuppressDbRange)),
            .bool("agc", \.echo.agc, "Automatic gain control of the microphone"),
            .bool("loop_canceller", \.echo.loopCanceller,
                  "Loop canceller: removes this terminal's own voice where it comes back through another terminal's speaker (two terminals that hear each other: one room, a thin wall, an open door), which the echo canceller cannot see; it learns the loop from the packets sent, and subtracts it only while its estimate shows a loop (it lowers the microphone by 2 dB or more), so a terminal with no loop sends its talker untouched. Works with enabled = true").reloaded(.live),
            .int("loop_tail_ms", \.echo.loopTailMs,
                 "How long a loop through another terminal the loop canceller models, in milliseconds past the shortest: the far jitter buffer's range and both rooms' reverberation. Larger costs more CPU",
                 .range(EchoSection.loopTailMsRange)),
            .bool("howl_guard", \.echo.howlGuard,
                  "Howl guard, the last resort behind the loop canceller: limits the peaks of what is sent to -6 dBFS (a talker below that is never touched), and if a loop through another terminal is held there for seconds anyway, lowers the microphone by 20 dB for a second to break it. Works with enabled = true").reloaded(.live),
            .bool("residual_gate", \.echo.residualGate,
                  "Residual echo gate: while the far end talks, attenuates by 60 dB whatever the canceller leaves that is not clearly the person in the room. Until the canceller has learned the room (the first second of a call) this works like a half-duplex speakerphone; afterwards double talk passes. The notes of the terminal's own tones are always echo to it, so the far end never hears them"),
        ]),
        SchemaSection(name: "mixer", comment: "Mute and gain at start-up.", keys: [
            .bool("mic_muted", \.mixer.micMuted, "Start with the microphone muted"),
            .bool("speaker_muted", \.mixer.speakerMuted, "Start with the speaker muted"),
            .double("speaker_gain_db", \.mixer.speakerGainDb, "Loudspeaker gain in dB",
                    .range(MixerSection.speakerGainDbRange)).reloaded(.live),
            .double("mic_gain_db", \.mixer.micGainDb, "Microphone gain in dB",
                    .range(MixerSection.micGainDbRange)).reloaded(.live),
        ]),
        SchemaSection(name: "retry", comment: "Sound devices that cannot be opened (unplugged USB card, device busy).", keys: [
            .bool("enabled", \.retry.enabled,
                  "Keep retrying a device that cannot be opened instead of exiting"),
            .int("initial_ms", \.retry.initialMs,
                 "Delay before the first retry in milliseconds; later retries wait longer, up to max_ms",
                 .range(RetrySection.initialMsRange)),
            .int("max_ms", \.retry.maxMs, "Longest delay between retries in milliseconds",
                 Rule(allowed: ">= initial_ms") { _ in nil })
                .alsoChecking { c in
                    c.retry.maxMs >= c.retry.initialMs
                        ? nil : "\(c.retry.maxMs) is less than retry.initial_ms (\(c.retry.initialMs))"
                },
        ]),
        SchemaSection(name: "log", comment: "Logging.", keys: [
            .string("level", \.log.level, "Least severe level logged", .oneOf(LogSection.levels)),
            .double("stats_interval_s", \.log.statsIntervalS,
                    "Seconds between statistics log messages (levels, xruns, streams); `intercomctl stats` reads the same counters at any time",
                    Rule(allowed: "0 = off, else 0.5...3600") { v in
                        v == 0 || LogSection.statsIntervalRange.contains(v)
                            ? nil : "\(formatNumber(v)) is neither 0 (off) nor in range 0.5...3600"
                    }),
        ]),
        SchemaSection(name: "local", comment: "Local mode only (a test without network): a file plays the far end, the microphone can be recorded. A room terminal leaves these empty.", keys: [
            .optionalPath("far_end_wav", \.local.farEndWav, "WAV file played (looping) as far-end speech"),
            .optionalPath("record_wav", \.local.recordWav, "WAV file receiving the processed microphone signal (after echo cancellation)"),
            .optionalPath("record_raw_wav", \.local.recordRawWav, "WAV file receiving the unprocessed microphone signal"),
            .double("duration_s", \.local.durationS, "Run time in seconds",
                    Rule(allowed: "0 = until stopped, else > 0") { v in
                        v == 0 || v > 0 && v.isFinite
                            ? nil : "\(formatNumber(v)) is neither 0 (until stopped) nor a positive number of seconds"
                    }),
        ]),
        SchemaSection(name: "network", comment: "Media to and from the connected rooms (Opus in RTP over UDP).", keys: [
            .int("listen_port", \.network.listenPort, "UDP port media is received on. With calls it follows this room's media_port in [rooms] (leave it out, or set the same value)",
                 Rule(allowed: "0 = receive nothing, else 1...65535") { v in
                     (0...65535).contains(v) ? nil : "\(v) is not a port (0...65535)"
                 }),
            .string("bind_address", \.network.bindAddress, "Local IPv4 address the media socket is bound to; \"0.0.0.0\" = every interface",
                    Rule(allowed: "an IPv4 address") { ipv4Problem($0) }),
            .strings("peers", \.network.peers, "Where this room's microphone goes: the address of each connected room, or of a multicast group several rooms receive. With calls ([room] id set) leave it empty: the calls decide where audio goes",
                     allowed: "\"a.b.c.d:port\" each; [] = send nothing") { endpointProblem($0) }
                .alsoChecking { clearStreamProblem($0, $0.network.peers) },
            .strings("multicast_groups", \.network.multicastGroups, "Multicast groups this room receives on listen_port, e.g. [\"239.255.0.1\"]",
                     allowed: "\"a.b.c.d\" each, 224.0.0.0...239.255.255.255") { v in
                         let group: UInt32
                         do throws(IPv4ParseError) { group = try IPv4Endpoint.parseAddress(v) } catch { return "is not an IPv4 address (a.b.c.d): \(error.problem)" }
                         return IPv4Endpoint(address: group, port: 0).isMulticast ? nil : "is not a multicast address (224...239.x.x.x)"
                     }.alsoChecking { clearStreamProblem($0, $0.network.multicastGroups) },
            .string("multicast_interface", \.network.multicastInterface,
                    "Address of the network interface multicast goes through; 0.0.0.0 = the kernel chooses by its routes",
                    Rule(allowed: "an IPv4 address") { ipv4Problem($0) }),
            .int("multicast_ttl", \.network.multicastTtl, "Hops multicast may cross (1 = this network only)",
                 .range(NetworkSection.multicastTtlRange)),
            .bool("multicast_loopback", \.network.multicastLoopback,
                  "Deliver our own multicast back to this host. Only for several rooms on one machine (tests); a terminal must not hear itself"),
            .int("dscp", \.network.dscp, "DiffServ code point of media packets: 46 = EF, expedited forwarding, which switches with QoS serve before bulk traffic",
                 .range(NetworkSection.dscpRange)),
            .int("payload_type", \.network.payloadType, "RTP payload type of Opus (dynamic); every room of the installation uses the same",
                 .range(NetworkSection.payloadTypeRange)),
            .int("max_streams", \.network.maxStreams, "Remote streams mixed at once; more are refused until one goes idle",
                 .range(NetworkSection.maxStreamsRange)),
            .int("stream_timeout_ms", \.network.streamTimeoutMs, "A remote stream silent this long (ms) leaves the mix",
                 .range(NetworkSection.streamTimeoutMsRange)),
            .int("priority", \.network.priority, "SCHED_FIFO priority of the network thread (0 = normal); keep it below realtime.priority",
                 .range(RealtimeSection.priorityRange)),
        ]),
        SchemaSection(name: "opus", comment: "The codec (Opus).", keys: [
            .string("application", \.opus.application,
                    "voip: speech mode with forward error correction and DTX available. restricted_lowdelay: the minimum delay (2.5 ms less codec look-ahead), no FEC; pair it with audio.period_ms = 2.5 or 5",
                    .oneOf(OpusSection.applications)),
            .int("bitrate", \.opus.bitrate, "Bits per second. 64000 gives wide-band speech with room for FEC (PESQ-WB 3.43 through the codec alone, FEC in 78 % of packets of speech; 32000 with FEC: 2.11, since libopus narrows the band to fit the FEC). About 100 kbit/s per stream on the wire with the headers", .range(OpusSection.bitrateRange)),
            .int("complexity", \.opus.complexity, "Encoder effort (more = better sound for the bits, more CPU)",
                 .range(OpusSection.complexityRange)),
            .bool("fec", \.opus.fec, "In-band forward error correction: each packet carries a coarse copy of the one before, so a single lost packet is rebuilt. Works with 10 and 20 ms frames in voip mode"),
            .int("expected_loss_percent", \.opus.expectedLossPercent, "Packet loss the encoder prepares the FEC for, in percent. Above 5 libopus always makes room for FEC, narrowing the band if it must; at 5 or less only if the bitrate leaves room, which 64 kbit/s does and 32 kbit/s does not (`intercomctl stats` shows fec_carried)",
                 .range(OpusSection.expectedLossRange)),
            .bool("dtx", \.opus.dtx, "Discontinuous transmission: send almost nothing while the room is silent"),
        ]),
        SchemaSection(name: "jitter", comment: "Receive buffer of each remote stream.", keys: [
            .double("min_delay_ms", \.jitter.minDelayMs, "Smallest delay the adaptive jitter buffer may choose, ms. The buffer follows the measured network jitter (its 95th percentile plus half a frame plus a margin for the path's tail, a quarter to half a frame) between min_delay_ms and max_delay_ms; 0 leaves it to the measurement",
                    .range(JitterSection.delayRange)),
            .double("max_delay_ms", \.jitter.maxDelayMs, "Largest delay the adaptive jitter buffer may choose, ms",
                    Rule(allowed: ">= min_delay_ms, <= 1000") { v in
                        JitterSection.delayRange.contains(v) ? nil : "\(formatNumber(v)) is not in range 0...1000"
                    })
                .alsoChecking { c in
                    c.jitter.maxDelayMs >= c.jitter.minDelayMs
                        ? nil : "\(formatNumber(c.jitter.maxDelayMs)) is less than jitter.min_delay_ms (\(formatNumber(c.jitter.minDelayMs)))"
                },
            .bool("drift_correction", \.jitter.driftCorrection, "Follow the remote sound card's clock (they differ by up to a few hundred ppm) by resampling, so the delay neither creeps nor jumps"),
        ]),
        lightsSection,
        metricsSection,
        selfTestSection,
        testingSection,
    ]

    /// `self` with the value of every key of `new` that SIGHUP applies as `policy` says, and the
    /// names ("mixer.mic_gain_db") of those that changed.
    public func adopting(_ policy: Reload, from new: DaemonConfig) -> (config: DaemonConfig, keys: [String]) {
        var c = self
        var changed: [String] = []
        for section in Self.sections {
            for key in section.keys where key.reload == policy && key.differs(c, new) {
                key.adopt(&c, new)
                changed.append("\(section.name).\(key.name)")
            }
        }
        return (c, changed)
    }

    /// The keys ("audio.period_ms") and tables ("rooms", "buttons") whose values differ in `other`.
    public func differingKeys(from other: DaemonConfig) -> [String] {
        var out: [String] = []
        for section in Self.sections {
            for key in section.keys where key.differs(self, other) { out.append("\(section.name).\(key.name)") }
        }
        if rooms != other.rooms { out.append("rooms") }
        if buttons != other.buttons { out.append("buttons") }
        if groups != other.groups { out.append("groups") }
        if notifications != other.notifications { out.append("notifications") }
        return out
    }

    /// The names of the keys SIGHUP applies as `policy` says.
    public static func keys(reloaded policy: Reload) -> [String] {
        sections.flatMap { s in s.keys.filter { $0.reload == policy }.map { "\(s.name).\($0.name)" } }
    }

    /// Every fixed section: `schema`, then the call sections (ConfigCalls.swift), then the site's.
    static let sections = schema + callSchema + [siteSection]
}

/// Problem with an IPv4 address in dotted form, or nil.
func ipv4Problem(_ text: String) -> String? {
    do { _ = try IPv4Endpoint.parseAddress(text) } catch { return "is not an IPv4 address (a.b.c.d): \(error.problem)" }
    return nil
}

/// Problem with "a.b.c.d:port", or nil.
func endpointProblem(_ text: String) -> String? {
    let e: IPv4Endpoint
    do { e = try IPv4Endpoint.parse(text) } catch { return "is not an IPv4 address and port (a.b.c.d:port): \(error.problem)" }
    return e.port == 0 ? "port 0 cannot be sent to" : nil
}
