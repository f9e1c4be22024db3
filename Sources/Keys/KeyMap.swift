/// A configured key map entry that could not be understood.
public struct KeyMapError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The entry's key as written in the configuration.
    public let key: String
    public let problem: String
    public var description: String { "key \"\(key)\": \(problem)" }
}

/// Which action each evdev key code triggers: on a short press (`actions`) and, for keys that
/// have one, on a long press (`long`).
public struct KeyMap: Sendable, Equatable {
    public private(set) var actions: [UInt16: KeyAction]
    public private(set) var long: [UInt16: KeyAction]

    public init(_ actions: [UInt16: KeyAction] = [:], long: [UInt16: KeyAction] = [:]) {
        self.actions = actions
        self.long = long
    }

    public subscript(code: UInt16) -> KeyAction? { actions[code] }

    /// Builds the map from configuration text (`[keys.map]` and `[keys.long_map]`).
    public static func parse(_ entries: [String: String], long: [String: String] = [:]) throws(KeyMapError) -> KeyMap {
        KeyMap(try table(entries), long: try table(long))
    }

    /// One table: keys are decimal codes ("59") or Linux names ("KEY_F1", "BTN_0"), values are
    /// `KeyAction(configValue:)` spellings. Two names for one code are an error, so a typo cannot
    /// silently override another key.
    public static func table(_ entries: [String: String]) throws(KeyMapError) -> [UInt16: KeyAction] {
        var map: [UInt16: KeyAction] = [:]
        var origin: [UInt16: String] = [:]
        for (key, value) in entries.sorted(by: { $0.key < $1.key }) {
            guard let code = keyCode(key) else {
                throw KeyMapError(key: key, problem: "not a key code (a number up to \(maxKeyCode) or a name such as KEY_F1, BTN_0)")
            }
            guard let action = KeyAction(configValue: value) else {
                throw KeyMapError(key: key, problem: "\"\(value)\" is not an action (call:N, call:NAME, notify:ID, \(KeyAction.names.joined(separator: ", ")))")
            }
            if let other = origin[code] {
                throw KeyMapError(key: key, problem: "code \(code) is already mapped by \"\(other)\"")
            }
            map[code] = action
            origin[code] = key
        }
        return map
    }

    /// KEY_MAX in linux/input-event-codes.h.
    public static let maxKeyCode: UInt16 = 0x2FF

    /// A decimal code or one of the Linux names a terminal's keys commonly send.
    public static func keyCode(_ text: String) -> UInt16? {
        if let n = UInt16(text) { return n <= maxKeyCode ? n : nil }
        return namedCodes[text.uppercased()]
    }

    // Values from linux/input-event-codes.h (stable kernel ABI).
    private static let namedCodes: [String: UInt16] = {
        var t: [String: UInt16] = [
            "KEY_ESC": 1, "KEY_0": 11, "KEY_ENTER": 28, "KEY_SPACE": 57,
            "KEY_F11": 87, "KEY_F12": 88, "KEY_MUTE": 113, "KEY_VOLUMEDOWN": 114, "KEY_VOLUMEUP": 115,
            "KEY_PHONE": 169, "KEY_MICMUTE": 248,
        ]
        for n in 1...9 { t["KEY_\(n)"] = UInt16(1 + n) }         // KEY_1 = 2 ... KEY_9 = 10
        for n in 1...10 { t["KEY_F\(n)"] = UInt16(58 + n) }      // KEY_F1 = 59 ... KEY_F10 = 68
        for n in 0...9 { t["BTN_\(n)"] = UInt16(0x100 + n) }     // BTN_0 = 0x100 (GPIO buttons)
        return t
    }()
}
