import Calls
import Control
import Foundation
import SignalTools
import Speech
import TestSupport
import XCTest

/// Practice notifications through real daemons on the rig: sent by key and by intercomctl, heard
/// at the recipients (its tone, then within 300 ms its text: STOI against the text rendered here
/// ≥ 0.75 and 0.25 above another text) and not at the others; delivered to a room when it comes back; reminded until
/// acknowledged; the acknowledgement reaches the sender; do-not-disturb holds a normal one and
/// passes an emergency; the history survives a restart.
final class NotificationRigTests: XCTestCase {
    static let materialText = "Bitte Material ins Labor bringen"
    static let allText = "Nächster Patient bitte"
    /// The speech after a tone against the rendering of its text, and of another text (STOI).
    /// espeak-ng's renderings of one text differ between processes (0.81-1.00 against each other
    /// in CI and here), another text scores 0.17-0.43: the own text must score at least 0.75 and
    /// 0.25 above the other.
    static let minTextSTOI = 0.75
    static let minTextMargin = 0.25

    /// Seconds from `after` to the first 10 ms frame above -45 dBFS, and the share of the next
    /// second's frames above -50 dBFS (speech has gaps, silence has none of it).
    private static func speech(after: Double, in recording: [Int16]) -> (onset: Double, active: Double)? {
        let db = Levels.frameRMSDB(recording.map { Float($0) / 32768 }, frame: 480)
        let first = Int((after * 100).rounded(.down))
        guard first < db.count, let onset = db[first...].firstIndex(where: { $0 > -45 }) else { return nil }
        let next = db[onset..<min(db.count, onset + 100)]
        return (Double(onset - first) / 100, Double(next.filter { $0 > -50 }.count) / 100)
    }

    private static func toneStarts(_ tone: NotificationTone, in recording: [Int16]) -> [Double] {
        Tones.occurrences(of: tone.notes.map { ($0.hz, $0.ms) }, in: Tones.notes(in: recording))
    }

