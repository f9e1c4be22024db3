import Foundation

/// The main job's steps as they happen (one line each, printed at once) and the summary table.
final class Report {
    struct Row {
        let step: String
        let passed: Bool
        let figure: String
    }

    private(set) var rows: [Row] = []
    /// Measurements taken again because the machine spoiled them (xruns, a stopped core), with the cause.
    private(set) var repeats: [String] = []
    let started = Date()

    var allPassed: Bool { rows.allSatisfy(\.passed) }

    func say(_ line: String) {
        // Unbuffered: each step shows as it happens, also through a pipe.
        FileHandle.standardOutput.write(Data((String(format: "demo %5.1f s  ", Date().timeIntervalSince(started)) + line + "\n").utf8))
    }

    /// Records a step's verdict and says it.
    func step(_ name: String, _ passed: Bool, _ figure: String) {
        rows.append(Row(step: name, passed: passed, figure: figure))
        say("\(passed ? "ok  " : "FAIL") \(name): \(figure)")
    }

    func repeated(_ cause: String) {
        repeats.append(cause)
        say("     repeated: \(cause)")
    }

    /// The table: each step, its verdict, its figure.
    func summary() -> String {
        let width = max(4, rows.map(\.step.count).max() ?? 0)
        var out = "\n" + "step".padding(toLength: width, withPad: " ", startingAt: 0) + "  result  figure\n"
        out += String(repeating: "-", count: width) + "  ------  ------\n"
        for r in rows {
            out += r.step.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + (r.passed ? "ok    " : "FAILED") + "  " + r.figure + "\n"
        }
        let failed = rows.filter { !$0.passed }.count
        out += "\n\(rows.count - failed) steps ok, \(failed) failed"
        out += repeats.isEmpty ? "" : "; \(repeats.count) measurement(s) repeated for xruns or a stopped core"
        return out + String(format: " (%.0f s)\n", Date().timeIntervalSince(started))
    }
}

/// A step that cannot go on: the demo stops there, the summary shows what ran.
struct StepFailed: Error, CustomStringConvertible {
    let description: String
}
