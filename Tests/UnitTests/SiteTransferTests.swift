import Site
import SiteSecurity
import XCTest

/// The site document transfer's framing: every request and reply reads back as written, a
/// request read piece by piece is incomplete until its last byte, and anything else is refused
/// with a reason.
final class SiteTransferTests: XCTestCase {
    private let document = Array("{\"format\":1}".utf8) + [UInt8](repeating: 7, count: 3000)

    func testRequestsAndRepliesReadBackAsWritten() {
        for request in [SiteTransfer.Request.get(site: "praxis"), .offer(site: "praxis-am-markt", document: document), .offer(site: "p", document: []),
                        .enrolment(site: "praxis"), .order(site: "praxis", signed: Array("{}".utf8) + [UInt8](repeating: 9, count: 64))] {
            let bytes = request.encoded()
            guard case .complete(let read) = SiteTransfer.parseRequest(bytes) else { return XCTFail("\(request)") }
            XCTAssertEqual(read, request)
            for n in 0..<bytes.count where n % 97 == 0 || n >= bytes.count - 5 {
                guard case .incomplete = SiteTransfer.parseRequest(Array(bytes[..<n])) else { return XCTFail("\(n) of \(bytes.count) bytes: not incomplete") }
            }
        }
        let replies: [SiteTransfer.Reply] = [.document(document), .noDocument, .otherSite, .adopted, .alreadyHeld, .refused("older"),
                                             .badRequest("not a site document transfer"), .busy, .enrolment(Array("{\"format\":1}".utf8)),
                                             .orderDone(Array("{\"result\":{\"state\":\"running\"}}".utf8))]
        for reply in replies {
            XCTAssertEqual(try SiteTransfer.Reply.decode(reply.encoded()).get(), reply)
        }
    }

    func testMalformedRequestsAndRepliesAreRefusedWithAReason() {
        func malformed(_ bytes: [UInt8]) -> String? {
            if case .malformed(let why) = SiteTransfer.parseRequest(bytes) { return why }
            return nil
        }
        XCTAssertEqual(malformed(Array("GET / HTTP/1.0\r\n".utf8)), "not a site document transfer")
        XCTAssertEqual(malformed(Array("ICSD".utf8) + [2, 1]), "format 2, not 1")
        XCTAssertEqual(malformed(Array("ICSD".utf8) + [1, 9]), "unknown request 9")
        XCTAssertEqual(malformed(Array("ICSD".utf8) + [1, 1, 0]), "a site id of 0 bytes")
        XCTAssertEqual(malformed(Array("ICSD".utf8) + [1, 1, 2, 0xC3, 0x28]), "text that is not UTF-8")
        XCTAssertEqual(malformed(SiteTransfer.Request.get(site: "p").encoded() + [0]), "1 bytes after the request")
        let huge = SiteTransfer.maximumDocumentBytes + 1
        XCTAssertEqual(malformed(Array("ICSD".utf8) + [1, 2, 1, 0x70] + [UInt8(huge >> 24), UInt8(huge >> 16 & 255), UInt8(huge >> 8 & 255), UInt8(huge & 255)]),
                       "a document of \(huge) bytes (a transfer carries at most \(SiteTransfer.maximumDocumentBytes))")
        // A document the gate would find oversized still travels: the gate refuses and counts it.
        XCTAssertLessThan(SignedSiteDocument.maximumBytes, SiteTransfer.maximumDocumentBytes)

        func refused(_ bytes: [UInt8]) -> String? {
            if case .failure(let e) = SiteTransfer.Reply.decode(bytes) { return e.description }
            return nil
        }
        XCTAssertEqual(refused([]), "the reply ended after 0 bytes")
        XCTAssertEqual(refused(Array("ICSD".utf8) + [1]), "the reply has no status")
        XCTAssertEqual(refused(Array("ICSD".utf8) + [1, 42]), "unknown reply status 42")
        XCTAssertEqual(refused(Array(SiteTransfer.Reply.document(document).encoded().dropLast())), "the document in the reply is cut short")
        XCTAssertEqual(refused(SiteTransfer.Reply.adopted.encoded() + [1]), "1 bytes after the reply")
        XCTAssertEqual(refused(Array("HTTP/1.1 200".utf8)), "not a site document transfer")
    }
}
