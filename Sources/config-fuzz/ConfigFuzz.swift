import IntercomConfig

// libFuzzer target for the configuration parser (TOMLKit and our rules), built by
// fuzz/config/build.sh with -DFUZZING and -sanitize=fuzzer,address.
// Unlike the other targets this one needs SwiftPM (TOMLKit wraps the C++ toml++), so it is a
// target of the package; a plain `swift build` makes the stub below instead.
//
// Properties: any bytes either parse or give a ConfigError with issues (never a trap); a parsed
// configuration renders to TOML that parses back to the same configuration; what the daemon
// derives from a valid one (call settings, key map, control settings) does not trap. The same
// bytes read as a site document: a `ConfigError` with issues, or a document whose rendering reads
// back to the same rendering.

#if FUZZING
import FuzzDriver

@_cdecl("config_fuzz_main")
public func configFuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    runFuzzer(argc, argv) { data, size in fuzzOneInput(data, size) }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    fuzzSiteDocument(text)
    let config: DaemonConfig
    do {
        config = try DaemonConfig.parse(text, source: "fuzz.toml")
    } catch let error as ConfigError {
        precondition(!error.issues.isEmpty, "a ConfigError without issues")
        return 0
    } catch {
        preconditionFailure("not a ConfigError: \(error)")
    }
    do {
        let again = try DaemonConfig.parse(config.rendered(), source: "rendered")
        precondition(again == config, "parse(rendered()) differs from the parsed configuration")
    } catch {
        preconditionFailure("the rendered configuration does not parse: \(error)")
    }
    if config.callsEnabled {
        _ = config.callSettings()
        _ = config.keyMap()
    }
    _ = config.controlSettings()
    return 0
}

func fuzzSiteDocument(_ text: String) {
    let document: SiteDocument
    do {
        document = try SiteDocument.parse(text, source: "fuzz-site.toml")
    } catch let error as ConfigError {
        precondition(!error.issues.isEmpty, "a ConfigError without issues")
        return
    } catch {
        preconditionFailure("not a ConfigError: \(error)")
    }
    do {
        let rendered = document.rendered()
        let again = try SiteDocument.parse(rendered, source: "rendered").rendered()
        precondition(again == rendered, "a site document's rendering reads back differently")
    } catch {
        preconditionFailure("the rendered site document does not parse: \(error)")
    }
}
#else
@main
struct ConfigFuzzStub {
    static func main() {
        print("config-fuzz: build the fuzzer with fuzz/config/build.sh")
    }
}
#endif
