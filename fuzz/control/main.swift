// libFuzzer entry point for the control socket's request path: one line of bytes → JSON →
// request, as the server reads a client's line. Compiled together with the Calls, SignalTools
// and Control parser sources into one module (see build.sh). Anything inconsistent traps, which
// libFuzzer reports as a crash; AddressSanitizer catches reads outside the input.

@_cdecl("LLVMFuzzerTestOneInput")
public func controlFuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let bytes = UnsafeBufferPointer(start: data, count: data == nil ? 0 : size)
    guard let json = try? JSONValue.parse(bytes) else { return 0 }
    // What parses re-encodes to a line that parses to the same value (a number may come back as
    // an integer of the same value: JSON has one kind of number).
    if let line = try? json.encodedLine() {
        let back = try? JSONValue.parse(line.last == 10 ? line.dropLast() : line[...])
        precondition(back.map { same($0, json) } == true, "a parsed value does not survive its own encoding")
    }
    // Requests: an accepted one encodes (with an id) and parses back to itself.
    if case .success(let request) = ControlRequest.parse(json), let again = try? request.json(id: 7).encodedLine() {
        let reparsed = try? JSONValue.parse(again.last == 10 ? again.dropLast() : again[...])
        precondition(reparsed.map(ControlRequest.parse) == .success(request), "an accepted request does not round-trip")
    }
    // The client side reads the daemon's replies: every decoder must refuse, never trap.
    for command in [ControlCommand.status, .rooms, .history(limit: nil), .loopbackResult, .networkLoopbackResult, .statistics, .site] {
        _ = try? ControlJSON.decodeReply(json, for: command)
    }
    return 0
}

/// Equal as JSON: integers and numbers compare by value.
func same(_ a: JSONValue, _ b: JSONValue) -> Bool {
    if let x = a.numberValue, let y = b.numberValue { return x == y }
    switch (a, b) {
    case (.array(let x), .array(let y)): return x.count == y.count && zip(x, y).allSatisfy { same($0, $1) }
    case (.object(let x), .object(let y)): return x.keys == y.keys && x.allSatisfy { k, v in same(v, y[k]!) }
    default: return a == b
    }
}
