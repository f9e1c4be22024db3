import Calls
import Foundation
import Logging
import XCTest

@testable import IntercomDaemon

/// The announcement channel in real time: the announcer's thread feeds it, a thread of the test
/// drains it a frame every 10 ms as the audio thread would, and the recording says what was played
/// in which order (the tones are found sample for sample).
final class AnnouncerTests: XCTestCase {
    /// Drains `player` like the audio thread, a frame every 10 ms, until stopped.
    final class Drain: @unchecked Sendable {
        private let lock = NSLock()
        private var samples: [Int16] = []
        private var running = true
        private var thread: Thread?

        init(_ sounds: TerminalSounds, frame: Int) {
            let player = sounds.announcements
            thread = Thread { [self] in
                var buffer = [Int16](repeating: 0, count: frame)
                while lock.withLock({ running }) {
                    if !buffer.withUnsafeMutableBufferPointer({ player.readFrame(into: $0.baseAddress!, count: frame) }) {
                        for i in buffer.indices { buffer[i] = 0 }
                    }
                    lock.withLock { samples += buffer }
                    usleep(10_000)
                }
            }
            thread?.start()
        }

        func stop() -> [Int16] {
            lock.withLock { running = false }
            usleep(30_000)
            return lock.withLock { samples }
        }
    }

    /// Where each play of `tone` starts in `recording`, seconds (whole frames: the channel feeds
    /// whole frames). A tone that repeats its first note matches again inside itself: a match
    /// within the tone's length of the one before is the same play.
    private func plays(of tone: [Int16], in recording: [Int16], frame: Int) -> [Double] {
        let head = Array(tone.prefix(frame))
        var out: [Int] = []
        for at in stride(from: 0, to: recording.count - frame, by: frame) where Array(recording[at..<(at + frame)]) == head {
            if let last = out.last, at - last < tone.count { continue }
            out.append(at)
        }
        return out.map { Double($0) / 48000 }
    }

    func testAnEmergencyCutsTheAnnouncementBeingReadWhichIsReadAgainWholeAfterIt() throws {
        let config = DaemonConfig.default
        let frame = config.audio.framesPerPeriod
        let sounds = try TerminalSounds(config: config)
        let announcer = try Announcer(sounds: sounds, speech: SpeechSection(), sampleRate: 48000, callInputs: [], prepare: [],
                                  logger: Logger(label: "announcer-test"))
        try announcer.start()
        defer { announcer.stop() }
        let drain = Drain(sounds, frame: frame)

        let reminder = Announcement(id: NotificationID(1), tone: .reminder, text: "Bitte bringen Sie das Material aus dem Lager in den Behandlungsraum zwei",
                                    level: .normal, priority: .normal)
        let alarm = Announcement(id: NotificationID(2), tone: .alarm, text: "Alarm im Labor", level: .normal, priority: .emergency)
        announcer.announce(reminder)
        Thread.sleep(forTimeInterval: 1.5)  // the reminder's tone has played; its text is being read
        let alarmAt = 1.5
        announcer.announce(alarm)
        Thread.sleep(forTimeInterval: 9)
        let recording = drain.stop()

        let reminderTone = try XCTUnwrap(sounds.current.notificationTones[.reminder])
        let alarmTone = try XCTUnwrap(sounds.current.notificationTones[.alarm])
        let reminders = plays(of: reminderTone, in: recording, frame: frame)
        let alarms = plays(of: alarmTone, in: recording, frame: frame)
        print("announcer: reminder tone at \(reminders.map { String(format: "%.2f", $0) }) s, alarm tone at \(alarms.map { String(format: "%.2f", $0) }) s (alarm announced at \(alarmAt) s)")
        XCTAssertEqual(alarms.count, 1)
        XCTAssertEqual(reminders.count, 2, "the cut reminder is played again")
        guard alarms.count == 1, reminders.count == 2 else { return }
        // The drain's clock runs a little slow (a frame every 10 ms plus the loop): allow 0.3 s.
        XCTAssertLessThan(alarms[0] - alarmAt, 0.3, "the alarm cuts in at once")
        XCTAssertLessThan(reminders[0], alarms[0])
        XCTAssertGreaterThan(reminders[1], alarms[0] + Double(alarmTone.count) / 48000, "read again after the alarm's tone (and text)")
    }

    func testAnEmergencyWaitsForNoNormalAnnouncementButForAnotherEmergency() {
        let config = DaemonConfig.default
        let sounds = try! TerminalSounds(config: config)
        let announcer = try! Announcer(sounds: sounds, speech: SpeechSection(), sampleRate: 48000, callInputs: [], prepare: [],
                                  logger: Logger(label: "announcer-test"))
        // Not started: only the order of the line is looked at.
        for (i, priority) in [NotificationPriority.normal, .emergency, .urgent, .emergency].enumerated() {
            announcer.announce(Announcement(id: NotificationID(UInt64(i + 1)), tone: .gong, text: nil, level: .normal, priority: priority))
        }
        XCTAssertEqual(announcer.waiting.map(\.id.value), [2, 4, 1, 3], "emergencies first, in their order; the rest in theirs")
    }
}
