// A call command on the wire: one object whose `cmd` names it, its arguments beside it
// (docs/control.md). The control socket and the site service's API read this one form; the
// names without arguments are also what a key can be set to do (`Keys/KeyAction`).

extension CallCommand: Codable {
    /// The commands without arguments, by name: what a key can be set to do and the control
    /// socket's `cmd`. A command's first name is the one a key's action prints as; on the wire
    /// `hang_up` is written `hangup`, the name every version of the protocol takes.
    public static let named: [(name: String, command: CallCommand)] = [
        ("answer", .answer), ("decline", .decline), ("hang_up", .hangUp), ("hangup", .hangUp), ("leave", .hangUp),
        ("call_back", .callBack), ("call_missed", .callMissed), ("acknowledge", .acknowledge(all: false)),
        ("acknowledge_all", .acknowledge(all: true)),
        ("toggle_mic_mute", .toggleMicrophoneMute), ("toggle_speaker_mute", .toggleSpeakerMute),
        ("toggle_dnd", .toggleDoNotDisturb), ("toggle_do_not_disturb", .toggleDoNotDisturb), ("toggle_read_aloud", .toggleReadAloud),
    ]

    /// Every `cmd` this vocabulary reads.
    public static let names: Set<String> = Set(named.map(\.name)).union(["call", "mute", "unmute", "dnd", "read_aloud", "notify"])

    public init?(name: String) {
        guard let found = Self.named.first(where: { $0.name == name }) else { return nil }
        self = found.command
    }

    enum Keys: String, CodingKey { case cmd, button, rooms, kind, all, target, state, type }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: Keys.self)
        func onOff(_ on: Bool) throws { try c.encode(on ? "on" : "off", forKey: .state) }
        switch self {
        case .call(let button):
            try c.encode("call", forKey: .cmd)
            try c.encode(button, forKey: .button)
        case .callRooms(let rooms, let kind):
            try c.encode("call", forKey: .cmd)
            try c.encode(rooms, forKey: .rooms)
            if kind != .normal { try c.encode(kind, forKey: .kind) }
        case .acknowledge(let all):
            try c.encode("acknowledge", forKey: .cmd)
            if all { try c.encode(true, forKey: .all) }
        case .setMicrophoneMuted(let on), .setSpeakerMuted(let on):
            try c.encode(on ? "mute" : "unmute", forKey: .cmd)
            try c.encode(self == .setMicrophoneMuted(on) ? "mic" : "speaker", forKey: .target)
        case .setDoNotDisturb(let on):
            try c.encode("dnd", forKey: .cmd)
            try onOff(on)
        case .setReadAloud(let on):
            try c.encode("read_aloud", forKey: .cmd)
            try onOff(on)
        case .notify(let type):
            try c.encode("notify", forKey: .cmd)
            try c.encode(type, forKey: .type)
        case .hangUp:
            try c.encode("hangup", forKey: .cmd)
        case .answer, .decline, .callBack, .callMissed, .toggleMicrophoneMute, .toggleSpeakerMute, .toggleDoNotDisturb, .toggleReadAloud:
            try c.encode(Self.named.first { $0.command == self }!.name, forKey: .cmd)
        }
    }

    /// Refusals name the argument; unknown members are ignored (a newer client's extras).
    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: Keys.self)
        let name = try c.decode(String.self, forKey: .cmd)
        func fail(_ key: Keys, _ message: String) -> DecodingError {
            .dataCorruptedError(forKey: key, in: c, debugDescription: message)
        }
        func onOff() throws -> Bool {
            switch (try? c.decodeIfPresent(String.self, forKey: .state)) ?? nil {
            case "on": return true
            case "off": return false
            default: throw fail(.state, "\"state\" must be \"on\" or \"off\"")
            }
        }
        switch name {
        case "call":
            switch (c.contains(.button), c.contains(.rooms)) {
            case (true, false):
                let button = try c.decode(String.self, forKey: .button)
                guard !button.isEmpty else { throw fail(.button, "\"button\" is empty") }
                guard !c.contains(.kind) else { throw fail(.kind, "a button's call has the button's kind: \"kind\" goes with \"rooms\"") }
                self = .call(button: button)
            case (false, true):
                guard let texts = try? c.decode([String].self, forKey: .rooms) else {
                    throw fail(.rooms, "\"rooms\" must be an array of room ids")
                }
                guard !texts.isEmpty else { throw fail(.rooms, "\"rooms\" is empty") }
                var rooms: [RoomID] = []
                for text in texts {
                    guard let room = RoomID(text) else {
                        throw fail(.rooms, "\"rooms\" holds an invalid room id (lower-case letters, digits, - and _, 1-32 characters)")
                    }
                    if !rooms.contains(room) { rooms.append(room) }
                }
                var kind = CallKind.normal
                if c.contains(.kind) {
                    guard let k = try? c.decode(CallKind.self, forKey: .kind) else { throw fail(.kind, "\"kind\" is call, emergency or announcement") }
                    kind = k
                }
                self = .callRooms(rooms, kind: kind)
            case (false, false):
                throw fail(.cmd, "call needs \"button\" (a string) or \"rooms\" (an array of room ids)")
            case (true, true):
                throw fail(.cmd, "call takes \"button\" or \"rooms\", not both")
            }
        case "acknowledge":
            guard (try? c.decodeNil(forKey: .all)) != true, c.contains(.all) else { self = .acknowledge(all: false); return }
            guard let all = try? c.decode(Bool.self, forKey: .all) else { throw fail(.all, "\"all\" must be true or false") }
            self = .acknowledge(all: all)
        case "mute", "unmute":
            switch (try? c.decodeIfPresent(String.self, forKey: .target)) ?? nil {
            case "mic", "microphone": self = .setMicrophoneMuted(name == "mute")
            case "speaker": self = .setSpeakerMuted(name == "mute")
            default: throw fail(.target, "\"target\" must be \"mic\" or \"speaker\"")
            }
        case "dnd":
            self = .setDoNotDisturb(try onOff())
        case "read_aloud":
            self = .setReadAloud(try onOff())
        case "notify":
            guard let type = try? c.decode(String.self, forKey: .type), NotificationType.isValidID(type) else {
                throw fail(.type, "notify needs \"type\": a notification id (1-32 of a-z, 0-9, - and _)")
            }
            self = .notify(type: type)
        default:
            guard let command = CallCommand(name: name) else { throw Unknown(name: String(name.prefix(64))) }
            self = command
        }
    }

    /// A `cmd` this vocabulary does not know.
    public struct Unknown: Error, Sendable, CustomStringConvertible {
        public let name: String
        public var description: String { "unknown command \"\(name)\"" }
    }
}
