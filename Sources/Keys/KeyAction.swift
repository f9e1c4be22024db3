import Calls

/// A configured call button: by its position on the terminal (counting from 1, as printed on
/// the box) or by its name in the configuration's `buttons`.
public enum CallButtonRef: Sendable, Hashable, CustomStringConvertible {
    case index(Int)
    case name(String)

    public var description: String {
        switch self {
        case .index(let n): "#\(n)"
        case .name(let s): s
        }
    }
}

/// What one key does.
public enum KeyAction: Sendable, Hashable, CustomStringConvertible {
    case callButton(CallButtonRef)
    case answer
    case decline
    case hangUp
    case callBack
    case callMissed
    case acknowledge
    case acknowledgeAll
    case toggleMicMute
    case toggleSpeakerMute
    case toggleDoNotDisturb
    case toggleReadAloud
    /// Send the notification type with this id (`[notifications.<id>]`).
    case notify(String)
    /// Read this terminal's enrolment code aloud (docs/identity.md); a pending terminal reads it
    /// at any key.
    case sayEnrolmentCode

    /// The actions without an argument, by their configuration spelling: the one list the
    /// parser, the printer and the help texts read.
    private static let spelled: [(name: String, action: KeyAction)] = [
        ("answer", .answer), ("decline", .decline), ("hang_up", .hangUp), ("call_back", .callBack),
        ("call_missed", .callMissed), ("acknowledge", .acknowledge), ("acknowledge_all", .acknowledgeAll),
        ("toggle_mic_mute", .toggleMicMute), ("toggle_speaker_mute", .toggleSpeakerMute), ("toggle_dnd", .toggleDoNotDisturb),
        ("toggle_read_aloud", .toggleReadAloud), ("say_enrolment_code", .sayEnrolmentCode),
    ]

    /// Every spelling but `call:` and `notify:`, for help texts.
    public static let names = spelled.map(\.name)

    /// The configuration's spelling: `call:2`, `call:empfang`, `notify:material`, or one of `names`.
    public init?(configValue: String) {
        if let found = Self.spelled.first(where: { $0.name == configValue }) {
            self = found.action
            return
        }
        if configValue == "toggle_do_not_disturb" {
            self = .toggleDoNotDisturb
            return
        }
        if configValue.hasPrefix("notify:") {
            let id = String(configValue.dropFirst("notify:".count))
            guard NotificationType.isValidID(id) else { return nil }
            self = .notify(id)
            return
        }
        guard configValue.hasPrefix("call:") else { return nil }
        let target = String(configValue.dropFirst("call:".count))
        if let n = Int(target) {
            guard n >= 1 else { return nil }
            self = .callButton(.index(n))
        } else {
            guard !target.isEmpty else { return nil }
            self = .callButton(.name(target))
        }
    }

    public var description: String {
        switch self {
        case .callButton(.index(let n)): "call:\(n)"
        case .callButton(.name(let name)): "call:\(name)"
        case .notify(let id): "notify:\(id)"
        default: Self.spelled.first { $0.action == self }!.name
        }
    }

    /// The call engine's command for this key; `buttons` are the configured button names in
    /// order. Nil for a button index or name that is not configured, and for what is not the
    /// engine's (`sayEnrolmentCode`).
    public func command(buttons: [String]) -> CallCommand? {
        switch self {
        case .callButton(.index(let n)):
            return buttons.indices.contains(n - 1) ? .call(button: buttons[n - 1]) : nil
        case .callButton(.name(let name)):
            return buttons.contains(name) ? .call(button: name) : nil
        case .answer: return .answer
        case .decline: return .decline
        case .hangUp: return .hangUp
        case .callBack: return .callBack
        case .callMissed: return .callMissed
        case .acknowledge: return .acknowledge(all: false)
        case .acknowledgeAll: return .acknowledge(all: true)
        case .toggleMicMute: return .toggleMicrophoneMute
        case .toggleSpeakerMute: return .toggleSpeakerMute
        case .toggleDoNotDisturb: return .toggleDoNotDisturb
        case .toggleReadAloud: return .toggleReadAloud
        case .notify(let id): return .notify(type: id)
        case .sayEnrolmentCode: return nil
        }
    }
}
