import ArgumentParser
import Calls
import Control

/// Exit statuses (sysexits.h where one fits).
enum Exit {
    static let refused: Int32 = 1
    static let unavailable: Int32 = 69   // EX_UNAVAILABLE
    static let protocolError: Int32 = 76 // EX_PROTOCOL
}

/// One connection to the daemon: sends a request, prints the answer, exits with a status that says how it went.
enum Session {
    static func run(_ command: ControlCommand, _ options: GlobalOptions) throws -> Never {
        let client = try connect(options)
        let response: ControlResponse
        do {
            let (r, line) = try client.send(.command(command))
            if options.json { Output.out(line) }
            response = r
        } catch {
            fail(error)
        }
        switch response.outcome {
        case .failure(let failure):
            refused(failure)
        case .success(let reply):
            if options.json { throw ExitCode.success }
            Output.out(Render.reply(reply, to: command))
            throw ExitCode.success
        }
    }

    static func streamEvents(_ options: GlobalOptions) throws -> Never {
        let client = try connect(options)
        do {
            let (response, line) = try client.send(.subscribe)
            if case .failure(let failure) = response.outcome {
                if options.json { Output.out(line) }
                refused(failure)
            }
            while let line = try client.readLine(timeout: nil) {
                if options.json { Output.out(line); continue }
                do {
                    Output.out(Render.event(try Wire.decode(ControlEvent.self, from: Array(line.utf8))))
                } catch {
                    // A newer daemon's event: show it as it came rather than stop the stream.
                    Output.out("\(Render.clock()) \(line)")
                }
            }
            fail(.closed(path: options.socket, reason: nil))
        } catch {
            fail(error)
        }
    }

    private static func connect(_ options: GlobalOptions) throws -> ControlClient {
        do {
            return try ControlClient(path: options.socket, timeout: options.timeout)
        } catch {
            fail(error)
        }
    }

    private static func refused(_ failure: ControlFailure) -> Never {
        Output.err("intercomctl: the daemon refused: \(failure.code.rawValue): \(failure.message)")
        // The daemon could not read what we sent: a client and daemon that do not speak the same protocol.
        let status = failure.code == .parseError || failure.code == .unknownCommand ? Exit.protocolError : Exit.refused
        exit(status)
    }

    static func fail(_ error: ControlClientError) -> Never {
        Output.err("intercomctl: \(error)")
        if case .protocolViolation = error { exit(Exit.protocolError) }
        exit(Exit.unavailable)
    }

    private static func exit(_ status: Int32) -> Never {
        IntercomCtl.exit(withError: ExitCode(status))
    }
}
