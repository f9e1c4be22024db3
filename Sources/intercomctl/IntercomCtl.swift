import ArgumentParser
import Calls
import Control

@main
struct IntercomCtl: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "intercomctl",
        abstract: "Control the local intercomd through its control socket.",
        discussion: """
            Global options (--socket, --json, --timeout) may come before or after the command.
            Exit status: 0 done; 1 the daemon refused (its error code and message on stderr);
            64 usage; 69 the daemon is not reachable or did not answer in time; 76 protocol error.
            """,
        subcommands: [Call.self, Answer.self, Decline.self, Hangup.self, Leave.self, CallBack.self, CallMissed.self,
                      Acknowledge.self, Notify.self, ReadAloud.self, Mute.self, Unmute.self, DND.self, Status.self, Stats.self, Site.self, Rooms.self, History.self,
                      EraseHistory.self, Events.self, Loopback.self])

    static func main() {
        main(GlobalOptions.movedAfterCommand(Array(CommandLine.arguments.dropFirst())))
    }
}

struct GlobalOptions: ParsableArguments {
    @Option(help: "The daemon's control socket.")
    var socket: String = ControlSettings.defaultSocketPath

    @Flag(help: "Print the daemon's JSON lines as they are.")
    var json = false

    @Option(help: "Seconds to wait for connecting and for each answer.")
    var timeout: Double = 5

    /// ArgumentParser reads a subcommand's options only after its name; people also write
    /// `intercomctl --socket PATH status`, so global options given first are moved behind the command.
    static func movedAfterCommand(_ arguments: [String]) -> [String] {
        var leading: [String] = []
        var i = 0
        while i < arguments.count {
            let a = arguments[i]
            if a == "--json" || a.hasPrefix("--socket=") || a.hasPrefix("--timeout=") {
                leading.append(a)
                i += 1
            } else if (a == "--socket" || a == "--timeout"), i + 1 < arguments.count {
                leading += [a, arguments[i + 1]]
                i += 2
            } else {
                break
            }
        }
        guard i < arguments.count, !leading.isEmpty else { return arguments }
        return [arguments[i]] + leading + arguments[(i + 1)...]
    }

    func validate() throws {
        guard timeout > 0, timeout.isFinite else { throw ValidationError("--timeout must be a positive number of seconds") }
    }
}

struct Call: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Call the rooms of a button, or rooms directly (--rooms a,b).")
    @OptionGroup var options: GlobalOptions
    @Argument(help: "A call button's name as configured.") var button: String?
    @Option(help: "Comma-separated room ids to call instead of a button.") var rooms: String?
    @Option(help: "With --rooms: call (default), emergency (answered at once, through do-not-disturb and calls) or announcement (one-way).")
    var kind: String?

    func validate() throws {
        guard (button == nil) != (rooms == nil) else { throw ValidationError("give a button or --rooms, not both and not neither") }
        if let kind {
            guard rooms != nil else { throw ValidationError("--kind goes with --rooms (a button's call has the button's kind)") }
            guard CallKind(rawValue: kind) != nil else { throw ValidationError("--kind: call, emergency or announcement") }
        }
        if let rooms {
            let parts = rooms.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            guard !parts.isEmpty, parts.allSatisfy({ RoomID($0) != nil }) else {
                throw ValidationError("--rooms: room ids are lower-case letters, digits, - and _, 1-32 characters, separated by commas")
            }
        }
    }

    func run() throws {
        if let button { try Session.run(.perform(.call(button: button)), options) }
        let ids = (rooms ?? "").split(separator: ",").compactMap { RoomID(String($0)) }
        try Session.run(.perform(.callRooms(ids, kind: kind.flatMap(CallKind.init(rawValue:)) ?? .normal)), options)
    }
}

struct Hangup: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "End the call (a callee leaves it).")
    @OptionGroup var options: GlobalOptions
    func run() throws { try Session.run(.perform(.hangUp), options) }
}

struct Answer: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Take the ringing incoming call.")
    @OptionGroup var options: GlobalOptions
    func run() throws { try Session.run(.perform(.answer), options) }
}

struct Decline: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Refuse the ringing incoming call (the caller hears it declined).")
    @OptionGroup var options: GlobalOptions
    func run() throws { try Session.run(.perform(.decline), options) }
}

