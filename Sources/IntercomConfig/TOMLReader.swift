import TOMLKit

// Helpers for Config.swift: typed reading of TOMLKit values, TOML literals for rendering,
// "did you mean" suggestions and a best-effort map from keys to line numbers (TOMLKit does
// not expose the source position of parsed values, only of parse errors).

/// What is wrong with one value; the caller adds the key and the line.
struct ValueProblem: Error {
    let text: String
    /// The entry of a table value that is wrong (`KEY_F1` of `keys.map`), appended to the key.
    let entry: String?
    init(_ text: String, at entry: String? = nil) {
        self.text = text
        self.entry = entry
    }
}

/// Reads typed values out of TOMLKit nodes; failures name the expected and the actual type.
enum TOMLRead {
    static func string(_ value: TOMLValueConvertible) throws(ValueProblem) -> String {
        guard let s = value.string else {
            throw ValueProblem("expected a string (in double quotes), got \(describe(value))")
        }
        return s
    }

    static func bool(_ value: TOMLValueConvertible) throws(ValueProblem) -> Bool {
        guard let b = value.bool else {
            throw ValueProblem("expected a boolean (true or false), got \(describe(value))")
        }
        return b
    }

    /// An integer; a float is accepted when it is integral (`3.0`).
    static func int(_ value: TOMLValueConvertible) throws(ValueProblem) -> Int {
        if let i = value.int { return i }
        if let d = value.double {
            if let i = Int(exactly: d) { return i }
            throw ValueProblem("expected an integer, got \(describe(value))")
        }
        throw ValueProblem("expected an integer, got \(describe(value))")
    }

    /// An array of strings (`["a", "b"]`); a single string is not accepted, to keep files uniform.
    static func strings(_ value: TOMLValueConvertible) throws(ValueProblem) -> [String] {
        guard let array = value.array else {
            throw ValueProblem("expected an array of strings ([\"...\", ...]), got \(describe(value))")
        }
        var out: [String] = []
        for (i, element) in array.enumerated() {
            guard let s = element.string else {
                throw ValueProblem("element \(i + 1) is \(describe(element)), expected a string")
            }
            out.append(s)
        }
        return out
    }

    /// A number; integers are accepted (`period_ms = 10`).
    static func double(_ value: TOMLValueConvertible) throws(ValueProblem) -> Double {
        if let d = value.double { return d }
        if let i = value.int { return Double(i) }
        throw ValueProblem("expected a number, got \(describe(value))")
    }

    /// "an integer (7)", "a string (\"10\")", "an array", ... for error messages.
    static func describe(_ value: TOMLValueConvertible) -> String {
        switch value.type {
        case .string:
            let s = value.string ?? ""
            let shown = s.count > 40 ? String(s.prefix(40)) + "..." : s
            return "a string (\(TOMLWrite.string(shown)))"
        case .int: return "an integer (\(value.int.map(String.init) ?? "?"))"
        case .double: return "a floating-point number (\(value.double.map(formatNumber) ?? "?"))"
        case .bool: return "a boolean (\(value.bool.map(String.init) ?? "?"))"
        case .array: return "an array"
        case .table: return "a table"
        case .date: return "a date"
        case .time: return "a time"
        case .dateTime: return "a date-time"
        }
    }
}

