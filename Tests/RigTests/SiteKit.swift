import Foundation
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
    static func start(_ rooms: CallRooms, _ id: String, folder: String, own: String = "") throws -> DaemonProcess {
        let me = rooms.room(id)
        let kept = "\(rooms.dir)/\(id)-site.json"
        if !FileManager.default.fileExists(atPath: kept) { try FileManager.default.copyItem(atPath: folder + "/site.json", toPath: kept) }
        let config = try DaemonProcess.writeRoomConfig(me.rig, extra: rooms.ownSettings(id) + "\n" + own + """

            [site]
            id = "\(siteID)"
            administrator_key = "\(folder)/administrator.pub"
            document = "\(kept)"
            """)
        return try rooms.start(id, configPath: config)
    }

    /// Signs the folder's site.toml as the next version.
    static func sign(_ folder: String) throws {
        let signed = try run(["sign", "--dir", folder])
        XCTAssertEqual(signed.status, 0, signed.output)
    }
}
