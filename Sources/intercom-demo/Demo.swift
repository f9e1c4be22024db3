import ArgumentParser
import Calls
import Control
import Foundation
import RigKit
import SignalTools

/// The main job (scripts/run.sh): a small practice at work on the virtual audio rig. Three
/// terminals from one practice description; keys pressed through each terminal's key device;
/// facts read from the terminals' typed replies and events, and from what each room's speaker
/// played. Each step is said as it happens; the run ends with a table and fails when a step fails.
@main
struct IntercomDemo: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "intercom-demo",
        abstract: "A small practice on the virtual audio rig: a call by key, speech both ways, a notification read aloud and acknowledged, an emergency call through do-not-disturb.")

    @Option(help: "Folder for the configuration, logs and recordings.")
    var out = "out/practice"

    @Flag(help: "The shortest form (shorter speech, a sooner reminder): what the test command runs.")
    var short = false

    @Flag(help: "Instead of the practice: two rooms (rig rooms roomA, roomB) streaming at each other without calls; a talker in A heard in B.")
    var streaming = false

    func run() throws {
        StopOnSignal.install()
        let report = Report()
        let folder = URL(fileURLWithPath: out).standardizedFileURL.path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        if streaming {
            var started: [DaemonProcess] = []
            do {
                try Streaming(folder: folder, report: report, short: short).run(started: &started)
            } catch {
                report.say("stopped: \(error)")
            }
            for d in started where d.isRunning { d.terminate() }
            FileHandle.standardOutput.write(Data(report.summary().utf8))
            print("Listen to \(folder)/roomA-says.wav and \(folder)/roomB-hears-roomA.wav; read \(folder)/roomA.log, roomB.log.")
            if !report.allPassed || report.rows.isEmpty { throw ExitCode.failure }
            return
        }
        let practice = try Practice(folder: folder, reminderSeconds: short ? 3 : 4)
        try practice.write()
        let demo = Demo(practice: practice, report: report, short: short)
        do {
            try demo.run()
        } catch {
            report.say("stopped: \(error)")
        }
        let unclean = demo.terminals.stop()
        if !unclean.isEmpty { report.step("Every terminal stops cleanly", false, "not clean: \(unclean.joined(separator: ", "))") }
        if report.rows.count > 1 { demo.checkWhatTheRoomsHeard() }
        FileHandle.standardOutput.write(Data(report.summary().utf8))
        print("Listen to \(folder)/*-speaker.wav (each room's speaker, the whole run) and \(folder)/*-hears-*.wav;")
        print("read \(folder)/<room>.log and the configuration: \(folder)/practice.toml, \(folder)/<room>.toml.")
        if !report.allPassed { throw ExitCode.failure }
    }
}

/// SIGINT, SIGTERM, SIGHUP: stop every daemon and recorder started, then exit. The handler only
/// writes to a pipe (a handler, unlike an ignored or blocked signal, is not inherited by the
/// daemons); a thread does the stopping.
enum StopOnSignal {
    nonisolated(unsafe) private static var pipeEnds: [Int32] = [-1, -1]

    static func install() {
        guard pipe(&pipeEnds) == 0 else { return }
        let watcher = Thread {
            var signal: Int32 = 0
            guard read(pipeEnds[0], &signal, 4) == 4 else { return }
            FileHandle.standardError.write(Data("intercom-demo: signal \(signal): stopping the terminals\n".utf8))
            ChildProcesses.terminateAll(timeout: 3)
            exit(128 + signal)
        }
        watcher.start()
        for s in [SIGINT, SIGTERM, SIGHUP] {
            Glibc.signal(s) { received in
                var value = received
                _ = write(StopOnSignal.pipeEnds[1], &value, 4)
            }
        }
    }
}

/// The steps, in the order a visitor would see them in the practice.
final class Demo {
    let practice: Practice
    let report: Report
    let short: Bool
    let terminals: RunningPractice
    private let e = Practice.reception, b = Practice.treatment, l = Practice.lab
    /// When things happened, for finding them in the speaker recordings.
    private var marks: [String: Date] = [:]

    init(practice: Practice, report: Report, short: Bool) {
        self.practice = practice
        self.report = report
        self.short = short
        terminals = RunningPractice(practice)
    }

    private func name(_ id: String) -> String { practice.terminal(id).name }

    func run() throws {
        try start()
        try callByKey()
        try speech(from: e, to: b)
        try speech(from: b, to: e)
        try hangUpByKey()
        try notification()
        try doNotDisturbAndEmergency()
    }

    /// Presses a key at a terminal; notes when (to find its sounds in the recordings) and says so.
    private func press(_ id: String, _ key: Practice.Key, mark: String, saying: String) -> Date {
        let now = Date()
        marks[mark] = now
        terminals.press(id, key)
        report.say(saying)
        return now
    }

