// libFuzzer entry point for the control socket's request path: one line of bytes → request, as
// the server reads a client's line, and → reply and event, as intercomctl reads the daemon's.
// Compiled together with the Calls, SignalTools and Control protocol sources into one module
// (see build.sh). Anything inconsistent traps, which libFuzzer reports as a crash;
// AddressSanitizer catches reads outside the input.

@_cdecl("LLVMFuzzerTestOneInput")
public func controlFuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: data == nil ? 0 : size))
    // Requests: an accepted one writes (with an id) a line that reads back as itself.
    if case .success(let request) = ControlRequest.read(bytes).request {
        guard let again = try? request.line(id: 7) else { preconditionFailure("an accepted request cannot be written") }
        let reread = ControlRequest.read(again)
        precondition(reread.request == .success(request), "an accepted request does not round-trip")
        precondition(reread.id == .integer(7), "the id is lost")
    }
    // The client side reads the daemon's replies and events: every decoder must refuse, never trap;
    // what it takes is written as the daemon would (rounded where the daemon rounds), and that reads
    // back and is written again the same.
    for command in [ControlCommand.status, .rooms, .history(limit: nil), .loopbackResult, .networkLoopbackResult, .statistics, .site,
                    .perform(.notify(type: "x")), .perform(.toggleDoNotDisturb)] {
        guard let reply = try? ControlReply.read(bytes, to: .command(command)) else { continue }
        guard let line = try? Wire.encode(reply) else { preconditionFailure("a reply read cannot be written") }
        let again = try? ControlReply.read(line, to: .command(command))
        precondition(again.flatMap { try? Wire.encode($0) } == line, "a reply does not survive its own encoding")
    }
    if let event = try? Wire.decode(ControlEvent.self, from: bytes) {
        guard let line = try? Wire.encode(event) else { preconditionFailure("an event read cannot be written") }
        precondition((try? Wire.decode(ControlEvent.self, from: line)) == event, "an event does not round-trip")
    }
    return 0
}
