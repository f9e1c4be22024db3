import Calls
import Control
import Foundation
import RigKit
import SiteSecurity
import TestSupport
import XCTest

/// Issue 55's long run: a small site (three rooms on the rig) with calls, group calls,
/// announcements and notifications on a schedule, for `INTERCOM_SOAK_SECONDS` (3 minutes in the
/// test command; `scripts/soak.sh DURATION` for long runs). Each cycle's events are counted as
/// expected and as seen (the daemons' typed replies), and after each cycle every daemon's memory,
/// descriptors, threads and processor time, the mouth-to-ear delay of a talk A → B, the buffer
/// delay and drift B reports, and xruns are sampled into a CSV. Asserted: every event expected was
/// seen, once; descriptors and threads flat after the first cycle; memory growth after the first
/// cycle within `memoryBoundKiB`; the delay of every talk the machine left alone within
/// `delayBoundMs` of the first such, two such talks at least (a spoiled talk is repeated in a new
/// call, at most twice); no xrun unless the machine provably stopped (`MachineStalls`).
///
/// `INTERCOM_SOAK_TIME_SCALE` (scripts/soak.sh --accelerate N): every daemon's timers run N times
/// faster (`[testing] time_scale`), and each cycle adds a reminder: C acknowledges only after its
/// first reminder sounded, which must happen once per cycle at C and never at B.
final class SoakRigTests: XCTestCase {
    /// Resident memory a daemon may gain after its first cycle (allocator pools and caches
    /// settle within minutes; a leak of one block per call or notification grows without bound).
    static let memoryBoundKiB = 4096
    /// A talk's mouth-to-ear delay may exceed the first talk's by this much (one jitter-buffer step
    /// after a machine stall, decaying again).
    static let delayBoundMs = 30.0

    struct Sample {
        var seconds: Double
        var room: String
        var rssKiB: Int
        var descriptors: Int
        var threads: Int
        var cpuSeconds: Double
        var xruns: Int
        var mouthToEarMs: Double?
        var bufferDelayMs: Double?
        var driftPPM: Double?
        var csv: String {
            [String(format: "%.1f", seconds), room, "\(rssKiB)", "\(descriptors)", "\(threads)", String(format: "%.2f", cpuSeconds), "\(xruns)",
             mouthToEarMs.map { String(format: "%.1f", $0) } ?? "", bufferDelayMs.map { String(format: "%.1f", $0) } ?? "",
             driftPPM.map { String(format: "%.1f", $0) } ?? ""].joined(separator: ",")
        }
        static let header = "seconds,room,rss_kib,descriptors,threads,cpu_s,xruns,mouth_to_ear_ms,buffer_delay_ms,drift_ppm"
    }

    /// What /proc says of a process now.
    static func proc(_ pid: Int32) -> (rssKiB: Int, descriptors: Int, threads: Int, cpuSeconds: Double) {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        func field(_ name: String) -> Int {
            let line = status.split(separator: "\n").first { $0.hasPrefix(name + ":") } ?? ""
            return Int(line.split(whereSeparator: \.isWhitespace).dropFirst().first ?? "") ?? -1
        }
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1
        // utime and stime: fields 14 and 15, after the command's closing parenthesis.
        let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
        let rest = stat.split(separator: ")").last.map { $0.split(separator: " ") } ?? []
        let ticks = rest.count > 13 ? (Double(rest[11]) ?? 0) + (Double(rest[12]) ?? 0) : 0
        return (field("VmRSS"), fds, field("Threads"), ticks / Double(sysconf(Int32(_SC_CLK_TCK))))
    }

