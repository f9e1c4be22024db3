// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "intercomd",
    products: [
        .executable(name: "intercomd", targets: ["intercomd"]),
        .executable(name: "intercom-bench", targets: ["intercom-bench"]),
        .executable(name: "impairment-relay", targets: ["impairment-relay"]),
        .executable(name: "intercomctl", targets: ["intercomctl"]),
        .executable(name: "intercom-site", targets: ["intercom-site"]),
        // The main job: a small practice on the virtual audio rig (scripts/run.sh).
        .executable(name: "intercom-demo", targets: ["intercom-demo"]),
        // Test-only: preloaded into intercomd to make fsync slow (Tests/FsyncDelay).
        .library(name: "FsyncDelay", type: .dynamic, targets: ["FsyncDelay"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-system", from: "1.8.1"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/LebJe/TOMLKit", from: "0.6.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
        // The site service (intercom-site serve): HTTP over TLS, its database, its certificate.
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket", from: "2.8.1"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-certificates", from: "1.21.1"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.8.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
    ],
    targets: [
        // C libraries from Debian, one system-library target each (pkg-config names).
        .systemLibrary(name: "CALSA", pkgConfig: "alsa", providers: [.apt(["libasound2-dev"])]),
        .systemLibrary(name: "COpus", pkgConfig: "opus", providers: [.apt(["libopus-dev"])]),
        .systemLibrary(name: "CSpeexDSP", pkgConfig: "speexdsp", providers: [.apt(["libspeexdsp-dev"])]),
        .systemLibrary(name: "CSRTP", pkgConfig: "libsrtp2", providers: [.apt(["libsrtp2-dev"])]),
        .systemLibrary(name: "CGPIOD", pkgConfig: "libgpiod", providers: [.apt(["libgpiod-dev"])]),
        .systemLibrary(name: "CEspeakNG", pkgConfig: "espeak-ng", providers: [.apt(["libespeak-ng-dev"])]),
        // Counts heap allocations per thread; linked only into tests and the benchmark.
        .target(name: "CAllocCounter"),

        // The one system layer: errno error and EINTR retry, IPv4 endpoint, UDP socket, doorbell
        // (wake pipe), monotonic clock, worker thread. Everything else calls the C library through it.
        .target(name: "Posix", dependencies: [.product(name: "SystemPackage", package: "swift-system")]),
        // Lock-free rings and atomic cells between threads: no dependency on audio.
        .target(name: "RealTime", dependencies: ["Posix"]),
        // speexdsp (echo canceller, preprocessor, resampler, its jitter buffer for comparison): one wrapper file.
        .target(name: "SpeexDSP", dependencies: ["CSpeexDSP"]),
        // Echo cancellation around speexdsp: reference alignment, delay estimation, ERLE.
        .target(name: "EchoCancel", dependencies: ["SpeexDSP", "RealTime", "Posix", "SignalTools"]),
        // Measurement helpers and WAV files: used by the daemon's local mode, tests and benchmarks.
        .target(name: "SignalTools", dependencies: ["Posix"]),
        // The frame vocabulary every element of the chain speaks: a frame source, a decoder, a mixer input.
        .target(name: "Frames", dependencies: ["RealTime"]),
        // Opus (one wrapper file) and what its packets say about themselves.
        .target(name: "Codec", dependencies: ["COpus", "Frames"]),
        // ALSA devices, mixer, the audio engine (capture -> AEC -> rings -> mix -> playback).
        .target(name: "AudioPipeline", dependencies: ["CALSA", "Frames", "RealTime", "Posix", "EchoCancel"]),
        // RTP (RFC 3550) with the Opus payload format (RFC 7587): packet building and strict parsing.
        .target(name: "RTP"),
        // Seeded, deterministic network impairment (delay, jitter, loss, reordering, duplication)
        // and a UDP relay applying it: netem is not available on the test machines.
        .target(name: "Impairment", dependencies: ["SignalTools", "Posix"]),
        .executableTarget(name: "impairment-relay", dependencies: [
            "Impairment", "Posix", .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),
        // UDP sockets (unicast, multicast, DSCP), the network thread: microphone frame → Opus → RTP
        // → peers, and datagram → RTP parse → per-stream jitter buffer (a mixer slot); SRTP (SRTP.swift).
        .target(name: "Transport", dependencies: ["RTP", "Codec", "Frames", "Jitter", "RealTime", "Posix", "CSRTP"]),
        // Adaptive jitter buffer (issue 3).
        .target(name: "Jitter", dependencies: ["Frames", "RealTime", "Posix", "SpeexDSP"]),
        // Calls between rooms: vocabulary, signalling protocol, the call engine, history. No I/O.
        .target(name: "Calls", dependencies: ["Posix"]),
        // Terminal keys: evdev key presses → debounced actions, on their own thread; reopens lost devices.
        .target(name: "Keys", dependencies: ["Calls", "Posix"]),
        // Status lights: states → LEDs (LED class in sysfs, GPIO lines through libgpiod) on their own thread.
        .target(name: "Lights", dependencies: ["CGPIOD", "Posix"]),
        // A terminal's statistics in Prometheus's text format (docs/metrics.md).
        .target(name: "MetricsText", dependencies: ["Control", .product(name: "Prometheus", package: "swift-prometheus")]),
        // Reading notifications aloud: espeak-ng (one wrapper file) and the cache of spoken texts.
        .target(name: "Speech", dependencies: ["CEspeakNG", "SpeexDSP", "Posix"]),
        // Call history and small state (do-not-disturb) in JSON files, written atomically by a thread of their own.
        .target(name: "CallStore", dependencies: ["Calls", "Posix"]),
        // Test helper: slows every fsync of the process it is preloaded into.
        .target(name: "FsyncDelay", path: "Tests/FsyncDelay"),
        // Test helper: appends history entries until killed (the crash-safety test).
        .executableTarget(name: "callstore-crash-writer", dependencies: ["CallStore", "Calls"], path: "Tests/CallStoreCrashWriter"),
        // The control socket: Unix socket server, newline-delimited JSON protocol, event stream; and its client.
        .target(name: "Control", dependencies: ["Calls", "RealTime", "Posix", "SignalTools"]),
        .executableTarget(name: "intercomctl", dependencies: [
            "Control", "Calls", "SignalTools", .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),
        // The site key, and what is derived from it: sealed signalling; the administrator's signing
        // key and the signed site document (the envelope every terminal checks).
        .target(name: "SiteSecurity", dependencies: ["Posix", .product(name: "Crypto", package: "swift-crypto")]),
        // The site as one document: which one a terminal holds and whether an offered one replaces
        // it, and how it spreads between terminals (no I/O).
        .target(name: "Site", dependencies: ["SiteSecurity", "Calls", "Posix"]),
        // The administrator's side of a site: its folder (key, document, signed versions), signing,
        // handing a version to terminals, and what a change would change where (no HTTP).
        .target(name: "SiteAdmin", dependencies: ["IntercomConfig", "Site", "SiteSecurity", "Posix"]),
        // The administrator's tool: create a site, convert terminal files, check and sign documents.
        .executableTarget(name: "intercom-site", dependencies: [
            "IntercomConfig", "Site", "SiteAdmin", "SiteSecurity", "SiteService", "Posix", .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),
        // The site service: the practice manager's page and the practice software's API over HTTPS,
        // accounts, tokens and the audit log in one SQLite file (docs/site-service.md). Never in intercomd.
        .target(name: "SiteService", dependencies: [
            "Calls", "Control", "IntercomConfig", "Lights", "Posix", "SignalTools", "Site", "SiteAdmin", "SiteSecurity", "Speech",
            .product(name: "Hummingbird", package: "hummingbird"),
            .product(name: "HummingbirdCore", package: "hummingbird"),
            .product(name: "HummingbirdTLS", package: "hummingbird"),
            .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
            .product(name: "HTTPTypes", package: "swift-http-types"),
            .product(name: "NIOSSL", package: "swift-nio-ssl"),
            .product(name: "X509", package: "swift-certificates"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            .product(name: "GRDB", package: "GRDB.swift"),
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "_CryptoExtras", package: "swift-crypto"),
            .product(name: "Prometheus", package: "swift-prometheus"),
        ], resources: [
            .embedInCode("Resources/openapi.yaml"), .embedInCode("Resources/page/index.html"),
            .embedInCode("Resources/page/app.js"), .embedInCode("Resources/page/app.css"),
        ]),
        // The daemon's configuration: TOML in, checked settings out (nothing that runs).
        .target(name: "IntercomConfig", dependencies: [
            "Calls", "Control", "Keys", "Lights", "Posix", "SignalTools", "SiteSecurity",
            .product(name: "Logging", package: "swift-log"),
            .product(name: "TOMLKit", package: "TOMLKit"),
        ]),
        // The configuration parser's libFuzzer target (fuzz/config/build.sh); a stub otherwise.
        // It needs only Configuration, so its instrumented build leaves out swift-crypto.
        .target(name: "FuzzDriver"),
        .executableTarget(name: "config-fuzz", dependencies: ["IntercomConfig", "FuzzDriver"]),
        .executableTarget(name: "seal-fuzz", dependencies: ["SiteSecurity", "FuzzDriver"]),
        // Supervision, calls, media, local mode: everything intercomd does besides parsing argv.
        .target(name: "IntercomDaemon", dependencies: [
            "IntercomConfig", "AudioPipeline", "Codec", "Frames", "EchoCancel", "RealTime", "SignalTools", "Transport", "Jitter", "RTP",
            "Calls", "CallStore", "Control", "Keys", "Lights", "MetricsText", "Speech", "SiteSecurity", "Site", "Posix",
            .product(name: "Logging", package: "swift-log"),
            .product(name: "TOMLKit", package: "TOMLKit"),
        ]),
        .executableTarget(name: "intercomd", dependencies: [
            "IntercomDaemon",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),
        .executableTarget(name: "intercom-bench", dependencies: [
            "IntercomDaemon", "AudioPipeline", "Codec", "IntercomConfig", "Control", "Frames", "EchoCancel", "SignalTools", "CAllocCounter", "Jitter", "RTP", "SpeexDSP", "Transport", "Posix",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),

        // The rig's instruments: intercomd as a child process, a talker and an ear on one clock
        // (TalkerProbe), room recorders, key presses into a key FIFO, speech clips and scores.
        // Shared by the rig tests and the main job.
        .target(name: "RigKit", dependencies: [
            "AudioPipeline", "IntercomConfig", "Control", "EchoCancel", "Frames", "IntercomDaemon", "Keys", "Posix", "RealTime", "SignalTools",
        ]),
        .executableTarget(name: "intercom-demo", dependencies: [
            "RigKit", "Calls", "Control", "IntercomConfig", "Keys", "Posix", "SignalTools",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),
        .target(name: "TestSupport", dependencies: ["RigKit", "SignalTools", "CAllocCounter", "Calls", "Control", "IntercomConfig"], path: "Tests/TestSupport"),
        .testTarget(name: "UnitTests", dependencies: [
            "Calls", "Keys", "Lights", "Speech", "CallStore", "Control", "RTP", "Impairment", "Transport", "Jitter", "RealTime", "EchoCancel", "AudioPipeline", "Codec", "Frames", "SignalTools", "IntercomDaemon", "IntercomConfig", "TestSupport", "SiteSecurity", "Site", "Posix", "SpeexDSP", "SiteService", "SiteAdmin", "MetricsText",
        ]),
        .testTarget(name: "RigTests", dependencies: [
            "Transport", "RTP", "RealTime", "EchoCancel", "AudioPipeline", "Codec", "Frames", "SignalTools", "IntercomDaemon", "IntercomConfig", "TestSupport", "CAllocCounter",
            "Jitter", "Calls", "CallStore", "Control", "Keys", "Lights", "Speech", "SiteSecurity", "Site", "SiteAdmin", "SiteService", "Posix",
        ]),
    ]
)
