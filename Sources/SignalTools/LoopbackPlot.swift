import Foundation

// The loopback tests' reports and SVG plots: shared by intercomctl (against a running daemon) and
// intercomd --loopback (the daemon's own devices when it is not running as a service).

extension LoopbackAnalysis.Result {
    /// The technician's report: the round trip and its parts, the echo, warnings and problems.
    public var report: String {
        func ms(_ v: Double?) -> String { v.map { String(format: "%.2f ms", $0) } ?? "-" }
        var lines = [
            "round trip      \(ms(roundTripMs))",
            "  playback buffer \(ms(playbackBufferMs))",
            "  path            \(ms(pathMs))   (converters, air, sound server)",
            "  capture period  \(ms(capturePeriodMs))",
            String(format: "echo            %.1f dBFS, correlation %.2f, SNR %@, clipped samples %d",
                   echoLevelDb, correlation, snrDb.map { String(format: "%.0f dB", $0) } ?? "-", clippedSamples),
        ]
        lines += warnings.map { "warning: \($0)" }
        lines += problems.map { "problem: \($0)" }
        return lines.joined(separator: "\n")
    }
}

extension LoopbackPlot {
    /// The whole-path estimate as one stacked bar against the goal.
    public static func budget(_ b: PathBudget, room: String) -> String {
        let w = 720.0, left = 20.0, right = 20.0, barTop = 40.0, barHeight = 36.0
        let h = barTop + barHeight + 40 + Double(b.parts.count) * 18
        let scale = (w - left - right) / max(b.totalMs, b.goalMs)
        let colours = ["#1f5fa8", "#4c9be8", "#7fb800", "#f6a600", "#e4572e", "#8e5ea2", "#5b5b5b"]
        var s = """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(w))" height="\(Int(h))" font-family="sans-serif" font-size="12">
            <rect width="100%" height="100%" fill="white"/>
            <text x="\(left)" y="22">Mouth to ear, here to \(room): \(String(format: "%.1f", b.totalMs)) ms (goal \(String(format: "%.0f", b.goalMs)) ms)</text>

            """
        var x = left
        for (i, p) in b.parts.enumerated() {
            let width = p.ms * scale, colour = colours[i % colours.count]
            s += String(format: "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%@\"/>\n", x, barTop, max(0, width), barHeight, colour)
            let y = barTop + barHeight + 28 + Double(i) * 18
            s += String(format: "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%@\"/>", left, y - 10, colour)
            s += String(format: "<text x=\"%.1f\" y=\"%.1f\">%@: %.2f ms (%@)</text>\n", left + 18, y, p.name, p.ms, p.source)
            x += width
        }
        let goal = left + b.goalMs * scale
        s += String(format: "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#c00\" stroke-width=\"2\" stroke-dasharray=\"5 3\"/>\n",
                    goal, barTop - 6, goal, barTop + barHeight + 6)
        return s + "</svg>\n"
    }

    /// The round trips as an SVG bar chart.
    public static func histogram(_ r: RoundTripSummary, room: String) -> String {
        let w = 640.0, h = 320.0, left = 60.0, right = 20.0, top = 30.0, bottom = 50.0
        let bins = r.histogram, most = Double(max(1, bins.map(\.count).max() ?? 1))
        let bar = (w - left - right) / Double(max(1, bins.count))
        var s = """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(w))" height="\(Int(h))" font-family="sans-serif" font-size="12">
            <rect width="100%" height="100%" fill="white"/>
            <text x="\(left)" y="18">Network round trip to \(room): \(r.received)/\(r.sent) back, median \(r.medianMs.map { String(format: "%.2f ms", $0) } ?? "-")</text>
            <line x1="\(left)" y1="\(h - bottom)" x2="\(w - right)" y2="\(h - bottom)" stroke="#333"/>
            <text x="\(w / 2)" y="\(h - 12)" text-anchor="middle">round trip, ms (bins of \(r.binWidthMs) ms)</text>

            """
        for (i, b) in bins.enumerated() {
            let height = Double(b.count) / most * (h - top - bottom)
            s += String(format: "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#1f5fa8\"/>\n",
                        left + Double(i) * bar + 1, h - bottom - height, max(1, bar - 2), height)
            if i % max(1, bins.count / 5) == 0 {
                s += String(format: "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.1f</text>\n", left + Double(i) * bar, h - bottom + 16, b.fromMs)
            }
        }
        return s + "</svg>\n"
    }
}

/// The correlation around the match as a small SVG line chart: a sharp single peak is a clean
/// measurement; a broad or double peak is a room (or a device) worth a second look.
public enum LoopbackPlot {
    public static func svg(_ r: LoopbackAnalysis.Result) -> String {
        let w = 640.0, h = 320.0, left = 60.0, right = 20.0, top = 30.0, bottom = 50.0
        let points = r.curve
        let x0 = points.first?.ms ?? 0, x1 = max(points.last?.ms ?? 1, x0 + 0.001)
        func x(_ ms: Double) -> Double { left + (ms - x0) / (x1 - x0) * (w - left - right) }
        func y(_ v: Double) -> Double { top + (1 - (v + 1) / 2) * (h - top - bottom) }
        let path = points.map { String(format: "%.1f,%.1f", x($0.ms), y($0.value)) }.joined(separator: " ")
        var s = """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(w))" height="\(Int(h))" font-family="sans-serif" font-size="12">
            <rect width="100%" height="100%" fill="white"/>
            <text x="\(left)" y="18">Device round trip: correlation of the chirp with the microphone (\(r.roundTripMs.map { String(format: "%.2f ms", $0) } ?? "no measurement"))</text>
            <line x1="\(left)" y1="\(y(0))" x2="\(w - right)" y2="\(y(0))" stroke="#bbb"/>
            <line x1="\(left)" y1="\(top)" x2="\(left)" y2="\(h - bottom)" stroke="#333"/>
            <line x1="\(left)" y1="\(h - bottom)" x2="\(w - right)" y2="\(h - bottom)" stroke="#333"/>
            <text x="\(left - 8)" y="\(y(1) + 4)" text-anchor="end">1</text>
            <text x="\(left - 8)" y="\(y(0) + 4)" text-anchor="end">0</text>
            <text x="\(left - 8)" y="\(y(-1) + 4)" text-anchor="end">-1</text>
            <text x="\(w / 2)" y="\(h - 12)" text-anchor="middle">path delay, ms (speaker buffer to microphone buffer)</text>

            """
        for k in 0...4 {
            let ms = x0 + (x1 - x0) * Double(k) / 4
            s += String(format: "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.2f</text>\n", x(ms), h - bottom + 16, ms)
        }
        if let p = r.pathMs {
            s += String(format: "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#c33\" stroke-dasharray=\"4 3\"/>\n", x(p), top, x(p), h - bottom)
        }
        s += "<polyline fill=\"none\" stroke=\"#1f5fa8\" stroke-width=\"1.5\" points=\"\(path)\"/>\n</svg>\n"
        return s
    }
}
