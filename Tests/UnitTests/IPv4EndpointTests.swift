import Posix
import XCTest

final class IPv4EndpointTests: XCTestCase {
    /// Each of these was once read as some other address by one of the project's parsers.
    static let malformedEndpoints = [
        "10.0.0.300.2:5004", "1.2.x.3.4:5", "1.2.3.4:5:", "1.2.3.4", "1.2.3:5", "1.2.3.4.5:6", "1.2.3.256:5",
        "1.2.3.4:65536", "1.2.3.4:", ":5004", "1.2.3.4:+5", "+1.2.3.4:5", "1.2.3.-4:5", " 1.2.3.4:5", "1.2.3.4:5 ",
        "1.2.3.04:5", "010.0.0.1:5", "1.2.3.4:05004", "1..3.4:5", "1.2.3.4::5", "[::1]:5", "localhost:5", "", "١.2.3.4:5",
    ]
    static let malformedAddresses = ["10.0.0.300.2", "1.2.x.3.4", "1.2.3", "1.2.3.4:5", "1.2.3.04", " 1.2.3.4", "256.0.0.1", ""]

    func testStrictParserReadsEveryWellFormedEndpoint() throws {
        XCTAssertEqual(try IPv4Endpoint.parse("10.0.0.2:5004"), IPv4Endpoint(address: 0x0A00_0002, port: 5004))
        XCTAssertEqual(try IPv4Endpoint.parse("0.0.0.0:0"), IPv4Endpoint(address: 0, port: 0))
        XCTAssertEqual(try IPv4Endpoint.parse("255.255.255.255:65535"), IPv4Endpoint(address: .max, port: 65535))
        XCTAssertEqual(try IPv4Endpoint.parseAddress("239.255.0.1"), 0xEFFF_0001)
        for text in ["127.0.0.1:5004", "192.168.10.20:1", "239.255.0.1:6000"] {
            XCTAssertEqual(try IPv4Endpoint.parse(text).description, text, "round trip")
        }
    }

    func testStrictParserRefusesEveryMalformedFormAndNamesTheProblem() {
        for text in Self.malformedEndpoints {
            XCTAssertNil(IPv4Endpoint(text), text)
            XCTAssertThrowsError(try IPv4Endpoint.parse(text), text) { error in
                let e = error as? IPv4ParseError
                XCTAssertEqual(e?.text, text)
                XCTAssertFalse(e?.problem.isEmpty ?? true)
            }
        }
        for text in Self.malformedAddresses {
            XCTAssertThrowsError(try IPv4Endpoint.parseAddress(text), text)
        }
        XCTAssertThrowsError(try IPv4Endpoint.parse("10.0.0.300.2:5004")) {
            XCTAssertEqual("\($0)", "\"10.0.0.300.2:5004\": an IPv4 address has four numbers (a.b.c.d), not 5")
        }
        XCTAssertThrowsError(try IPv4Endpoint.parse("1.2.3.4:5:")) {
            XCTAssertEqual("\($0)", "\"1.2.3.4:5:\": has more than one ':' (a.b.c.d:port)")
        }
    }
}
