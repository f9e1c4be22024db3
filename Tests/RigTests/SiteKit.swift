import Control
import Foundation
import Glibc
import TestSupport
import XCTest

/// A site for the tests: the administrator's real tool, a document describing `CallRooms`, and
/// terminals whose own files keep only the box's settings and name the site.
enum SiteKit {
    static let siteID = "rig-praxis"

    static var tool: String {
        URL(fileURLWithPath: DaemonProcess.binary).deletingLastPathComponent().appendingPathComponent("intercom-site").path
    }

    /// Runs `intercom-site` (in `host`'s network namespace, if given) and returns its exit status
    /// and output (stdout and stderr).
    static func run(_ arguments: [String], in host: NetLab.Host? = nil) throws -> (status: Int32, output: String) {
        let process = Process()
        if let host {
            process.executableURL = URL(fileURLWithPath: NetLab.ipPath)
            process.arguments = ["netns", "exec", host.namespace, tool] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: tool)
            process.arguments = arguments
        }
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    /// The practice: every room with its ports, a button to each, and `extra`.
    static func document(_ rooms: CallRooms, names: [String: String] = [:], extra: String = "") -> String {
        rooms.rooms.map { r in
            "[rooms.\(r.id)]\nname = \"\(names[r.id] ?? r.rig)\"\naddress = \"\(r.address)\"\nsignalling_port = \(r.signalling)\nmedia_port = \(r.media)\n"
                + "[buttons.\(r.id)]\nrooms = [\"\(r.id)\"]\n"
        }.joined(separator: "\n") + "[calls]\nring_ms = \(rooms.ringMs)\n" + extra
    }

    /// Creates the site in `folder` (its keys and version 1), then writes `document` and signs it (version 2).
    static func create(_ folder: String, document: String) throws {
        let created = try run(["create", "--dir", folder, "--id", siteID, "--room", "rooma=127.0.0.1"])
        XCTAssertEqual(created.status, 0, created.output)
        try document.write(toFile: folder + "/site.toml", atomically: true, encoding: .utf8)
        try sign(folder)
    }

    /// Starts a room whose file has only the box's own keys (and `own`) and names the site; its
    /// document is the folder's site.json unless it holds one already.
    @discardableResult
    /// `lab`: no key means clear text, as in most tests; `false`: secure, as a practice runs.
    /// `administratorKey`: the terminal's administrator.pub, if not the folder's.
    static func start(_ rooms: CallRooms, _ id: String, folder: String, own: String = "", lab: Bool = true,
                      administratorKey: String? = nil, environment: [String: String] = [:]) throws -> DaemonProcess {
        let me = rooms.room(id)
        let kept = "\(rooms.dir)/\(id)-site.json"
        if !FileManager.default.fileExists(atPath: kept) { try FileManager.default.copyItem(atPath: folder + "/site.json", toPath: kept) }
        let config = try DaemonProcess.writeRoomConfig(me.rig, extra: rooms.ownSettings(id) + "\n" + own + (lab ? "" : "\n[security]\nmode = \"secure\"") + """

            [site]
            id = "\(siteID)"
            administrator_key = "\(administratorKey ?? folder + "/administrator.pub")"
            document = "\(kept)"
            identity_key = "\(rooms.dir)/\(id)-terminal.key"
            """)
        return try rooms.start(id, configPath: config, environment: environment)
    }

