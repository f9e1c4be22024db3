import SiteSecurity

// libFuzzer target for what a terminal reads from the network under terminal keys: session
// announcements and datagrams sealed per pair of terminals (`TerminalSeal`), built by
// fuzz/seal/build.sh with -DFUZZING and -sanitize=fuzzer,address. A target of the package like
// config-fuzz, since SiteSecurity needs swift-crypto; a plain `swift build` makes the stub below.
//
// Properties: any bytes are judged without a trap, as an announcement and as a sealed datagram;
// an announcement that decodes encodes back to the same bytes; the input laid as a mask over a
// genuine sealed datagram opens only when it changes nothing (and only once).

#if FUZZING
import FuzzDriver

@_cdecl("seal_fuzz_main")
public func sealFuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    runFuzzer(argc, argv) { data, size in fuzzOneInput(data, size) }
}

/// Two terminals with fixed keys, each having heard the other's announcement, and one datagram
/// the first sealed for the second.
enum Fixture {
    static let pair: (receiver: TerminalSeal, genuine: [UInt8]) = {
        let a = try! TerminalIdentity(seed: [UInt8](repeating: 1, count: 32))
        let b = try! TerminalIdentity(seed: [UInt8](repeating: 2, count: 32))
        let directory = ["a": a.publicIdentity, "b": b.publicIdentity]
        let sender = TerminalSeal(identity: a, room: "a", boot: 1, directory: directory, newSessionKey: { [UInt8](repeating: 3, count: 32) })
        let receiver = TerminalSeal(identity: b, room: "b", boot: 1, directory: directory, newSessionKey: { [UInt8](repeating: 4, count: 32) })
        _ = receiver.heard(sender.announcement())
        _ = sender.heard(receiver.announcement())
        return (receiver, sender.seal(Array("a sealed envelope".utf8), for: "b")!)
    }()
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    let (receiver, genuine) = Fixture.pair
    if let announcement = SessionAnnouncement.decode(input) {
        precondition(announcement.encoded() == input, "a decoded announcement encodes to other bytes")
    }
    _ = receiver.heard(input)
    _ = receiver.open(input)
    var masked = genuine
    for (i, m) in input.prefix(masked.count).enumerated() { masked[i] ^= m }
    if input.count > masked.count { masked += input[masked.count...] }
    if case .success = receiver.open(masked) { precondition(masked == genuine, "a changed datagram opened") }
    return 0
}
#else
@main
struct SealFuzzStub {
    static func main() {
        print("seal-fuzz: build the fuzzer with fuzz/seal/build.sh")
    }
}
#endif