/// TOML literals for `DaemonConfig.rendered()`.
enum TOMLWrite {
    /// A TOML basic string: `"..."` with `"`, `\` and control characters escaped.
    static func string(_ s: String) -> String {
        var out = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\t": out += "\\t"
            case "\r": out += "\\r"
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F {
                    let hex = String(scalar.value, radix: 16, uppercase: true)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }

    /// A key: bare when TOML allows it (A-Z, a-z, 0-9, _ and -), else quoted.
    static func key(_ k: String) -> String {
        let bare = !k.isEmpty && k.utf8.allSatisfy { b in
            (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A)
                || b == UInt8(ascii: "_") || b == UInt8(ascii: "-")
        }
        return bare ? k : string(k)
    }
}

/// `10` for integral values, `2.5`, `1e-05`, `nan`, `inf` otherwise: valid TOML and readable in
/// messages. Exact: Swift prints the shortest text that reads back as the same Double.
public func formatNumber(_ d: Double) -> String {
    if d.isFinite, d == d.rounded(), abs(d) < 1e15 { return String(Int64(d)) }
    return "\(d)"
}

enum Spelling {
    /// Edit distance (insertions, deletions, substitutions and swaps of neighbours count 1),
    /// ignoring case.
    static func distance(_ a: String, _ b: String) -> Int {
        let x = Array(a.lowercased()), y = Array(b.lowercased())
        if x.isEmpty { return y.count }
        if y.isEmpty { return x.count }
        var before = [Int](repeating: 0, count: y.count + 1)
        var previous = Array(0...y.count)
        var current = [Int](repeating: 0, count: y.count + 1)
        for i in 1...x.count {
            current[0] = i
            for j in 1...y.count {
                let cost = x[i - 1] == y[j - 1] ? 0 : 1
                var d = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
                if i > 1, j > 1, x[i - 1] == y[j - 2], x[i - 2] == y[j - 1] {
                    d = min(d, before[j - 2] + 1)
                }
                current[j] = d
            }
            (before, previous, current) = (previous, current, before)
        }
        return previous[y.count]
    }

    /// The candidate closest to `word`, if it is close enough to be a plausible typo.
    /// Ties go to the earlier candidate.
    static func closest(to word: String, among candidates: [String]) -> String? {
        let limit = max(1, min(3, word.count / 3))
        var best: (name: String, distance: Int)?
        for c in candidates {
            let d = distance(word, c)
            if d <= limit, d < (best?.distance ?? Int.max) { best = (c, d) }
        }
        return best?.name
    }
}

/// Best-effort map from dotted key paths to the line that defines them, read from the raw text
/// with a small scanner (headers, `key = value` lines, multi-line strings and arrays are
/// skipped over). Used only to add line numbers to messages; never decides validity.
struct KeyLocator {
    /// First line that defines each path (a table header or a key/value line).
    private var firstLine: [[String]: Int] = [:]
    /// The path each header or key/value line defines.
    private var pathOfLine: [Int: [String]] = [:]
    /// Table headers in file order.
    private var headers: [(line: Int, path: [String])] = []

    init(_ text: String) {
        var state = ValueScanState()
        var table: [String] = []
        var lineNumber = 0
        for rawLine in Array(text.utf8).split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
            lineNumber += 1
            var line = rawLine[...]
            if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
            if state.continues {
                state.scan(line)
                continue
            }
            let start = line.firstIndex(where: { $0 != UInt8(ascii: " ") && $0 != UInt8(ascii: "\t") }) ?? line.endIndex
            let content = line[start...]
            guard let first = content.first, first != UInt8(ascii: "#") else { continue }
            if first == UInt8(ascii: "[") {
                var i = content.index(after: content.startIndex)
                if i < content.endIndex, content[i] == UInt8(ascii: "[") { i = content.index(after: i) }
                let (path, _) = Self.parseKey(content, from: i)
                guard !path.isEmpty else { continue }
                table = path
                headers.append((lineNumber, path))
                record(path, line: lineNumber)
                continue
            }
            let (keys, end) = Self.parseKey(content, from: content.startIndex)
            guard !keys.isEmpty, end < content.endIndex, content[end] == UInt8(ascii: "=") else { continue }
            record(table + keys, line: lineNumber)
            state.scan(content[content.index(after: end)...])
        }
    }

    private mutating func record(_ path: [String], line: Int) {
        if firstLine[path] == nil { firstLine[path] = line }
        pathOfLine[line] = path
    }