struct CallBack: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "call-back",
                                                    abstract: "Call the other side of the last call again (who called, or whom this room called).")
    @OptionGroup var options: GlobalOptions
    func run() throws { try Session.run(.perform(.callBack), options) }
}

struct CallMissed: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "call-missed",
                                                    abstract: "Call the room of the oldest missed call not yet acknowledged (acknowledged once it answers).")
    @OptionGroup var options: GlobalOptions
    func run() throws { try Session.run(.perform(.callMissed), options) }
}

struct Acknowledge: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Acknowledge the oldest notification heard here, or with none waiting the oldest missed call (--all: every one); the sender is told, the reminder stops when none waits.")
    @OptionGroup var options: GlobalOptions
    @Flag(help: "Acknowledge every notification (or, with none waiting, every missed call).") var all = false
    func run() throws { try Session.run(.perform(.acknowledge(all: all)), options) }
}

struct Notify: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Send a configured notification ([notifications.<id>]) to its recipients.")
    @OptionGroup var options: GlobalOptions
    @Argument(help: "The notification type's id, e.g. material") var type: String
    func run() throws { try Session.run(.perform(.notify(type: type)), options) }
}

struct ReadAloud: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "read-aloud",
                                                    abstract: "Switch reading notifications aloud in this room on or off (their tones sound either way).")
    @OptionGroup var options: GlobalOptions
    @Argument(help: "on or off") var state: OnOff
    func run() throws { try Session.run(.perform(.setReadAloud(state == .on)), options) }
}

struct EraseHistory: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "erase-history",
                                                    abstract: "Erase this room's call history (control.technician_group only).")
    @OptionGroup var options: GlobalOptions
    func run() throws { try Session.run(.eraseHistory, options) }
}

struct Leave: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Leave the call (the same as hangup).")
    @OptionGroup var options: GlobalOptions
    func run() throws { try Session.run(.perform(.hangUp), options) }
}

enum Target: String, ExpressibleByArgument, CaseIterable {
    case mic, speaker
    func muted(_ on: Bool) -> CallCommand { self == .mic ? .setMicrophoneMuted(on) : .setSpeakerMuted(on) }
}

struct Mute: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Mute the microphone or the speaker.")
    @OptionGroup var options: GlobalOptions
    @Argument(help: "mic or speaker") var target: Target
    func run() throws { try Session.run(.perform(target.muted(true)), options) }
}

struct Unmute: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Unmute the microphone or the speaker.")
    @OptionGroup var options: GlobalOptions
    @Argument(help: "mic or speaker") var target: Target
    func run() throws { try Session.run(.perform(target.muted(false)), options) }
}

enum OnOff: String, ExpressibleByArgument, CaseIterable { case on, off }

struct DND: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "dnd", abstract: "Switch do-not-disturb on or off.")
    @OptionGroup var options: GlobalOptions
    @Argument(help: "on or off") var state: OnOff
    func run() throws { try Session.run(.perform(.setDoNotDisturb(state == .on)), options) }
}

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "This room, do-not-disturb, mute and the call in progress.")
    @OptionGroup var options: GlobalOptions
    func run() throws { try Session.run(.status, options) }
}

struct Stats: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "The daemon's counters: audio (xruns, echo canceller), network streams, calls.")
    @OptionGroup var options: GlobalOptions
    func run() throws { try Session.run(.statistics, options) }
}

struct Site: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Every terminal's software and site document version, when it applied it, and who is behind (as this terminal hears them).")
    @OptionGroup var options: GlobalOptions
    func run() throws { try Session.run(.site, options) }
}

struct Rooms: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "The room directory with presence, and this room's call buttons.")
    @OptionGroup var options: GlobalOptions
    func run() throws { try Session.run(.rooms, options) }
}

struct History: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Past, missed and declined calls, oldest first.")
    @OptionGroup var options: GlobalOptions
    @Option(help: "Show only the newest N entries.") var limit: Int?
    func validate() throws {
        if let limit, limit <= 0 { throw ValidationError("--limit must be positive") }
    }
    func run() throws { try Session.run(.history(limit: limit), options) }
}

struct Events: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print the daemon's events as they happen, until interrupted.")
    @OptionGroup var options: GlobalOptions
    func run() throws { try Session.streamEvents(options) }
}