    // MARK: The steps

    private func start() throws {
        report.say("practice: \(practice.terminals.map { "\($0.name) (\($0.id), rig room \($0.rig))" }.joined(separator: ", "))")
        report.say("one practice description: \(practice.practicePath); each terminal's file adds its own box: \(practice.folder)/<room>.toml")
        let t0 = Date()
        try terminals.start()
        report.step("Three terminals start and see each other", true,
                    String(format: "all online %.1f s after start, signalling sealed and media SRTP under the site key", Date().timeIntervalSince(t0)))
    }

    private func callByKey() throws {
        let atB = terminals.eventCount(b), atE = terminals.eventCount(e)
        let pressed = press(e, .callTreatment, mark: "call", saying: "Empfang presses its key 'Behandlung 1'")
        guard let rang = terminals.waitFor(b, after: atB, timeout: 3, { if case .incomingCall(_, from: let from, _, _) = $0 { from.value == self.e } else { false } }) else {
            report.step("A key at Empfang calls Behandlung 1", false, "Behandlung 1 was not called within 3 s")
            throw StepFailed(description: "no call")
        }
        guard let answered = terminals.waitFor(b, after: atB, timeout: 4, { if case .connected = $0 { true } else { false } }),
              terminals.waitFor(e, after: atE, timeout: 4, { if case .connected = $0 { true } else { false } }) != nil else {
            report.step("A key at Empfang calls Behandlung 1", false, "not connected within 4 s")
            throw StepFailed(description: "no answer")
        }
        marks["answered"] = answered.at
        report.step("A key at Empfang calls Behandlung 1; it chimes and answers", true, String(
            format: "rang %.0f ms after the key, answered by itself %.0f ms later (the chime's ring time)",
            rang.at.timeIntervalSince(pressed) * 1000, answered.at.timeIntervalSince(rang.at) * 1000))
    }

    /// A talker in one room's air, heard from the other room's speaker: mouth-to-ear delay and
    /// speech quality. Heard: STOI ≥ 0.70, the bar for three rooms on the rig's one sound server
    /// (`Quality.minSTOIManyRooms`). As a rig test's measurement: a talk that passes counts,
    /// whatever the machine did meanwhile; one that fails is repeated (four times at most), said
    /// and counted, only when the machine spoiled it: an xrun, or a core stopped for a frame or more.
    private func speech(from talker: String, to listener: String) throws {
        let clip = try short ? (talker == e ? Speech.roomA() : Speech.nearEnd())
                             : (talker == e ? Speech.farEnd() : Speech.natural("natural"))
        let said = "\(practice.folder)/\(talker)-says.wav"
        try? FileManager.default.removeItem(atPath: said)
        try FileManager.default.copyItem(atPath: clip, toPath: said)
        let stepName = "Speech \(name(talker)) → \(name(listener))"
        report.say("a talker speaks in \(name(talker)) (\(String(format: "%.1f", try WAVAudio.read(path: said).duration)) s); listening at \(name(listener))'s speaker")
        let probe = TalkerProbe(mouth: practice.terminal(talker).rig, ear: practice.terminal(listener).rig)
        for attempt in 1...5 {
            let xrunsBefore = terminals.xruns()
            let watch = MachineStalls()
            let heard = try probe.run(clipPath: said, folder: practice.folder, name: "\(listener)-hears-\(talker)")
            let stalls = watch.stop()
            let xruns = terminals.xruns() - xrunsBefore + heard.xruns
            let q = try Quality.measure(reference: said, recording: heard.recordingPath)
            let delay = heard.mouthToEarMs
            let passed = delay != nil && q.stoi >= Quality.minSTOIManyRooms
            let figure = String(
                format: "mouth to ear %@ ms, PESQ-WB %@, STOI %.2f%@ (probe: %.1f %% of a core)",
                delay.map { String(format: "%.1f", $0) } ?? "not found", q.pesqWb.map { String(format: "%.2f", $0) } ?? "-", q.stoi,
                xruns > 0 ? ", \(xruns) xruns" : "", heard.cpuShare * 100)
            if !passed, xruns > 0 || stalls.proves, attempt < 5 {
                report.repeated("\(stepName): \(figure); \(xruns) xrun(s) during the talk (terminals and probe), \(stalls)")
                continue
            }
            report.step(stepName, passed, figure)
            if !passed { throw StepFailed(description: "\(name(listener)) did not hear \(name(talker)) (STOI \(q.stoi))") }
            return
        }
    }

