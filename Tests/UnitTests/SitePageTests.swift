import Calls
import Foundation
import SiteAdmin
@testable import SiteService
import XCTest

/// The page's own checks that need no browser (SiteServiceRigTests walks it in chromium): every
/// text it shows has its German and its English words, and it loads nothing from elsewhere.
final class SitePageTests: XCTestCase {
    private let html = String(decoding: PackageResources.index_html, as: UTF8.self)
    private let script = String(decoding: PackageResources.app_js, as: UTF8.self)

    private func matches(_ pattern: String, in text: String) -> [String] {
        let regex = try! NSRegularExpression(pattern: pattern)
        return regex.matches(in: text, range: NSRange(text.startIndex..., in: text)).map { String(text[Range($0.range(at: 1), in: text)!]) }
    }

    func testEveryTextHasGermanAndEnglishWords() throws {
        let de = try XCTUnwrap(script.range(of: "  de: {")), en = try XCTUnwrap(script.range(of: "  en: {"))
        let german = String(script[de.upperBound..<en.lowerBound])
        let rest = script[en.upperBound...]
        let english = String(rest[..<(rest.range(of: "\n};")?.lowerBound ?? rest.endIndex)])
        // Texts named in the page and the script, and those the script puts together from what
        // the service answers (tones, publish results, kinds of change, priorities, key actions).
        let named = (matches(#"data-t="([^"]+)""#, in: html) + matches(#"\bt\("([a-z_.-]+)""#, in: script)).filter { !$0.hasSuffix("-") }
        let built = ["gong", "bell", "alert", "alarm"].map { "tone-" + $0 } + ["added", "removed"].map { "terminal-" + $0 }
            + PublishOutcome.Result.allCases.map(\.rawValue) + ["site.edit", "site.change", "site.restore", "site.found", "terminal.approve", "terminal.revoke"]
            + ["normal", "urgent", "emergency", "hang_up", "answer", "toggle_dnd", "toggle_mic_mute", "acknowledge_all"]
            + ["pending", "approved", "revoked", "unknown"]
            + CallKind.allCases.map { "kind-" + $0.rawValue } + CallKind.allCases.filter { $0 != .normal }.map { "h-" + $0.rawValue }
            + CallOutcome.allCases.map(\.rawValue) + HistoryEntry.Direction.allCases.map(\.rawValue)
        let keys = Set(named + built)
        XCTAssertGreaterThan(keys.count, 40)
        for key in keys.sorted() {
            let spelled = [#"\#(key):"#, #""\#(key)":"#]
            XCTAssertTrue(spelled.contains { german.contains(" " + $0) }, "\(key) has German words")
            XCTAssertTrue(spelled.contains { english.contains(" " + $0) }, "\(key) has English words")
        }
    }

    func testThePageLoadsOnlyItsOwnFiles() {
        XCTAssertEqual(Set(matches(#"(?:src|href)="([^"]+)""#, in: html)), ["/app.css", "/app.js"])
        XCTAssertFalse(script.contains("http:") || script.contains("https:"), "no address outside the service")
        XCTAssertFalse(script.contains("innerHTML"), "text goes in as text")
    }
}
