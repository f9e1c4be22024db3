import Foundation
import TestSupport
import XCTest

/// The suite's speech quality: wide-band PESQ (ITU-T P.862.2) and STOI of speech from room A to
/// room B through the impairment relay at several losses, Opus FEC on and off.
final class SuiteSpeechQualityTests: XCTestCase {
    struct Condition {
        let name: String
        let relay: [String]?  // nil: no relay (0 % loss, loopback)
        let fec: Bool
        var seed: Int? = nil  // the relay's seed; nil: 11 + the condition's index
    }

    static let bursty = ["--burst-enter", "2", "--burst-exit", "30", "--burst-loss", "80"]

    func testSuiteWideBandPESQAtRandomAndBurstyLossWithAndWithoutFEC() throws {
        let mode = try SuiteMode.require()
        try Rig.require()
        var conditions: [Condition] = []
        for fec in [true, false] {
            conditions += [
                Condition(name: "0 %", relay: nil, fec: fec),
                Condition(name: "5 % random", relay: ["--loss", "5"], fec: fec),
                Condition(name: "10 % random", relay: ["--loss", "10"], fec: fec),
                Condition(name: "bursty (Gilbert-Elliott, bursts of ~3)", relay: Self.bursty, fec: fec),
            ]
        }
        // One seeded realisation of bursty loss lost 7.2 % where the chain's parameters mean 5.0 %
        // (bursts 6.25 % of the time, 80 % lost in them): the goal is judged over several seeds.
        let burstySeeds = [101, 102, 103, 104]
        for seed in burstySeeds {
            conditions.append(Condition(name: "bursty, seed \(seed)", relay: Self.bursty, fec: true, seed: seed))
        }
        if mode.isSmoke { conditions = [conditions[1]] }
        SuiteMode.emit("### Speech quality through loss: room A → room B (rig, impairment relay, seeded)")
        SuiteMode.emit("")
        SuiteMode.emitTable(intro: "Speech played into room A's air, recorded from room B's speaker, compared with the clip: PESQ wide band (MOS-LQO 1-4.5; the `pesq` package, ITU-T P.862.2) and STOI (0-1), natural recorded speech (alsa-utils' voice, about 14 s) and synthetic speech (espeak-ng, about 5 s), one after the other through the same pair of daemons at their defaults. Higher is better. Goals (issue 17): PESQ-WB ≥ 3.9 without loss (the codec alone measures 4.49 with this natural clip offline: the stage table) and ≥ 3.3 at 5 % bursty loss with FEC, natural speech; FEC should beat no FEC at every loss. Besides the codec, the rig path has the jitter buffer (it stretches time where it drops or inserts a frame, which PESQ charges) and two sound-server passes. Loss as the relay measured it.",
                            columns: ["loss", "FEC", "loss measured", "PESQ-WB natural", "PESQ-WB synthetic", "STOI natural", "STOI synthetic", "mouth to ear at the start", "FEC recoveries / concealed frames at B"])
        var burstyWithFEC: [(loss: Double, pesq: Double)] = []
        for (i, condition) in conditions.enumerated() {
            var row: String?
            try measureWithRetries("speech quality \(condition.name), FEC \(condition.fec)", attempts: 3) { c in
                let dir = try Repo.scratchFolder("suite-pesq")
                let portB = try FreePort.udp()
                let opus = "[opus]\nfec = \(condition.fec)\nexpected_loss_percent = \(condition.fec ? 5 : 0)"
                let b = try startRoom("roomB", listen: portB, peers: [], other: opus)
                let relay = try condition.relay.map { try ImpairmentRelayProcess(targetPort: portB, options: $0 + ["--seed", "\(condition.seed ?? 11 + i)"]) }
                let a = try startRoom("roomA", listen: 0, peers: ["127.0.0.1:\(relay?.port ?? portB)"], other: opus)
                defer { a.terminate(); b.terminate(); relay?.stop() }
                waitUntilStreaming([a, b])
                let natural = try c.probed(TalkerProbe(mouth: "roomA", ear: "roomB").run(clipPath: Speech.naturalNearEnd(), folder: dir, name: "roomB-natural"))
                let synthetic = try c.probed(TalkerProbe(mouth: "roomA", ear: "roomB").run(clipPath: Speech.roomA(), folder: dir, name: "roomB-synthetic"))
                _ = b.terminate()
                _ = a.terminate()
                relay?.stop()
                let q = try Quality.measure([(natural.clipPath, natural.recordingPath), (synthetic.clipPath, synthetic.recordingPath)])
                let loss = relay.map { Self.measuredLoss($0.log) } ?? 0
                let stream = b.finalNetwork?.streams.first
                c.check(q.allSatisfy { $0.pesqWb != nil }, "PESQ measured: \(q)")
                func pesq(_ m: Quality) -> String { m.pesqWb.map { String(format: "%.2f", $0) } ?? "-" }
                if condition.fec, condition.relay == Self.bursty, let p = q[0].pesqWb { burstyWithFEC.append((loss, p)) }
                row = String(format: "| %@ | %@ | %.1f %% | %@ | %@ | %.3f | %.3f | %.0f ms | %d / %d |", condition.name, condition.fec ? "on" : "off", loss,
                             pesq(q[0]), pesq(q[1]), q[0].stoi, q[1].stoi, natural.mouthToEarMs ?? .nan, stream?.fecRecovered ?? -1, stream?.concealed ?? -1)
                return [a, b]
            }
            SuiteMode.emit(row ?? "| \(condition.name) | \(condition.fec ? "on" : "off") | not measured: every attempt spoiled by the machine | | | | | | |")
        }
        if burstyWithFEC.count > 1 {
            let pesq = burstyWithFEC.map(\.pesq).sorted(), loss = burstyWithFEC.map(\.loss).sorted()
            let median = pesq[pesq.count / 2], meanLoss = loss.reduce(0, +) / Double(loss.count)
            SuiteMode.emit("")
            SuiteMode.emit(String(format: "Bursty loss with FEC over %d seeds: lost %.1f-%.1f %% (mean %.1f %%), PESQ-WB natural %.2f-%.2f, median %.2f (goal ≥ 3.3 at 5 %%: %@).",
                                  pesq.count, loss.first!, loss.last!, meanLoss, pesq.first!, pesq.last!, median, median >= 3.3 ? "met" : "not met"))
        }
        SuiteMode.emit("")
    }

    /// Forward losses over forward packets from the relay's final statistics.
    static func measuredLoss(_ log: String) -> Double {
        guard let line = log.split(separator: "\n").first(where: { $0.hasPrefix("forward:") }) else { return .nan }
        func number(after key: String) -> Double {
            guard let r = line.range(of: key) else { return 0 }
            return Double(line[r.upperBound...].prefix { $0.isNumber }) ?? 0
        }
        let received = number(after: "received ")
        let dropped = number(after: "dropped ") + number(after: "random + ")
        return received > 0 ? dropped / received * 100 : .nan
    }
}