    /// Approves each room's terminal with the code its daemon shows (what the installer reads at
    /// the box), signs, and publishes the result as `version` (from `host`, to the first room, when
    /// given); returns once every one of them seals by terminal keys under it.
    static func approveAll(_ rooms: CallRooms, _ ids: [String], folder: String, version: UInt64, in host: NetLab.Host? = nil) throws {
        for id in ids {
            let code = try XCTUnwrap(try rooms.daemons[id]!.statistics().site?.terminal?.enrolmentCode, "\(id) is pending with a code")
            let approved = try run(["approve", "--dir", folder, "--room", id, "--code", code], in: host)
            XCTAssertEqual(approved.status, 0, approved.output)
        }
        try sign(folder)
        let first = rooms.room(ids[0])
        let published = try run(["publish", "--dir", folder] + (host == nil ? [] : ["--to", "\(first.address):\(first.signalling)"]), in: host)
        XCTAssertEqual(published.status, 0, published.output)
        for id in ids {
            XCTAssertNotNil(rooms.daemons[id]!.waitForStatistics(timeout: 30) {
                $0.calls?.protection == .terminalKeys && $0.site?.version == version && $0.site?.appliedAt != nil
            }, "\(id) seals by terminal keys under version \(version)")
        }
    }

    /// A site key file in `dir`, mode 0600: the same key for the same seed, another for another.
    static func siteKeyFile(in dir: String, seed: Int = 7) throws -> String {
        let path = dir + "/site-\(seed).key"
        try Data((0..<32).map { UInt8($0 * seed & 255) }).base64EncodedString().write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o600)
        return path
    }

    /// Signs the folder's site.toml as the next version.
    static func sign(_ folder: String) throws {
        let signed = try run(["sign", "--dir", folder])
        XCTAssertEqual(signed.status, 0, signed.output)
    }
}

/// A daemon's audio across a window in which something else happens to it (a reload, a new site
/// version arriving), from its typed statistics before and after: what its room heard of the call.
struct AudioAcross: CustomStringConvertible {
    let seconds: Double
    /// Periods the audio thread ran, and device sessions it started, in the window.
    let periods: Int, sessions: Int
    /// Of the call's stream: packets taken in, and frames played from packets, concealed, dropped.
    let received: Int, played: Int, concealed: Int, dropped: Int
    let sameStream: Bool
    let xruns: Int
    let stalls: MachineStalls.Reading

    static func measure(_ daemon: DaemonProcess, during body: () throws -> Void) throws -> AudioAcross {
        let before = try daemon.statistics()
        let watch = MachineStalls()
        let t0 = Date()
        try body()
        let after = try daemon.statistics()
        let seconds = Date().timeIntervalSince(t0)
        let stalls = watch.stop()
        let b = before.network?.streams.first, a = after.network?.streams.first
        return AudioAcross(seconds: seconds, periods: after.audio.frames - before.audio.frames,
                           sessions: after.audio.sessions - before.audio.sessions,
                           received: (a?.received ?? 0) - (b?.received ?? 0), played: (a?.played ?? 0) - (b?.played ?? 0),
                           concealed: (a?.concealed ?? 0) - (b?.concealed ?? 0), dropped: (a?.dropped ?? 0) - (b?.dropped ?? 0),
                           sameStream: a != nil && a?.ssrc == b?.ssrc, xruns: after.audio.xruns - before.audio.xruns, stalls: stalls)
    }

    var description: String {
        String(format: "in %.2f s: %d periods run, %d packets received, %d frames played, %d concealed, %d dropped; %d device sessions started, %d xruns; %@",
               seconds, periods, received, played, concealed, dropped, sessions, xruns, stalls.description)
    }

    /// The call went on: the same devices and stream, its packets on time (the network thread),
    /// and a frame from a packet for every period the audio thread ran, played or dropped to
    /// shrink the delay (not concealed). Periods lost to a stopped machine lose their frames with
    /// them, so this holds on a machine that stalls and fails when the call itself stopped.
    func assertUndisturbed(_ what: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(sessions, 0, "\(what): the devices were not opened again: \(self)", file: file, line: line)
        XCTAssertTrue(sameStream, "\(what): the same stream throughout: \(self)", file: file, line: line)
        XCTAssertGreaterThan(Double(received), 0.9 * seconds * 100, "\(what): packets came on throughout: \(self)", file: file, line: line)
        XCTAssertGreaterThan(Double(played + dropped), 0.9 * Double(periods), "\(what): every period had the call's audio: \(self)", file: file, line: line)
    }
}