    /// The line defining `path`; else the first line of anything under it (dotted keys,
    /// sub-tables); else the line of its parent (e.g. a key inside an inline table).
    func line(of path: [String]) -> Int? {
        if let line = firstLine[path] { return line }
        let under = firstLine.filter { $0.key.starts(with: path) }.map(\.value).min()
        if let under { return under }
        return path.count > 1 ? line(of: Array(path.dropLast())) : nil
    }

    /// True when a header or key/value line defines exactly `path`.
    func defines(_ path: [String]) -> Bool { firstLine[path] != nil }

    /// For a syntax error: the key (or table) on that line, else the table the line is in.
    func context(ofLine line: Int) -> [String] {
        if let path = pathOfLine[line] { return path }
        return headers.last(where: { $0.line <= line })?.path ?? []
    }

    /// Parses a (dotted, possibly quoted) key starting at `from`; returns its parts and the index
    /// of the first byte after it and its trailing blanks.
    private static func parseKey(_ s: ArraySlice<UInt8>, from: Int) -> ([String], Int) {
        var parts: [String] = []
        var i = from
        func skipBlanks() {
            while i < s.endIndex, s[i] == UInt8(ascii: " ") || s[i] == UInt8(ascii: "\t") { i += 1 }
        }
        while true {
            skipBlanks()
            guard i < s.endIndex else { break }
            let c = s[i]
            if c == UInt8(ascii: "\"") || c == UInt8(ascii: "'") {
                var j = i + 1
                var bytes: [UInt8] = []
                while j < s.endIndex, s[j] != c {
                    if c == UInt8(ascii: "\""), s[j] == UInt8(ascii: "\\"), j + 1 < s.endIndex { j += 1 }
                    bytes.append(s[j])
                    j += 1
                }
                parts.append(String(decoding: bytes, as: UTF8.self))
                i = min(j + 1, s.endIndex)
            } else {
                let isBare: (UInt8) -> Bool = { b in
                    (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A)
                        || b == UInt8(ascii: "_") || b == UInt8(ascii: "-")
                }
                var j = i
                while j < s.endIndex, isBare(s[j]) { j += 1 }
                guard j > i else { break }
                parts.append(String(decoding: s[i..<j], as: UTF8.self))
                i = j
            }
            skipBlanks()
            guard i < s.endIndex, s[i] == UInt8(ascii: ".") else { break }
            i += 1
        }
        return (parts, i)
    }
}

/// Where the scanner is inside a value that may span lines.
private struct ValueScanState {
    enum Mode { case plain, multilineBasic, multilineLiteral }
    var mode = Mode.plain
    var depth = 0  // open [ and {

    var continues: Bool { mode != .plain || depth > 0 }

    mutating func scan(_ s: ArraySlice<UInt8>) {
        let quote = UInt8(ascii: "\""), apostrophe = UInt8(ascii: "'"), backslash = UInt8(ascii: "\\")
        func triple(_ at: Int, _ c: UInt8) -> Bool {
            at + 2 < s.endIndex && s[at] == c && s[at + 1] == c && s[at + 2] == c
        }
        var i = s.startIndex
        while i < s.endIndex {
            let c = s[i]
            switch mode {
            case .multilineBasic:
                if c == backslash { i += 2; continue }
                if triple(i, quote) { mode = .plain; i += 3; continue }
            case .multilineLiteral:
                if triple(i, apostrophe) { mode = .plain; i += 3; continue }
            case .plain:
                if c == UInt8(ascii: "#") { return }
                if triple(i, quote) { mode = .multilineBasic; i += 3; continue }
                if triple(i, apostrophe) { mode = .multilineLiteral; i += 3; continue }
                if c == quote || c == apostrophe {
                    var j = i + 1
                    while j < s.endIndex, s[j] != c {
                        if c == quote, s[j] == backslash { j += 1 }
                        j += 1
                    }
                    i = j + 1
                    continue
                }
                if c == UInt8(ascii: "[") || c == UInt8(ascii: "{") { depth += 1 }
                if c == UInt8(ascii: "]") || c == UInt8(ascii: "}") { depth = max(0, depth - 1) }
            }
            i += 1
        }
    }
}
