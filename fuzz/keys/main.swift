// libFuzzer entry point for what a terminal reads from outside about its keys: the input
// device's event records (bytes → events → debounced actions) and the configuration's key map
// (names and action spellings). Compiled with the Calls and Keys sources into one module (see
// build.sh). Anything inconsistent traps, which libFuzzer reports as a crash.

/// A map as a small installation configures it.
let fuzzMap = (try? KeyMap.parse(["KEY_F1": "call:empfang", "BTN_0": "hang_up", "KEY_MICMUTE": "toggle_mic_mute", "30": "toggle_dnd"])) ?? KeyMap()

@_cdecl("LLVMFuzzerTestOneInput")
public func keysFuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let raw = UnsafeRawBufferPointer(start: data, count: data == nil ? 0 : size)
    guard let mode = raw.first else { return 0 }
    let rest = UnsafeRawBufferPointer(rebasing: raw.dropFirst())
    if mode & 1 == 0 {
        // The device: whole records only, as the reader hands them on.
        var filter = KeyFilter(map: fuzzMap, debounce: .milliseconds(Int(mode >> 1)))
        var offset = 0, arrival: Int64 = 1_000_000
        while offset + InputEvent.size <= rest.count {
            let event = InputEvent(decoding: UnsafeRawBufferPointer(rebasing: rest[offset..<(offset + InputEvent.size)]))
            precondition(event.encoded().withUnsafeBytes { InputEvent(decoding: $0) } == event,
                         "a record does not survive its own encoding")
            if case .action(let action) = filter.handle(event, arrivalMicroseconds: arrival) {
                precondition(event.type == InputEvent.keyType && event.value == InputEvent.press && fuzzMap[event.code] == action)
            }
            offset += InputEvent.size
            arrival += 1000
        }
    } else {
        // The configuration: "name=value" lines as the key map's entries.
        let text = String(decoding: rest, as: UTF8.self)
        var entries: [String: String] = [:]
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1)
            if parts.count == 2 { entries[String(parts[0])] = String(parts[1]) }
        }
        do {
            let map = try KeyMap.parse(entries)
            for (name, value) in entries {
                precondition(map[KeyMap.keyCode(name)!] == KeyAction(configValue: value), "a parsed entry maps elsewhere")
            }
        } catch {
            precondition(!error.problem.isEmpty, "a refusal names its problem")
        }
    }
    return 0
}
