import Calls

/// What one key does: something the call engine does (`CallCommand`, by the same names the
/// control socket takes), a call button by its position, or reading the enrolment code.
public enum KeyAction: Sendable, Hashable, CustomStringConvertible {
    /// `call:<button name>`, `notify:<type>`, or a command without arguments by its name
    /// (`answer`, `hang_up`, `toggle_dnd`, ...: `CallCommand.named`).
    case perform(CallCommand)
    /// `call:<n>`: the n-th configured button (counting from 1, as printed on the box; buttons in name order).
    case callButton(Int)
    /// Read this terminal's enrolment code aloud (docs/identity.md); a pending terminal reads it
    /// at any key.
    case sayEnrolmentCode

    /// Every spelling but `call:` and `notify:`, for help texts: each command's first name.
    public static let names: [String] = {
        var seen: [CallCommand] = []
        var names: [String] = []
        for (name, command) in CallCommand.named where !seen.contains(command) {
            seen.append(command)
            names.append(name)
        }
        return names + ["say_enrolment_code"]
    }()

    /// The configuration's spelling: `call:2`, `call:empfang`, `notify:material`, or one of `names`.
    public init?(configValue: String) {
        if configValue == "say_enrolment_code" {
            self = .sayEnrolmentCode
        } else if let command = CallCommand(name: configValue) {
            self = .perform(command)
        } else if configValue.hasPrefix("notify:") {
            let id = String(configValue.dropFirst("notify:".count))
            guard NotificationType.isValidID(id) else { return nil }
            self = .perform(.notify(type: id))
        } else if configValue.hasPrefix("call:") {
            let target = String(configValue.dropFirst("call:".count))
            if let n = Int(target) {
                guard n >= 1 else { return nil }
                self = .callButton(n)
            } else {
                guard !target.isEmpty else { return nil }
                self = .perform(.call(button: target))
            }
        } else {
            return nil
        }
    }

    public var description: String {
        switch self {
        case .callButton(let n): "call:\(n)"
        case .perform(.call(let name)): "call:\(name)"
        case .perform(.notify(let id)): "notify:\(id)"
        case .perform(let command): CallCommand.named.first { $0.command == command }?.name ?? "\(command)"
        case .sayEnrolmentCode: "say_enrolment_code"
        }
    }

    /// The call engine's command for this key; `buttons` are the configured button names in
    /// order. Nil for a button index or name that is not configured, and for what is not the
    /// engine's (`sayEnrolmentCode`).
    public func command(buttons: [String]) -> CallCommand? {
        switch self {
        case .callButton(let n): buttons.indices.contains(n - 1) ? .call(button: buttons[n - 1]) : nil
        case .perform(.call(let name)): buttons.contains(name) ? .call(button: name) : nil
        case .perform(let command): command
        case .sayEnrolmentCode: nil
        }
    }
}
