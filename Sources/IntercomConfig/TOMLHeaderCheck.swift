/// toml++ 3.4 (inside TOMLKit 0.6.0) asserts, and so aborts the whole daemon, when a table header
/// does not begin with a key: a lone `[`, `[.rooms]`, `[+]`. Its other paths to the key parser
/// check the first character; the table header's does not. The configuration fuzzer found it, and
/// a typo reloaded with SIGHUP would have killed a running terminal. So headers are checked here,
/// before the text reaches toml++.
///
/// The scan knows strings, comments and brackets well enough to find the table headers of any
/// valid TOML; toml++ stops at the first error, so a misreading after invalid text cannot matter.
enum TOMLHeaderCheck {
    /// Line and column (both from 1) of the first table header that does not begin with a key.
    static func firstBadHeader(in text: String) -> (line: Int, column: Int)? {
        let b = Array(text.utf8)
        var i = b.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0  // toml++ skips a byte-order mark
        var line = 1
        var lineStart = 0
        var depth = 0  // open arrays and inline tables of a value
        var atLineStart = true

        func isSpace(_ c: UInt8) -> Bool { c == 0x20 || c == 0x09 }
        func startsKey(_ c: UInt8) -> Bool {
            switch c {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"), UInt8(ascii: "-"),
                UInt8(ascii: "\""), UInt8(ascii: "'"), UInt8(ascii: "]"):
                return true  // `]` ends an empty header, which toml++ reports itself
            default:
                return false
            }
        }
        func has(_ s: String, at k: Int) -> Bool {
            let u = Array(s.utf8)
            return k + u.count <= b.count && Array(b[k..<k + u.count]) == u
        }
        func newline(at k: Int) {
            line += 1
            lineStart = k + 1
        }
        /// Skips a string that starts at `i`; returns the index after it (or the line end when open).
        func skipString(from start: Int) -> Int {
            let quote = b[start]
            let multi = has(quote == UInt8(ascii: "\"") ? "\"\"\"" : "'''", at: start)
            var k = start + (multi ? 3 : 1)
            while k < b.count {
                let c = b[k]
                if c == UInt8(ascii: "\\") && quote == UInt8(ascii: "\"") {
                    if k + 1 < b.count, b[k + 1] == 0x0A { newline(at: k + 1) }
                    k += 2
                    continue
                }
                if c == 0x0A {
                    if !multi { return k }  // an open single-line string: toml++ reports it
                    newline(at: k)
                } else if c == quote {
                    if !multi { return k + 1 }
                    if has(quote == UInt8(ascii: "\"") ? "\"\"\"" : "'''", at: k) {
                        k += 3
                        while k < b.count, b[k] == quote, k - start < 8 { k += 1 }  // `""""` ends with a quote
                        return k
                    }
                }
                k += 1
            }
            return k
        }

        while i < b.count {
            let c = b[i]
            if atLineStart && depth == 0 {
                if isSpace(c) { i += 1; continue }
                atLineStart = false
                if c == UInt8(ascii: "[") {
                    var k = i + 1
                    while k < b.count, isSpace(b[k]) { k += 1 }
                    if k < b.count, b[k] == UInt8(ascii: "[") {
                        k += 1
                        while k < b.count, isSpace(b[k]) { k += 1 }
                    }
                    if k < b.count, !startsKey(b[k]) { return (line, k - lineStart + 1) }
                    // The rest of a header line holds no value: go to its end.
                    while i < b.count, b[i] != 0x0A { i += 1 }
                    continue
                }
            }
            switch c {
            case 0x0A:
                newline(at: i)
                if depth == 0 { atLineStart = true }
            case UInt8(ascii: "#"):
                while i + 1 < b.count, b[i + 1] != 0x0A { i += 1 }
            case UInt8(ascii: "\""), UInt8(ascii: "'"):
                i = skipString(from: i)
                continue
            case UInt8(ascii: "["), UInt8(ascii: "{"):
                depth += 1
            case UInt8(ascii: "]"), UInt8(ascii: "}"):
                depth = max(0, depth - 1)
            default:
                break
            }
            i += 1
        }
        return nil
    }
}