    private func hangUpByKey() throws {
        let atB = terminals.eventCount(b), atE = terminals.eventCount(e)
        let pressed = Date()
        terminals.press(e, .hangUp)
        let ended: (CallEvent) -> Bool = { if case .callEnded = $0 { true } else { false } }
        guard let atBEnd = terminals.waitFor(b, after: atB, timeout: 3, ended), terminals.waitFor(e, after: atE, timeout: 3, ended) != nil else {
            report.step("Empfang hangs up by key", false, "the call did not end on both sides within 3 s")
            throw StepFailed(description: "no hang-up")
        }
        let kept = terminals.history(b).first?.outcome
        report.step("Empfang hangs up by key", kept == .finished, String(
            format: "ended at Behandlung 1 %.0f ms after the key; its history keeps the call as %@",
            atBEnd.at.timeIntervalSince(pressed) * 1000, kept?.rawValue ?? "nothing"))
    }

    private func notification() throws {
        let atL = terminals.eventCount(l), atB = terminals.eventCount(b)
        let pressed = press(b, .sendMaterial, mark: "notification", saying: "Behandlung 1 presses its key 'Material bringen' (for the lab)")
        guard let received = terminals.waitFor(l, after: atL, timeout: 3, { if case .notificationReceived = $0 { true } else { false } }),
              case .notificationReceived(let record) = received.event else {
            report.step("A notification by key reaches the lab", false, "Labor did not receive it within 3 s")
            throw StepFailed(description: "no notification")
        }
        let sent = terminals.waitFor(b, after: atB, timeout: 3) { if case .notificationSent = $0 { true } else { false } }
        var delivered: [RoomID] = []
        if case .notificationSent(_, let d, _)? = sent?.event { delivered = d }
        report.step("A notification by key reaches the lab", delivered.map(\.value) == [l], String(
            format: "'%@' at Labor %.0f ms after the key; Behandlung 1 is told it was delivered to %@",
            record.notification.label, received.at.timeIntervalSince(pressed) * 1000, delivered.map(\.value).joined(separator: ", ")))

        let reminderWait = Double(practice.reminderSeconds) + 4
        guard let reminded = terminals.waitFor(l, after: atL, timeout: reminderWait, { if case .notificationReminded = $0 { true } else { false } }) else {
            report.step("Nobody acknowledges: the lab is reminded", false, "no reminder within \(reminderWait) s")
            throw StepFailed(description: "no reminder")
        }
        marks["reminded"] = reminded.at
        report.step("Nobody acknowledges: the lab is reminded", true, String(
            format: "reminded %.1f s after it arrived (notification_reminder_s = %d)", reminded.at.timeIntervalSince(received.at), practice.reminderSeconds))
        // The reminder is read again: let it finish before the key stops it.
        Thread.sleep(forTimeInterval: 2.5)

        let atB2 = terminals.eventCount(b)
        let ackPressed = Date()
        terminals.press(l, .acknowledge)
        let acknowledged = terminals.waitFor(b, after: atB2, timeout: 3) {
            if case .notificationAcknowledged(_, by: let by) = $0 { by.value == self.l } else { false }
        }
        let waiting = terminals.status(l)?.notifications
        let spoken = terminals.statistics(l)?.calls?.speech.spoken ?? 0
        report.step("The lab acknowledges by key; the sender is told", acknowledged != nil && waiting == 0 && spoken >= 2, String(
            format: "Behandlung 1 told %@; Labor has %d waiting; Labor read the text aloud %d times",
            acknowledged.map { String(format: "%.0f ms after the key", $0.at.timeIntervalSince(ackPressed) * 1000) } ?? "never",
            waiting ?? -1, spoken))
        if acknowledged == nil { throw StepFailed(description: "no acknowledgement") }
    }

