import SiteSecurity

/// What travels over a site document transfer (TCP, on the terminal's signalling port number):
/// one request, one reply, then the server closes. A terminal asks another for the document it
/// holds (`get`); the administrator's tool hands a terminal a new one (`offer`). Nothing here is
/// trusted: whatever document comes is judged whole by the receiver's `SiteDocumentGate`.
///
/// Request: "ICSD", format 1, op (1 get, 2 offer, 3 enrolment), the site id (a length byte and
/// 1-64 bytes); an offer then carries the document (a 4-byte big-endian length and its bytes).
/// Reply: "ICSD", format 1, a status byte; `document` and `enrolment` then carry their bytes as an
/// offer does, `refused` and `badRequest` a reason (a length byte and UTF-8).
/// `enrolment` asks a terminal for its signed enrolment request (docs/identity.md): what the
/// administrator's tool fetches from a pending box. `order` (op 4) carries a `SignedSiteOrder` as
/// an offer carries a document; its reply (`orderDone`, status 9) carries the control socket's
/// reply to the same command (JSON, `ControlReply`), or `refused` with the reason.
public enum SiteTransfer {
    public static let magic: [UInt8] = Array("ICSD".utf8)
    public static let format: UInt8 = 1
    /// The largest document a transfer carries: twice what a gate takes, so that a document the
    /// gate would find oversized reaches it (refused and counted there as such); anything larger is
    /// not read at all.
    public static var maximumDocumentBytes: Int { 2 * SignedSiteDocument.maximumBytes }
    /// The largest request or reply: a document and its framing.
    public static var maximumBytes: Int { maximumDocumentBytes + 80 }

    public enum Request: Sendable, Equatable {
        case get(site: String)
        case offer(site: String, document: [UInt8])
        case enrolment(site: String)
        case order(site: String, signed: [UInt8])

        public var site: String {
            switch self {
            case .get(let s), .offer(let s, _), .enrolment(let s), .order(let s, _): s
            }
        }

        public func encoded() -> [UInt8] {
            var out = SiteTransfer.magic + [SiteTransfer.format]
            switch self {
            case .get(let site):
                out.append(1)
                SiteTransfer.appendShort(site, to: &out)
            case .offer(let site, let document):
                out.append(2)
                SiteTransfer.appendShort(site, to: &out)
                SiteTransfer.appendLong(document, to: &out)
            case .enrolment(let site):
                out.append(3)
                SiteTransfer.appendShort(site, to: &out)
            case .order(let site, let signed):
                out.append(4)
                SiteTransfer.appendShort(site, to: &out)
                SiteTransfer.appendLong(signed, to: &out)
            }
            return out
        }
    }

    public enum Reply: Sendable, Equatable {
        case document([UInt8])
        case noDocument
        case otherSite
        case adopted
        case alreadyHeld
        case refused(String)
        case badRequest(String)
        /// The server has as many transfers under way as it takes: try another terminal, or later.
        case busy
        /// The terminal's signed enrolment request (`EnrolmentRequest`, JSON).
        case enrolment([UInt8])
        /// An order carried out: the control socket's reply to the same command (JSON).
        case orderDone([UInt8])

        public func encoded() -> [UInt8] {
            var out = SiteTransfer.magic + [SiteTransfer.format]
            switch self {
            case .document(let d):
                out.append(0)
                SiteTransfer.appendLong(d, to: &out)
            case .noDocument: out.append(1)
            case .otherSite: out.append(2)
            case .adopted: out.append(3)
            case .alreadyHeld: out.append(4)
            case .refused(let reason):
                out.append(5)
                SiteTransfer.appendShort(reason, to: &out)
            case .badRequest(let reason):
                out.append(6)
                SiteTransfer.appendShort(reason, to: &out)
            case .busy: out.append(7)
            case .enrolment(let request):
                out.append(8)
                SiteTransfer.appendLong(request, to: &out)
            case .orderDone(let reply):
                out.append(9)
                SiteTransfer.appendLong(reply, to: &out)
            }
            return out
        }

