import Lights
import TOMLKit

// `[lights]`: which LED shows which state of the terminal, and how (docs/calls.md).

/// `[lights]`.
public struct LightsSection: Sendable, Equatable {
    /// The LED class folder; every LED not in `gpio` is a folder in it.
    public var ledDir: String = "/sys/class/leds"
    /// The chip of the `gpio` lines: a path, a name, a label or a number.
    public var gpioChip: String = "gpiochip0"
    /// LED name → line offset on `gpio_chip`, for LEDs wired to GPIO without an LED driver.
    public var gpio: [String: Int] = [:]
    /// State → the LED that shows it and how (`[lights.map]`); empty = no lights.
    public var map: [LightState: LightRule] = [:]

    public init() {}

    public static let gpioLineRange = 0...65535
}

extension DaemonConfig {
    /// The lights' settings; nil when `[lights.map]` is empty.
    public func lightsSettings() -> LightsSettings? {
        lights.map.isEmpty ? nil
            : LightsSettings(plan: LightPlan(rules: lights.map), ledDirectory: lights.ledDir, gpioLines: lights.gpio,
                             gpioChip: lights.gpioChip)
    }

    static let lightsSection = SchemaSection(name: "lights", comment: "Status lights (docs/calls.md): Linux LED class devices, or GPIO lines for boards without an LED driver.", keys: [
        .string("led_dir", \.lights.ledDir, "The LED class folder; each LED named in map and not in gpio is a folder there").reloaded(.live),
        .string("gpio_chip", \.lights.gpioChip, "The GPIO chip of the lines in gpio: /dev/gpiochip0, gpiochip0, its label or number").reloaded(.live),
        SchemaKey(
            name: "gpio", comment: "LED name → line offset on gpio_chip, for LEDs on GPIO lines (high = lit); e.g. { green = 17, red = 27 }",
            allowed: "a table, name = line",
            read: { value, config throws(ValueProblem) in
                guard let table = value.table else {
                    throw ValueProblem("expected a table ([lights.gpio] or { green = 17 }), got \(TOMLRead.describe(value))")
                }
                var out: [String: Int] = [:]
                for (name, item) in table {
                    if let problem = ledNameProblem(name) { throw ValueProblem(problem, at: name) }
                    do throws(ValueProblem) {
                        let line = try TOMLRead.int(item)
                        guard LightsSection.gpioLineRange.contains(line) else { throw ValueProblem("\(line) is not a line offset 0...65535") }
                        out[name] = line
                    } catch { throw ValueProblem(error.text, at: name) }
                }
                config.lights.gpio = out
            },
            check: { _ in nil },
            render: { c in
                let entries = c.lights.gpio.sorted { $0.key < $1.key }
                return entries.isEmpty ? "{}" : "{ " + entries.map { "\(TOMLWrite.key($0.key)) = \($0.value)" }.joined(separator: ", ") + " }"
            },
            adopt: { $0.lights.gpio = $1.lights.gpio }).reloaded(.live),
        SchemaKey(
            name: "map",
            comment: "State → { led = name, pattern = steady | slow_blink | fast_blink } (pattern default steady). States: "
                + LightState.allCases.map(\.rawValue).joined(separator: ", ")
                + " (fault: no other room reachable or the audio device not running). Two states on one LED: the one listed first shows. e.g. { ringing = { led = \"green\", pattern = \"fast_blink\" }, in_call = { led = \"green\" } }",
            allowed: "a table, state = { led, pattern }",
            read: { value, config throws(ValueProblem) in
                guard let table = value.table else {
                    throw ValueProblem("expected a table ([lights.map] or { ringing = { led = \"green\" } }), got \(TOMLRead.describe(value))")
                }
                var out: [LightState: LightRule] = [:]
                let states = LightState.allCases.map(\.rawValue)
                for (key, item) in table {
                    guard let state = LightState(rawValue: key) else {
                        let hint = Spelling.closest(to: key, among: states).map { " (did you mean \($0)?)" } ?? ""
                        throw ValueProblem("is not a state: one of \(states.joined(separator: ", "))" + hint, at: key)
                    }
                    out[state] = try lightRule(item, at: key)
                }
                config.lights.map = out
            },
            check: { _ in nil },
            render: { c in
                let entries = c.lights.map.sorted { $0.key < $1.key }
                return entries.isEmpty ? "{}" : "{ " + entries.map { state, rule in
                    "\(state.rawValue) = { led = \(TOMLWrite.string(rule.led)), pattern = \(TOMLWrite.string(rule.pattern.rawValue)) }"
                }.joined(separator: ", ") + " }"
            },
            adopt: { $0.lights.map = $1.lights.map }).reloaded(.live),
    ])
}

/// One `[lights.map]` entry.
private func lightRule(_ item: TOMLValueConvertible, at state: String) throws(ValueProblem) -> LightRule {
    guard let t = item.table else {
        throw ValueProblem("expected a table { led = \"name\", pattern = \"steady\" }, got \(TOMLRead.describe(item))", at: state)
    }
    var led: String?
    var pattern = LightPattern.steady
    for (field, v) in t {
        switch field {
        case "led":
            let name: String
            do throws(ValueProblem) { name = try TOMLRead.string(v) } catch { throw ValueProblem(error.text, at: state + ".led") }
            if let problem = ledNameProblem(name) { throw ValueProblem(problem, at: state + ".led") }
            led = name
        case "pattern":
            let patterns = LightPattern.allCases.map(\.rawValue)
            let text: String
            do throws(ValueProblem) { text = try TOMLRead.string(v) } catch { throw ValueProblem(error.text, at: state + ".pattern") }
            guard let p = LightPattern(rawValue: text) else {
                let hint = Spelling.closest(to: text, among: patterns).map { " (did you mean \($0)?)" } ?? ""
                throw ValueProblem("\(TOMLWrite.string(text)) is not a pattern: one of \(patterns.joined(separator: ", "))" + hint,
                                   at: state + ".pattern")
            }
            pattern = p
        default:
            throw ValueProblem("is not a field of a light: led, pattern", at: state + "." + field)
        }
    }
    guard let led else { throw ValueProblem("needs led = \"name\" (an LED in lights.led_dir or lights.gpio)", at: state) }
    return LightRule(led: led, pattern: pattern)
}

/// An LED name becomes a path under led_dir: one folder name, nothing that climbs out.
private func ledNameProblem(_ name: String) -> String? {
    if name.isEmpty { return "an LED name is empty" }
    if name == "." || name == ".." || name.contains("/") { return "\(TOMLWrite.string(name)) is not an LED name (a folder name in lights.led_dir)" }
    return nil
}
