import Foundation
import IntercomConfig
import XCTest

@testable import IntercomDaemon

/// `[metrics]`: a bad address names its key; a token file others may read, or without a token,
/// is refused naming `metrics.token_file` (the endpoint itself: MetricsRigTests).
final class MetricsEndpointTests: XCTestCase {
    func testTheSettingsAndTheTokenFileAreCheckedByName() throws {
        XCTAssertEqual(try DaemonConfig.parse("[metrics]\nlisten = \"127.0.0.1:9470\"").metrics.listen, "127.0.0.1:9470")
        XCTAssertEqual(DaemonConfig().metrics.listen, "", "off unless asked for")
        XCTAssertThrowsError(try DaemonConfig.parse("[metrics]\nlisten = \"everywhere\"")) { error in
            XCTAssertEqual((error as? ConfigError)?.issues.first?.key, "metrics.listen", "\(error)")
        }

        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("metrics-\(UUID())").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        func file(_ name: String, _ text: String, mode: Int) -> String {
            let path = dir + "/" + name
            FileManager.default.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: mode])
            return path
        }
        XCTAssertEqual(try MetricsServer.readToken(file("good", "0123456789abcdef-token\n", mode: 0o600)), Array("0123456789abcdef-token".utf8))
        for (path, says) in [(file("open", "0123456789abcdef-token\n", mode: 0o644), "chmod 600"),
                             (file("short", "secret\n", mode: 0o600), "at least 16"),
                             (dir + "/missing", "cannot be read")] {
            XCTAssertThrowsError(try MetricsServer.readToken(path)) { error in
                XCTAssertEqual((error as? ConfigError)?.issues.first?.key, "metrics.token_file", "\(error)")
                XCTAssertTrue("\(error)".contains(says), "\(error)")
            }
        }
    }
}
