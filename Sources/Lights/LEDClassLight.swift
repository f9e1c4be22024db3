import Glibc
import Posix

/// An LED of Linux's LED class: a folder `<directory>/<name>` with `brightness`, `max_brightness`
/// and `trigger`. A blink is handed to the kernel's `timer` trigger (`delay_on`/`delay_off`
/// appear once it is chosen), so the LED blinks without waking us; a kernel without that
/// trigger refuses it and the lights thread blinks the LED itself.
final class LEDClassLight: LightOutput {
    let name: String
    private let folder: String
    private let maxBrightness: Int
    /// Nil until a blink was tried; false once the kernel refused the timer trigger.
    private var kernelTimer: Bool?

    init(directory: String, name: String) throws(LightError) {
        self.name = name
        folder = directory + "/" + name
        var info = stat()
        guard stat(folder, &info) == 0 else {
            let why = String(cString: strerror(errno))
            throw LightError(led: name, problem: "\(folder): \(why) (no LED of that name; ls \(directory) lists them)")
        }
        let text = (try? WholeFile.read(folder + "/max_brightness")).flatMap { $0.map { String(decoding: $0, as: UTF8.self) } }
        maxBrightness = text.flatMap { $0.split(whereSeparator: \.isWhitespace).first.flatMap { Int($0) } }.map { max($0, 1) } ?? 1
    }

    func show(_ pattern: LightPattern) throws(LightError) -> Bool {
        guard let blink = pattern.blink else {
            try write("trigger", "none")
            try write("brightness", pattern == .off ? "0" : String(maxBrightness))
            return true
        }
        if kernelTimer != false {
            do throws(LightError) {
                try write("trigger", "timer")
                try write("delay_on", String(blink.onMs))
                try write("delay_off", String(blink.offMs))
                kernelTimer = true
                return true
            } catch {
                kernelTimer = false
            }
        }
        try write("trigger", "none")
        return false
    }

    func set(on: Bool) throws(LightError) {
        try write("brightness", on ? String(maxBrightness) : "0")
    }

    /// Writes one attribute. Never creates a file: a missing attribute is the kernel saying no.
    private func write(_ attribute: String, _ value: String) throws(LightError) {
        let path = folder + "/" + attribute
        do throws(SystemError) {
            let fd = try systemCall("open \(path)") { open(path, O_WRONLY | O_TRUNC | O_CLOEXEC) }
            defer { _ = close(fd) }
            let bytes = Array((value + "\n").utf8)
            // An attribute takes its value in one write: a short one is a refusal, not a pause.
            let n = try systemCall("write \(value) to \(path)") { bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) } }
            if n != bytes.count { throw SystemError("write \(value) to \(path) (short)", .ioError) }
        } catch {
            throw LightError(led: name, problem: error.description)
        }
    }
}
