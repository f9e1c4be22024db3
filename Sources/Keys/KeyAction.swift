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
    case hangUp
    case toggleMicMute
    case toggleSpeakerMute
    case toggleDoNotDisturb

    /// The configuration's spelling: `call:2`, `call:empfang`, `hang_up`, `toggle_mic_mute`,
    /// `toggle_speaker_mute`, `toggle_dnd`.
    public init?(configValue: String) {
        switch configValue {
        case "hang_up": self = .hangUp
        case "toggle_mic_mute": self = .toggleMicMute
        case "toggle_speaker_mute": self = .toggleSpeakerMute
        case "toggle_dnd", "toggle_do_not_disturb": self = .toggleDoNotDisturb
        default:
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
    }

    public var description: String {
        switch self {
        case .callButton(.index(let n)): "call:\(n)"
        case .callButton(.name(let name)): "call:\(name)"
        case .hangUp: "hang_up"
        case .toggleMicMute: "toggle_mic_mute"
        case .toggleSpeakerMute: "toggle_speaker_mute"
        case .toggleDoNotDisturb: "toggle_dnd"
        }
    }

    /// The call engine's command for this key; `buttons` are the configured button names in
    /// order. Nil for a button index or name that is not configured.
    public func command(buttons: [String]) -> CallCommand? {
        switch self {
        case .callButton(.index(let n)):
            return buttons.indices.contains(n - 1) ? .call(button: buttons[n - 1]) : nil
        case .callButton(.name(let name)):
            return buttons.contains(name) ? .call(button: name) : nil
        case .hangUp: return .hangUp
        case .toggleMicMute: return .toggleMicrophoneMute
        case .toggleSpeakerMute: return .toggleSpeakerMute
        case .toggleDoNotDisturb: return .toggleDoNotDisturb
        }
    }
}