    func testNotificationsAreHeardAcknowledgedRemindedHeldAndKept() throws {
        try Rig.require()
        let rooms = try CallRooms(["roomA", "roomB", "roomC"])
        defer { rooms.stopAll() }
        let fifo = "\(rooms.dir)/roomA-keys"
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        let types = """
            [notifications.material]
            label = "Material bringen"
            recipients = ["roomb"]
            text = "\(Self.materialText)"
            tone = "bell"
            [notifications.alle]
            label = "Nächster Patient"
            recipients = ["praxis"]
            text = "\(Self.allText)"
            [notifications.alarm]
            label = "Alarm"
            recipients = ["roomb"]
            priority = "emergency"
            [groups]
            praxis = ["roomb", "roomc"]
            """
        try rooms.start("rooma", extra: "[keys]\ndevice = \"\(fifo)\"\n[keys.map]\nKEY_1 = \"notify:material\"\n" + types)
        try rooms.start("roomb", calls: "notification_reminder_s = 4")
        XCTAssertTrue(rooms.waitOnline("rooma", ["roomb"]))
        let recorders = try ["roomb", "roomc"].map { id in
            (id, try RoomRecorder(room: rooms.room(id).rig, path: "\(rooms.dir)/\(id)-speaker.wav"))
        }
        Thread.sleep(forTimeInterval: 0.3)
        let keys = try FIFOKeyWriter(path: fifo)
        let ctl = Repo.builtProgram("intercomctl")
        func intercomctl(_ room: String, _ args: [String]) throws -> String {
            try Command.run(ctl, args + ["--socket", rooms.room(room).socket])
        }
        func sent(_ type: String) -> NotificationRecord? {
            rooms.notifications("rooma").last { $0.direction == .outgoing && $0.notification.type == type }
        }

        // 1. By key: B hears the bell, then the text; the sender sees it delivered.
        keys.press(2)  // KEY_1
        XCTAssertTrue(rooms.wait(3) { sent("material")?.delivered == [RoomID("roomb")!] }, "delivered to B")
        XCTAssertTrue(rooms.wait(3) { rooms.status("roomb")?.notifications == 1 })
        // 2. Not acknowledged: reminded after 4 s (the reminder tone, read again to its end).
        Thread.sleep(forTimeInterval: 7)
        // 3. Acknowledged with intercomctl at B: A is told.
        XCTAssertTrue(try intercomctl("roomb", ["acknowledge"]).contains("acknowledged"))
        XCTAssertTrue(rooms.wait(3) { sent("material")?.acknowledgedBy == [RoomID("roomb")!] }, "the acknowledgement reaches the sender")
        XCTAssertEqual(rooms.status("roomb")?.notifications, 0)
        Thread.sleep(forTimeInterval: 0.5)

        // 4. By intercomctl, to a group with C offline: B has it at once, C when it starts.
        XCTAssertTrue(try intercomctl("rooma", ["notify", "alle"]).contains("sent to roomb, roomc"))
        XCTAssertTrue(rooms.wait(3) { sent("alle")?.delivered == [RoomID("roomb")!] })
        try rooms.start("roomc")
        XCTAssertTrue(rooms.wait(8) { sent("alle")?.delivered.count == 2 }, "delivered to C once it is back")
        XCTAssertTrue(rooms.wait(3) { rooms.notifications("roomc").contains { $0.notification.type == "alle" } })
        Thread.sleep(forTimeInterval: 3)

        // 5. Do-not-disturb at B holds a normal one and passes an emergency.
        _ = try rooms.control("roomb", .perform(.setDoNotDisturb(true)))
        Thread.sleep(forTimeInterval: 0.7)  // its tone first, so the alarm's is heard on its own
        _ = try rooms.control("rooma", .perform(.notify(type: "material")))
        XCTAssertTrue(rooms.wait(3) { rooms.notifications("roomb").filter { $0.notification.type == "material" }.count == 2 })
        XCTAssertEqual(rooms.notifications("roomb").last?.held, true, "held back by do-not-disturb")
        _ = try rooms.control("rooma", .perform(.notify(type: "alarm")))
        XCTAssertTrue(rooms.wait(3) { rooms.notifications("roomb").last?.notification.type == "alarm" })
        XCTAssertEqual(rooms.notifications("roomb").last?.held, false, "an emergency passes do-not-disturb")
        // Long enough for the alarm's tone and its speech to be recorded whole. (In CI runs before
        // emergencies cut in, B's reminder of "alle" being read held the alarm back by up to 1.7 s
        // and the recording cut its speech short: AnnouncerTests.)
        Thread.sleep(forTimeInterval: 4)
        for (_, r) in recorders { r.stop() }

        // 6. The history survives a restart, on both sides.
        let bBefore = rooms.notifications("roomb")
        let aBefore = rooms.notifications("rooma")
        _ = rooms.stop("roomb")
        _ = rooms.stop("rooma")
        try rooms.start("roomb", calls: "notification_reminder_s = 4")
        try rooms.start("rooma", extra: types)
        XCTAssertEqual(rooms.notifications("roomb").map(\.id), bBefore.map(\.id))
        XCTAssertEqual(rooms.notifications("rooma").map(\.id), aBefore.map(\.id))
        XCTAssertEqual(rooms.notifications("roomb").filter(\.held).count, 1, "the held one is still held (do-not-disturb kept)")

        // What the speakers played: each tone, then speech right after it.
        let b = try WAVAudio.read(path: "\(rooms.dir)/roomb-speaker.wav").samples
        let c = try WAVAudio.read(path: "\(rooms.dir)/roomc-speaker.wav").samples
        // The text heard is the text sent: the speech after the tone against espeak-ng's rendering of
        // it here (same voice, rate and level as the daemon's defaults) by STOI, which must be high
        // for the text and low for another text of the same voice and length class.
        let voice = try SpeechCache(voice: SpeechVoice(name: "de"), sampleRate: 48000, peakDBFS: -9)
        var references: [String: (path: String, count: Int)] = [:]
        for text in [Self.materialText, Self.allText] {
            let path = "\(rooms.dir)/reference-\(references.count).wav"
            let samples = try voice.render(text)
            try WAVAudio(sampleRate: 48000, channels: 1, samples: samples).write(path: path)
            references[text] = (path, samples.count)
        }
        func toneThenSpeech(_ tone: NotificationTone, _ recording: [Int16], _ who: String, text: String? = nil, other: String? = nil) throws {
            let starts = Self.toneStarts(tone, in: recording)
            XCTAssertGreaterThanOrEqual(starts.count, 1, "\(who) heard the \(tone.rawValue) tone")
            guard let start = starts.first else { return }
            let end = start + tone.notes.map(\.ms).reduce(0, +) / 1000
            if let text, let other {
                // Only what follows this tone: the spoken text and half a second.
                let from = Int(end * 48000), to = min(recording.count, from + references[text]!.count + 24000)
                let heard = "\(rooms.dir)/\(who)-\(tone.rawValue)-speech.wav"
                try WAVAudio(sampleRate: 48000, channels: 1, samples: Array(recording[min(from, to)..<to])).write(path: heard)
                let q = try Quality.measure([(references[text]!.path, heard), (references[other]!.path, heard)], pesq: false)
                print(String(format: "notification rig: %@ after the %@ tone: STOI %.3f against its text, %.3f against another",
                             who, tone.rawValue, q[0].stoi, q[1].stoi))
                XCTAssertGreaterThanOrEqual(q[0].stoi, Self.minTextSTOI, "\(who): the \(tone.rawValue) tone's speech is its text")
                XCTAssertGreaterThanOrEqual(q[0].stoi - q[1].stoi, Self.minTextMargin, "\(who): the measure tells another text apart")
            }
            let s = Self.speech(after: end, in: recording)
            print(String(format: "notification rig: %@ %@ tone at %.2f s, speech %.0f ms after it, active %.0f %% of the next second (the recording ends %.2f s after the tone's end)",
                         who, tone.rawValue, start, (s?.onset ?? -1) * 1000, (s?.active ?? 0) * 100, Double(recording.count) / 48000 - end))
            XCTAssertLessThan(s?.onset ?? 1, 0.3, "\(who): read within 300 ms of the \(tone.rawValue) tone's end")
            XCTAssertGreaterThan(s?.active ?? 0, 0.5, "\(who): speech follows the \(tone.rawValue) tone")
        }
        try toneThenSpeech(.bell, b, "B", text: Self.materialText, other: Self.allText)
        try toneThenSpeech(.reminder, b, "B", text: Self.materialText, other: Self.allText)
        try toneThenSpeech(.alarm, b, "B")
        try toneThenSpeech(.gong, c, "C", text: Self.allText, other: Self.materialText)
        XCTAssertTrue(Self.toneStarts(.bell, in: c).isEmpty, "C did not hear B's notification")
    }
}
