// libFuzzer entry point for the site document transfer's framing (requests a terminal's server
// reads, replies the fetching side reads). Compiled with Sources/Site/SiteTransfer.swift into
// one module (see build.sh). Anything inconsistent traps, which libFuzzer reports as a crash.

@_cdecl("LLVMFuzzerTestOneInput")
public func transferFuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: data == nil ? 0 : size))
    // One encoding per request: what is read whole re-encodes byte for byte; no strict prefix of
    // it is whole (the server answers only once the last byte came).
    if case .complete(let request) = SiteTransfer.parseRequest(bytes) {
        precondition(request.encoded() == bytes, "accepted request is not canonical")
        if case .complete = SiteTransfer.parseRequest(Array(bytes.dropLast())) { preconditionFailure("a prefix reads whole") }
    }
    if case .success(let reply) = SiteTransfer.Reply.decode(bytes) {
        precondition(reply.encoded() == bytes, "accepted reply is not canonical")
        if case .success = SiteTransfer.Reply.decode(Array(bytes.dropLast())) { preconditionFailure("a reply cut short reads whole") }
    }
    return 0
}
