/// One problem found in a configuration file.
///
/// `key` is the dotted path of the offending key (`audio.period_ms`), or of the section
/// (`audoi`) for an unknown section. It is empty only for problems that belong to no key
/// (the file cannot be read, or a syntax error on a line that names no key).
public struct ConfigIssue: Sendable, Equatable, CustomStringConvertible {
    /// Dotted path of the key, e.g. `audio.period_ms`.
    public var key: String
    /// What is wrong, e.g. `7 is not one of 2.5, 5, 10, 20`.
    public var problem: String
    /// 1-based line in the file, when known.
    public var line: Int?
    /// 1-based column in the file, when known (syntax errors only).
    public var column: Int?

    public init(key: String, problem: String, line: Int? = nil, column: Int? = nil) {
        self.key = key
        self.problem = problem
        self.line = line
        self.column = column
    }

    /// `<key>: <problem>`, followed by `(line N)` or `(line N, column C)` when known.
    public var description: String {
        var text = key.isEmpty ? problem : "\(key): \(problem)"
        if let line {
            text += column.map { " (line \(line), column \($0))" } ?? " (line \(line))"
        }
        return text
    }
}

/// Everything wrong with a configuration file, reported together.
///
/// `description` has one line per issue: `<file>: <key>: <problem>`, e.g.
/// `/etc/intercomd.toml: audio.period_ms: 7 is not one of 2.5, 5, 10, 20 (line 4)`.
public struct ConfigError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The file name (or `<config>` for text that did not come from a file).
    public var source: String
    /// All issues, in file order (issues without a line come last).
    public var issues: [ConfigIssue]

    public init(source: String, issues: [ConfigIssue]) {
        self.source = source
        self.issues = issues
    }

    public var description: String {
        issues.map { "\(source): \($0)" }.joined(separator: "\n")
    }
}
