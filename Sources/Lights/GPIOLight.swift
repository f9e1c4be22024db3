import CGPIOD
import Glibc

// The one file that calls libgpiod (v1 API, Debian 12's 1.6).

/// A GPIO chip opened through libgpiod: `/dev/gpiochip0`, `gpiochip0`, its label or its number.
final class GPIOChip {
    let path: String
    private let chip: OpaquePointer

    init(_ path: String) throws(LightError) {
        guard let chip = gpiod_chip_open_lookup(path) else {
            throw LightError(led: path, problem: "gpiod_chip_open_lookup: \(String(cString: strerror(errno)))")
        }
        self.path = path
        self.chip = chip
    }

    /// Requests line `offset` as an output, initially low, for `name`.
    func output(offset: Int, name: String) throws(LightError) -> GPIOLight {
        guard let offset = UInt32(exactly: offset), let line = gpiod_chip_get_line(chip, offset) else {
            throw LightError(led: name, problem: "\(path) line \(offset): gpiod_chip_get_line: \(String(cString: strerror(errno)))")
        }
        guard gpiod_line_request_output(line, "intercomd", 0) == 0 else {
            throw LightError(led: name, problem: "\(path) line \(offset): gpiod_line_request_output: \(String(cString: strerror(errno)))")
        }
        return GPIOLight(name: name, line: line, chip: self)
    }

    deinit { gpiod_chip_close(chip) }
}

/// An LED on a GPIO line: steady and off by level, blinks by the lights thread (a line has no timer).
final class GPIOLight: LightOutput {
    let name: String
    private let line: OpaquePointer
    private let chip: GPIOChip  // the chip outlives its lines

    fileprivate init(name: String, line: OpaquePointer, chip: GPIOChip) {
        self.name = name
        self.line = line
        self.chip = chip
    }

    func show(_ pattern: LightPattern) throws(LightError) -> Bool {
        guard pattern.blink == nil else { return false }
        try set(on: pattern == .steady)
        return true
    }

    func set(on: Bool) throws(LightError) {
        guard gpiod_line_set_value(line, on ? 1 : 0) == 0 else {
            throw LightError(led: name, problem: "gpiod_line_set_value: \(String(cString: strerror(errno)))")
        }
    }

    deinit { gpiod_line_release(line) }
}