    func testASmallSiteRunsFlatWithEveryEventSeen() throws {
        try Rig.require()
        let environment = ProcessInfo.processInfo.environment
        let duration = Double(environment["INTERCOM_SOAK_SECONDS"] ?? "") ?? 180
        let timeScale = Double(environment["INTERCOM_SOAK_TIME_SCALE"] ?? "") ?? 1
        let accelerated = timeScale != 1
        let testing = accelerated ? "[testing]\ntime_scale = \(timeScale)\n" : ""
        let reminderAfter = CallTiming().notificationReminder / timeScale
        let rooms = try CallRooms(["roomA", "roomB", "roomC"], statsIntervalS: 60)
        defer { rooms.stopAll() }
        let out = environment["INTERCOM_SOAK_DIR"] ?? rooms.dir
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        let ids = ["rooma", "roomb", "roomc"]
        // As a practice runs: one signed site document, secure mode, each terminal approved by its
        // code and sealing by its own key (session keys renewed hourly, or `timeScale` times as
        // often). A small history, so that a long run reaches every bound early (the default keeps 500).
        let folder = rooms.dir + "/site"
        try SiteKit.create(folder, document: SiteKit.document(rooms, extra: "history_limit = 30\n"
            + "[buttons.all]\nrooms = [\"roomb\", \"roomc\"]\n"
            + "[notifications.alle]\nlabel = \"Nächster Patient\"\nrecipients = [\"roomb\", \"roomc\"]\n"))
        for id in ids { try SiteKit.start(rooms, id, folder: folder, own: testing, lab: false) }
        try SiteKit.approveAll(rooms, ids, folder: folder, version: 3)
        XCTAssertTrue(rooms.waitOnline("rooma", ["roomb", "roomc"]), "the site is up")
        func renewals(_ r: String) -> Int { ((try? rooms.daemons[r]?.statistics().calls?.sessionRenewals) ?? nil) ?? -1 }
        let clip = try Speech.clip("soak", text: "Doctor Weber, your next patient is waiting in room three.")
        let stalls = MachineStalls()
        let started = Date()
        var samples: [Sample] = []
        var expected = (callsA: 0, callsB: 0, callsC: 0, notifications: 0, remindersC: 0)
        var problems: [String] = []
        /// Talks the machine provably spoiled (see step 1), each with its cause.
        var spoiled: [String] = []
        func check(_ ok: Bool, _ what: @autoclosure () -> String) {
            if !ok { problems.append(what()) }
        }
        func xruns(_ r: String) -> Int { ((try? rooms.daemons[r]?.statistics().audio.xruns) ?? nil) ?? -1 }
        func idle() -> Bool { ids.allSatisfy(rooms.isIdle) }
        func reminders(_ r: String) -> Int { ((try? rooms.daemons[r]?.statistics().calls?.notifications.reminders) ?? nil) ?? -1 }
        var cycle = 0
        while Date().timeIntervalSince(started) < duration {
            cycle += 1
            // 1. A calls B; A talks; B hangs up (the called side may end it too). A talk the machine
            // spoiled (it stopped, or a daemon or the probe counted an xrun, anywhere from the call's
            // start to the talk's end: a buffer that grew at the start keeps its delay for the call)
            // is repeated in a new call, at most twice; each repeat is printed and counted, and a
            // talk spoiled three times leaves the cycle without a delay figure.
            var talk: TalkerProbe.Result?
            var stream: DaemonStatistics.Stream?
            for attempt in 1...3 {
                let window = MachineStalls()
                let xrunsBefore = ["rooma", "roomb"].map(xruns)
                _ = try rooms.control("rooma", .perform(.call(button: "roomb")))
                expected.callsA += 1; expected.callsB += 1
                check(rooms.wait(8) { rooms.isConnected("roomb") && rooms.isConnected("rooma") }, "cycle \(cycle): B answers A")
                let heard = try TalkerProbe(mouth: "roomA", ear: "roomB").run(clipPath: clip, folder: rooms.dir, name: "soak-talk")
                let reading = window.stop()
                let xrunsAfter = ["rooma", "roomb"].map(xruns)
                let itsStream = try? rooms.daemons["roomb"]?.statistics().network?.streams.first
                _ = try rooms.control("roomb", .perform(.hangUp))
                check(rooms.wait(5, idle), "cycle \(cycle): the call A → B ends everywhere")
                let inTalk = zip(xrunsBefore, xrunsAfter).map { $0 < 0 || $1 < 0 ? nil : $1 - $0 }
                if !machineSpoiled(reading, daemonXruns: inTalk, probeXruns: heard.xruns) {
                    if heard.mouthToEarMs == nil { problems.append("cycle \(cycle): the talk was not found at B (\(heard.summary)); \(reading)") }
                    talk = heard; stream = itsStream
                    break
                }
                let why = "cycle \(cycle), talk \(attempt) of 3 (\(heard.mouthToEarMs.map { String(format: "%.1f ms", $0) } ?? "not found")): "
                    + "\(reading), xruns A/B \(xrunsBefore) → \(xrunsAfter), probe \(heard.xruns)"
                print("soak: spoiled by the machine, \(attempt < 3 ? "repeated" : "no figure this cycle"): \(why)")
                spoiled.append(why)
            }
            // 2. A group call to B and C; A hangs up.
            _ = try rooms.control("rooma", .perform(.call(button: "all")))
            expected.callsA += 1; expected.callsB += 1; expected.callsC += 1
            check(rooms.wait(8) { rooms.isConnected("roomb") && rooms.isConnected("roomc") }, "cycle \(cycle): B and C answer the group call")
            Thread.sleep(forTimeInterval: 1)
            _ = try rooms.control("rooma", .perform(.hangUp))
            check(rooms.wait(5, idle), "cycle \(cycle): the group call ends everywhere")
            // 3. An announcement to B and C.
            _ = try rooms.control("rooma", .perform(.callRooms([RoomID("roomb")!, RoomID("roomc")!], kind: .announcement)))
            expected.callsA += 1; expected.callsB += 1; expected.callsC += 1
            check(rooms.wait(5) { rooms.isConnected("roomb") && rooms.isConnected("roomc") }, "cycle \(cycle): the announcement opens at B and C")
            Thread.sleep(forTimeInterval: 1)
            _ = try rooms.control("rooma", .perform(.hangUp))
            check(rooms.wait(5, idle), "cycle \(cycle): the announcement ends everywhere")
            // 4. A notification to B and C; each acknowledges it (accelerated: C after its first reminder).
            guard case .success(.notificationSent(let id, _))? = try? rooms.control("rooma", .perform(.notify(type: "alle"))) else {
                XCTFail("cycle \(cycle): A sends the notification")
                break
            }
            expected.notifications += 1
            for r in ["roomb", "roomc"] {
                check(rooms.wait(5) { rooms.notifications(r).contains { $0.id == id } }, "cycle \(cycle): \(r) has notification \(id)")
                if accelerated && r == "roomc" {
                    expected.remindersC += 1
                    check(rooms.wait(reminderAfter + 5) { reminders("roomc") >= expected.remindersC },
                          "cycle \(cycle): C reminded of \(id) within \(reminderAfter) s")
                }
                _ = try rooms.control(r, .perform(.acknowledge(all: true)))
            }
            check(rooms.wait(5) {
                rooms.notifications("rooma").first { $0.id == id }.map { Set($0.acknowledgedBy.map(\.value)) == ["roomb", "roomc"] } ?? false
            }, "cycle \(cycle): A hears both acknowledge \(id)")

            let at = Date().timeIntervalSince(started)
            for r in ids {
                guard let d = rooms.daemons[r] else { continue }
                let p = Self.proc(d.process.processIdentifier)
                let xruns = try? d.statistics().audio.xruns
                samples.append(Sample(seconds: at, room: r, rssKiB: p.rssKiB, descriptors: p.descriptors, threads: p.threads,
                                      cpuSeconds: p.cpuSeconds, xruns: xruns ?? -1,
                                      mouthToEarMs: r == "roomb" ? talk?.mouthToEarMs : nil,
                                      bufferDelayMs: r == "roomb" ? stream?.delayMs : nil, driftPPM: r == "roomb" ? stream?.driftPPM : nil))
            }
            if let b = samples.last(where: { $0.room == "roomb" }) {
                print(String(format: "soak: cycle %d at %.0f s: mouth-to-ear %@ ms, buffer %@ ms, rss A/B/C %@ KiB",
                             cycle, at, b.mouthToEarMs.map { String(format: "%.1f", $0) } ?? "-", b.bufferDelayMs.map { String(format: "%.1f", $0) } ?? "-",
                             samples.suffix(3).map { "\($0.rssKiB)" }.joined(separator: "/")))
                fflush(nil)
            }
        }
        let machine = stalls.stop()
        let csv = ([Sample.header] + samples.map(\.csv)).joined(separator: "\n") + "\n"
        try csv.write(toFile: "\(out)/soak-samples.csv", atomically: true, encoding: .utf8)

        // Every event expected, seen once: the calls each room ended, by its own count.
        func ended(_ r: String) -> Int { ((try? rooms.daemons[r]?.statistics().calls?.ended) ?? nil)?.reduce(0) { $0 + $1.count } ?? -1 }
        let seen = (a: ended("rooma"), b: ended("roomb"), c: ended("roomc"))
        let notifications = (try? rooms.daemons["rooma"]?.statistics().calls?.notifications) ?? nil
        let received = ["roomb", "roomc"].map { r in ((try? rooms.daemons[r]?.statistics().calls?.notifications) ?? nil).map { ($0.received, $0.acknowledged) } }
        let summary = "soak: time scale \(timeScale); \(cycle) cycles in \(Int(Date().timeIntervalSince(started))) s; calls ended A/B/C \(seen.a)/\(seen.b)/\(seen.c) of "
            + "\(expected.callsA)/\(expected.callsB)/\(expected.callsC); notifications sent \(notifications?.sent ?? -1) of \(expected.notifications), "
            + "received and acknowledged at B and C \(received); session keys renewed A/B/C \(ids.map(renewals)); reminders at B/C \(reminders("roomb"))/\(reminders("roomc")) of 0/\(expected.remindersC); "
            + "\(machine); samples in \(out)/soak-samples.csv"
        print(summary)
        // The 2-hour run lost this line with the process's buffered output: keep it beside the samples.
        try (summary + "\n").write(toFile: "\(out)/soak-summary.txt", atomically: true, encoding: .utf8)
        fflush(nil)
        XCTAssertEqual(reminders("roomb"), 0, "B acknowledged at once: never reminded")
        // Each terminal renewed its session key once every `sessionSeconds / timeScale` (one more
        // or less at the ends), and the calls and notifications above went on across every renewal.
        let due = Int(Date().timeIntervalSince(started) / (TerminalSeal.sessionSeconds / timeScale))
        for r in ids { XCTAssertTrue((due - 1 ... due + 1).contains(renewals(r)), "\(r): \(renewals(r)) session keys renewed, \(due) due") }
        XCTAssertEqual(reminders("roomc"), expected.remindersC, "C reminded once per notification it waited on")
        XCTAssertEqual(problems, [], "every step of every cycle happened")
        XCTAssertEqual(seen.a, expected.callsA, "every call A placed ended once at A")
        XCTAssertEqual(seen.b, expected.callsB, "... at B")
        XCTAssertEqual(seen.c, expected.callsC, "... at C")
        XCTAssertEqual(notifications?.sent, expected.notifications)
        for (r, counts) in zip(["roomb", "roomc"], received) {
            XCTAssertEqual(counts?.0, expected.notifications, "\(r) received each notification once")
            XCTAssertEqual(counts?.1, expected.notifications, "\(r) acknowledged each")
        }
        XCTAssertGreaterThanOrEqual(cycle, 2, "at least two cycles: a trend needs a second point")

        // Trends: from the end of the first cycle (warm-up: first calls, the speech cache, pools).
        for r in ids {
            let s = samples.filter { $0.room == r }
            guard let first = s.first, let last = s.last else { continue }
            let grown = last.rssKiB - first.rssKiB
            let perHour = last.seconds > first.seconds ? Double(grown) / (last.seconds - first.seconds) * 3600 : 0
            print("soak: \(r): rss \(first.rssKiB) → \(last.rssKiB) KiB (\(grown) KiB, \(Int(perHour)) KiB/h), descriptors \(first.descriptors) → \(last.descriptors), "
                  + "threads \(first.threads) → \(last.threads), cpu \(String(format: "%.1f", last.cpuSeconds)) s, xruns \(first.xruns) → \(last.xruns)")
            XCTAssertLessThanOrEqual(grown, Self.memoryBoundKiB, "\(r): memory flat after the first cycle")
            // A control connection open at the moment of a sample counts once; a leak stays.
            let half = s.count / 2
            XCTAssertLessThanOrEqual(s[half...].map(\.descriptors).min() ?? 0, s[..<max(1, half)].map(\.descriptors).min() ?? 0,
                                     "\(r): no descriptor leaked: \(s.map(\.descriptors))")
            XCTAssertEqual(Set(s.map(\.threads)), [first.threads], "\(r): threads flat: \(s.map(\.threads))")
            // An xrun is the machine's when it provably stopped; otherwise ours.
            if !machine.proves { XCTAssertEqual(last.xruns, first.xruns, "\(r): no xrun on a machine that never stopped") }
        }
        // The delay of the talks the machine left alone stays within `delayBoundMs` of the first.
        let delays = samples.compactMap(\.mouthToEarMs)
        print("soak: mouth-to-ear A → B per cycle: \(delays.map { String(format: "%.1f", $0) }.joined(separator: " ")) ms; "
              + "\(spoiled.count) talks spoiled by the machine and repeated or left without a figure")
        XCTAssertGreaterThanOrEqual(delays.count, 2, "two talks or more measured: a trend needs a second point (spoiled: \(spoiled))")
        if let firstDelay = delays.first {
            XCTAssertLessThanOrEqual(delays.max() ?? 0, firstDelay + Self.delayBoundMs, "the delay stays where it started")
        } else {
            XCTFail("no talk was found at B")
        }
    }
}