        /// Reads a whole reply (the server closed after it); nil with a reason when it is not one.
        public static func decode(_ bytes: [UInt8]) -> Result<Reply, SiteTransferError> {
            var r = SiteTransfer.Reader(bytes)
            switch r.header() {
            case .incomplete: return .failure(SiteTransferError("the reply ended after \(bytes.count) bytes"))
            case .malformed(let why): return .failure(SiteTransferError(why))
            case .complete: break
            }
            let reply: Reply
            let status = r.byte()
            switch status {
            case 0, 8, 9:
                switch r.long() {
                case .complete(let d): reply = status == 0 ? .document(d) : status == 8 ? .enrolment(d) : .orderDone(d)
                case .incomplete: return .failure(SiteTransferError("the \(status == 0 ? "document" : "request") in the reply is cut short"))
                case .malformed(let why): return .failure(SiteTransferError(why))
                }
            case 1: reply = .noDocument
            case 2: reply = .otherSite
            case 3: reply = .adopted
            case 4: reply = .alreadyHeld
            case 5, 6:
                let refused = status == 5
                guard case .complete(let reason) = r.short() else { return .failure(SiteTransferError("the reason in the reply is cut short")) }
                reply = refused ? .refused(reason) : .badRequest(reason)
            case 7: reply = .busy
            case nil: return .failure(SiteTransferError("the reply has no status"))
            case let s?: return .failure(SiteTransferError("unknown reply status \(s)"))
            }
            guard r.atEnd else { return .failure(SiteTransferError("\(bytes.count - r.offset) bytes after the reply")) }
            return .success(reply)
        }
    }

    public enum Parse<T: Sendable>: Sendable {
        /// More bytes may complete it.
        case incomplete
        case complete(T)
        case malformed(String)
    }

    /// Reads a request from what has arrived so far: the server calls this after each read.
    public static func parseRequest(_ bytes: [UInt8]) -> Parse<Request> {
        var r = Reader(bytes)
        switch r.header() {
        case .incomplete: return .incomplete
        case .malformed(let why): return .malformed(why)
        case .complete: break
        }
        guard let op = r.byte() else { return .incomplete }
        guard (1...4).contains(op) else { return .malformed("unknown request \(op)") }
        let site: String
        switch r.short() {
        case .incomplete: return .incomplete
        case .malformed(let why): return .malformed(why)
        case .complete(let s): site = s
        }
        guard (1...64).contains(site.utf8.count) else { return .malformed("a site id of \(site.utf8.count) bytes") }
        var request = op == 3 ? Request.enrolment(site: site) : Request.get(site: site)
        if op == 2 || op == 4 {
            switch r.long() {
            case .incomplete: return .incomplete
            case .malformed(let why): return .malformed(why)
            case .complete(let d): request = op == 2 ? .offer(site: site, document: d) : .order(site: site, signed: d)
            }
        }
        guard r.atEnd else { return .malformed("\(bytes.count - r.offset) bytes after the request") }
        return .complete(request)
    }

    static func appendShort(_ text: String, to out: inout [UInt8]) {
        let utf8 = Array(text.utf8.prefix(255))
        out.append(UInt8(utf8.count))
        out += utf8
    }

    static func appendLong(_ bytes: [UInt8], to out: inout [UInt8]) {
        let n = UInt32(bytes.count)
        out += [UInt8(n >> 24), UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)]
        out += bytes
    }

    struct Reader {
        let bytes: [UInt8]
        var offset = 0
        init(_ bytes: [UInt8]) { self.bytes = bytes }
        var atEnd: Bool { offset == bytes.count }

        mutating func header() -> Parse<Void> {
            let have = min(bytes.count, 5)
            let expected = SiteTransfer.magic + [SiteTransfer.format]
            guard bytes[..<have].elementsEqual(expected[..<have]) else {
                return .malformed(bytes[..<min(have, 4)].elementsEqual(SiteTransfer.magic[..<min(have, 4)])
                                  ? "format \(bytes[4]), not \(SiteTransfer.format)" : "not a site document transfer")
            }
            guard have == 5 else { return .incomplete }
            offset = 5
            return .complete(())
        }

        mutating func byte() -> UInt8? {
            guard offset < bytes.count else { return nil }
            defer { offset += 1 }
            return bytes[offset]
        }

        mutating func short() -> Parse<String> {
            guard offset < bytes.count else { return .incomplete }
            let n = Int(bytes[offset])
            guard bytes.count >= offset + 1 + n else { return .incomplete }
            guard let text = String(validating: bytes[(offset + 1)..<(offset + 1 + n)], as: UTF8.self) else { return .malformed("text that is not UTF-8") }
            offset += 1 + n
            return .complete(text)
        }

        mutating func long() -> Parse<[UInt8]> {
            guard bytes.count >= offset + 4 else { return .incomplete }
            let n = bytes[offset..<(offset + 4)].reduce(0) { $0 << 8 | Int($1) }
            guard n <= SiteTransfer.maximumDocumentBytes else { return .malformed("a document of \(n) bytes (a transfer carries at most \(SiteTransfer.maximumDocumentBytes))") }
            guard bytes.count >= offset + 4 + n else { return .incomplete }
            defer { offset += 4 + n }
            return .complete(Array(bytes[(offset + 4)..<(offset + 4 + n)]))
        }
    }
}

public struct SiteTransferError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
