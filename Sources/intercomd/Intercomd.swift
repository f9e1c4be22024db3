import ArgumentParser
import Foundation
import IntercomDaemon
import Logging

@main
struct Intercomd: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "intercomd",
        abstract: "Room intercom terminal: ALSA capture, echo cancellation, mixing and playback in real time.")

    /// The command line from the kernel when the Swift runtime lost it. On Linux the runtime finds
    /// argv through `environ`, which a preloaded library may move first (swiftlang/swift#76080;
    /// libfaketime does, in the clock tests): the daemon would then read the default configuration
    /// instead of the one named, silently.
    static func main() {
        var arguments = CommandLine.arguments
        if arguments.isEmpty, let line = try? Data(contentsOf: URL(fileURLWithPath: "/proc/self/cmdline")) {
            arguments = line.split(separator: 0, omittingEmptySubsequences: false).dropLast().map { String(decoding: $0, as: UTF8.self) }
        }
        main(Array(arguments.dropFirst()))
    }

    @Option(name: .shortAndLong, help: "Configuration file (TOML).")
    var config: String = "/etc/intercomd/intercomd.toml"

    @Flag(help: "Validate the configuration, print the problems, and exit.")
    var checkConfig = false

    @Flag(help: "Print a complete configuration with every default and exit.")
    var printDefaultConfig = false

    @Flag(help: "Print the documented example configuration (config/intercomd.example.toml) and exit.")
    var printExampleConfig = false

    @Option(help: "Local mode: WAV file played as far-end speech (overrides local.far_end_wav).")
    var farEnd: String?

    @Option(help: "Local mode: record the processed microphone to this WAV (overrides local.record_wav).")
    var record: String?

    @Option(help: "Local mode: record the unprocessed microphone to this WAV (overrides local.record_raw_wav).")
    var recordRaw: String?

    @Option(help: "Stop after this many seconds (overrides local.duration_s).")
    var duration: Double?

    @Flag(help: "Measure the device round trip (a chirp from the speaker, found in the microphone) once and exit: for a stopped service; a running one is measured with `intercomctl loopback`. Exit status 2 on a problem.")
    var loopback = false

    @Option(help: "With --loopback: write the correlation plot to this SVG file.")
    var plot: String?

    @Flag(help: "With --loopback: print the result as one JSON line, the control socket's `loopback_result` reply, instead of the report.")
    var json = false

    func run() throws {
        if printDefaultConfig {
            print(DaemonConfig.default.rendered())
            return
        }
        if printExampleConfig {
            print(DaemonConfig.exampleFile(), terminator: "")
            return
        }
        Daemon.blockSignals()
        var cfg: DaemonConfig
        let loaded: TerminalConfiguration
        do {
            loaded = try TerminalConfiguration.load(path: config, creatingIdentity: !checkConfig)
            cfg = loaded.config
        } catch {
            FileHandle.standardError.write(Data("intercomd: invalid configuration\n\(error)\n".utf8))
            throw ExitCode(IntercomDaemon.ExitCode.config.rawValue)
        }
        if checkConfig {
            print("\(config): OK" + (loaded.site.map { " (site \(cfg.site.id) version \($0.version))" } ?? ""))
            return
        }
        if let farEnd { cfg.local.farEndWav = farEnd }
        if let record { cfg.local.recordWav = record }
        if let recordRaw { cfg.local.recordRawWav = recordRaw }
        if let duration { cfg.local.durationS = duration }
        do {
            try cfg.validate(source: "command line")
        } catch {
            FileHandle.standardError.write(Data("intercomd: invalid option\n\(error)\n".utf8))
            throw ExitCode(IntercomDaemon.ExitCode.config.rawValue)
        }

        let level = Logger.Level(rawValue: cfg.log.level) ?? .info
        LoggingSystem.bootstrap { label in
            var h = StreamLogHandler.standardError(label: label)
            h.logLevel = level
            return h
        }
        let log = Logger(label: "intercomd")
        let daemon: Daemon
        do {
            daemon = try Daemon(config: cfg, logger: log, site: loaded.site)
        } catch {
            log.critical("cannot start: \(error)")
            throw ExitCode(IntercomDaemon.ExitCode.software.rawValue)
        }
        daemon.configPath = config
        let code = loopback ? daemon.runLoopback(insertMs: 0, plot: plot, json: json) : daemon.run()
        if code != .ok { throw ExitCode(code.rawValue) }
    }
}