    private func doNotDisturbAndEmergency() throws {
        let atL = terminals.eventCount(l)
        terminals.press(l, .toggleDoNotDisturb)
        guard terminals.waitFor(l, after: atL, timeout: 3, { $0 == .doNotDisturbChanged(true) }) != nil else {
            report.step("The lab turns do-not-disturb on by key", false, "not on within 3 s")
            throw StepFailed(description: "no do-not-disturb")
        }
        Thread.sleep(forTimeInterval: 0.5)  // its tone first, so the next ones are heard on their own
        let atE = terminals.eventCount(e)
        terminals.press(e, .callLab)
        let declined = terminals.waitFor(e, after: atE, timeout: 3) {
            if case .participantStatus(_, room: let r, status: .declined(.doNotDisturb)) = $0 { r.value == self.l } else { false }
        }
        report.step("Do-not-disturb at the lab: a normal call is declined", declined != nil,
                    declined != nil ? "Empfang is told: do not disturb" : "Empfang was not told within 3 s")
        _ = terminals.waitFor(e, after: atE, timeout: 3) { if case .callEnded = $0 { true } else { false } }
        Thread.sleep(forTimeInterval: 0.8)

        let atL2 = terminals.eventCount(l), atE2 = terminals.eventCount(e)
        let pressed = press(e, .emergencyLab, mark: "emergency", saying: "Empfang presses its key 'Notruf Labor'")
        let opened = terminals.waitFor(l, after: atL2, timeout: 3) { if case .connected = $0 { true } else { false } }
        let kind = terminals.status(l)?.call?.kind
        report.step("An emergency call breaks through do-not-disturb", opened != nil && kind == .emergency, String(
            format: "Labor open %@ after the key, call kind %@, do-not-disturb still %@",
            opened.map { String(format: "%.0f ms", $0.at.timeIntervalSince(pressed) * 1000) } ?? "never",
            kind.map { "\($0)" } ?? "none", terminals.status(l)?.doNotDisturb == true ? "on" : "off"))
        if opened == nil { throw StepFailed(description: "the emergency call did not open") }
        Thread.sleep(forTimeInterval: 1)
        terminals.press(e, .hangUp)
        let ended = terminals.waitFor(l, after: atL2, timeout: 3) { if case .callEnded = $0 { true } else { false } } != nil
            && terminals.waitFor(e, after: atE2, timeout: 3) { if case .callEnded = $0 { true } else { false } } != nil
        let atL3 = terminals.eventCount(l)
        terminals.press(l, .toggleDoNotDisturb)
        let off = terminals.waitFor(l, after: atL3, timeout: 3) { $0 == .doNotDisturbChanged(false) } != nil
        report.step("Hung up by key; the lab turns do-not-disturb off", ended && off,
                    "\(ended ? "ended on both sides" : "not ended"), do-not-disturb \(off ? "off" : "still on")")
        Thread.sleep(forTimeInterval: 0.8)  // the last tones reach the recordings
    }

    // MARK: What the speakers played (after the recorders stopped)

    func checkWhatTheRoomsHeard() {
        func notes(_ id: String) -> [Tones.HeardNote] {
            guard let samples = try? WAVAudio.read(path: terminals.speakerRecording(id)).samples else { return [] }
            return Tones.notes(in: samples)
        }
        func at(_ mark: String) -> Double? { marks[mark].map { $0.timeIntervalSince(terminals.recordingStart) } }
        // With the notes' lengths: a note the machine put a hole in is still heard as that note.
        func first(_ notes: [(hz: Double, ms: Double)], in heard: [Tones.HeardNote], after: Double?) -> Double? {
            guard let after else { return nil }
            return Tones.occurrences(of: notes, in: heard).first { $0 >= after - 0.2 }
        }
        func first(_ notes: [Note], in heard: [Tones.HeardNote], after: Double?) -> Double? {
            first(notes.map { ($0.hz, $0.ms) }, in: heard, after: after)
        }
        func said(_ t: Double?) -> String { t.map { String(format: "at %.1f s", $0) } ?? "not heard" }
        let atB = notes(b), atL = notes(l)
        if marks["call"] != nil {
            let chime = first(ChimeSettings().heardNotes, in: atB, after: at("call"))
            report.step("Behandlung 1's speaker: the chime before the call opened", chime != nil && chime! <= (at("answered") ?? 0) + 0.3,
                        "chime \(said(chime)), the call opened \(said(at("answered")))")
        }
        if marks["notification"] != nil {
            let bell = first(NotificationTone.bell.notes, in: atL, after: at("notification"))
            let reminder = first(NotificationTone.reminder.notes, in: atL, after: at("notification"))
            var readAloud = "no speech after the bell"
            var spoke = false
            if let bell, let samples = try? WAVAudio.read(path: terminals.speakerRecording(l)).samples {
                let end = bell + NotificationTone.bell.notes.map(\.ms).reduce(0, +) / 1000
                let db = Levels.frameRMSDB(samples.map { Float($0) / 32768 }, frame: 480)
                let from = Int(end * 100), to = min(db.count, from + 150)
                let active = from < to ? Double(db[from..<to].filter { $0 > -50 }.count) / Double(to - from) : 0
                spoke = active > 0.4
                readAloud = String(format: "speech in %.0f %% of the 1.5 s after the bell", active * 100)
            }
            report.step("Labor's speaker: the bell, the text read aloud, the reminder", bell != nil && spoke && reminder != nil,
                        "bell \(said(bell)), \(readAloud), reminder \(said(reminder))")
        }
        if marks["emergency"] != nil {
            let tone = first(Cue.emergencyCall.notes, in: atL, after: at("emergency"))
            report.step("Labor's speaker: the emergency call's tone", tone != nil, "emergency tone \(said(tone))")
        }
    }
}
