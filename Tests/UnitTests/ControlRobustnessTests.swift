import Calls
@testable import Control
import Foundation
import Synchronization
import XCTest

/// Clients that send garbage, never end a line, never read, or come in hundreds: the server stays
/// bounded and keeps serving the well-behaved ones.
final class ControlRobustnessTests: XCTestCase {
    func testGarbageGetsParseErrorsAndTheConnectionStaysUsable() throws {
        let f = try ServerFixture()
        defer { f.stop() }
        let c = try f.client()
        let nested = String(repeating: "[", count: f.settings.maxLineBytes - 1)
        // Deep but within the decoder's nesting limit: decoded on the server thread's stack, then refused.
        let deep = String(repeating: "[", count: 500) + String(repeating: "]", count: 500)
        let garbage = [deep, "hello", "{", "}{", "[1, 2]", "\"just a string\"", "{\"id\": 1, \"cmd\": \"ping\"", nested, "\u{1}\u{7f}\u{ff}"]
        for line in garbage {
            try c.sendLine(line)
            let reply = try ControlTestTools.parse(c.readLine(timeout: 5))
            XCTAssertEqual(reply["id"], .null, line.prefix(40).description)
            XCTAssertEqual(reply["ok"], false)
            XCTAssertEqual(reply["error"]?["code"], "parse_error", line.prefix(40).description)
        }
        // Invalid UTF-8 bytes, and a blank line (ignored, no answer).
        let socketLevel = try UnixSocket.connect(path: f.settings.socketPath, timeout: 5)
        _ = [UInt8]([0xC3, 0x28, 0xFF, 0x0A, 0x20, 0x0A]).withUnsafeBytes { socketLevel.send($0) }
        var chunk = [UInt8](repeating: 0, count: 4096)
        guard case .done(let n) = chunk.withUnsafeMutableBytes({ socketLevel.receive(into: $0) }) else { return XCTFail("no answer") }
        let answer = chunk[..<n]
        XCTAssertEqual(try JSONValue.parse(answer.dropLast())["error"]?["code"], "parse_error", String(decoding: answer, as: UTF8.self))

        XCTAssertEqual(try c.send(.ping).response.outcome, .success(.pong(protocolVersion: 2)))
        XCTAssertEqual(f.server.statistics.dropped, 0)
    }

    func testAnEndlessLineDisconnectsThatClientWithBoundedServerMemory() throws {
        let f = try ServerFixture()
        defer { f.stop() }
        let bystander = try f.client()
        let flood = f.settings.maxLineBytes * 512  // 32 MiB with the defaults
        let chunk = [UInt8](repeating: UInt8(ascii: "a"), count: f.settings.readChunkBytes)
        let before = ControlTestTools.residentBytes()

        let socket = try UnixSocket.connect(path: f.settings.socketPath, timeout: 5)
        var sent = 0
        var sendError: String?
        while sent < flood, sendError == nil {
            switch chunk.withUnsafeBytes({ socket.send($0) }) {
            case .done(let n): sent += n
            case .wouldBlock: sendError = "timed out"
            case .endOfStream: sendError = "closed"
            case .failed(let code): sendError = code.description
            }
        }
        let after = ControlTestTools.residentBytes()
        print("endless line: sent \(sent) bytes before the server hung up (\(sendError ?? "-")); resident +\((after - before) / 1024) KiB")
        XCTAssertNotNil(sendError, "the server must stop taking the line")
        XCTAssertLessThan(sent, flood)
        XCTAssertLessThan(after - before, flood / 4, "the server must not hold the line")
        // What the server said before it hung up: a parse_error about the length.
        var reply: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        socket.setReceiveTimeout(5)
        while case .done(let n) = buffer.withUnsafeMutableBytes({ socket.receive(into: $0) }) { reply += buffer[..<n] }
        let json = try JSONValue.parse(reply.prefix { $0 != 10 })
        XCTAssertEqual(json["error"]?["code"], "parse_error")
        XCTAssertTrue(json["error"]?["message"]?.stringValue?.contains("\(f.settings.maxLineBytes)") ?? false)

        XCTAssertEqual(try bystander.send(.ping).response.outcome, .success(.pong(protocolVersion: 2)))
        XCTAssertEqual(f.server.statistics.dropped, 1)
    }

    func testASubscriberThatNeverReadsIsDroppedWhileOthersGetEveryEvent() throws {
        let f = try ServerFixture()
        defer { f.stop() }
        let stalled = try UnixSocket.connect(path: f.settings.socketPath, timeout: 5)
        _ = Array("{\"id\":1,\"cmd\":\"subscribe\"}\n".utf8).withUnsafeBytes { stalled.send($0) }
        let reader = try f.client()
        _ = try reader.send(.subscribe)
        XCTAssertTrue(ControlTestTools.wait(timeout: 5) { f.server.statistics.subscribers == 2 })

        // Big events, many of them: together far beyond the socket buffers and the output bound.
        let entry = HistoryEntry(callID: CallID(1), direction: .outgoing, caller: FakeControlHandler.here,
                                 participants: (0..<8).map { Participant(room: RoomID("room-\($0)")!, status: .declined(.doNotDisturb)) },
                                 outcome: .notReached, started: 1_700_000_000, ended: 1_700_000_010)
        let eventBytes = try Wire.encode(CallEvent.historyAdded(entry)).count + 1
        let count = f.settings.maxQueuedOutputBytes * 40 / eventBytes
        let total = count * eventBytes

        let received = Mutex<[UInt64]>([])
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) let readerClient = reader  // only the reading thread uses it from here on
        let readerEnd = Mutex("")
        Thread.detachNewThread {
            defer { done.signal() }
            do {
                while let line = try readerClient.readLine(timeout: 10) {
                    guard let event = try? ControlTestTools.event(line) else {
                        return readerEnd.withLock { $0 = "not an event (\(line.utf8.count) bytes): \(line.prefix(100)) … \(line.suffix(100))" }
                    }
                    guard case .call(.historyAdded(let e)) = event else {
                        return readerEnd.withLock { $0 = "unexpected line \(line.prefix(200))" }
                    }
                    if received.withLock({ $0.append(e.callID.value); return $0.count }) == count { return }
                }
                readerEnd.withLock { $0 = "closed" }
            } catch {
                readerEnd.withLock { $0 = "\(error)" }
            }
        }
        let before = ControlTestTools.residentBytes()
        var published = 0
        while published < count {
            // A reader keeps up with bursts that fit its output bound; a bigger burst would drop it too.
            let batch = min(count - published, f.settings.maxQueuedOutputBytes / eventBytes / 2)
            for i in 0..<batch {
                var e = entry
                e.callID = CallID(UInt64(published + i + 1))
                f.server.publish(.historyAdded(e))
            }
            published += batch
            guard ControlTestTools.wait(timeout: 10, { received.withLock { $0.count } == published }) else { break }
        }
        XCTAssertEqual(done.wait(timeout: .now() + 60), .success)
        let after = ControlTestTools.residentBytes()
        print("stalled subscriber: \(count) events, \(total / 1024) KiB published; resident +\((after - before) / 1024) KiB")

        let got = received.withLock { $0 }
        XCTAssertEqual(got.count, count, readerEnd.withLock { $0 })
        XCTAssertTrue(got.elementsEqual(1...UInt64(count)), "events out of order or missing")
        let stats = f.server.statistics
        XCTAssertEqual(stats.dropped, 1)
        XCTAssertEqual(stats.subscribers, 1)
        XCTAssertEqual(stats.eventsLost, 0)
        XCTAssertLessThan(after - before, total / 4)
        withExtendedLifetime(stalled) {}  // its descriptor must not be closed (and reused) before this point
        let reason = f.handler.seen.withLock { $0.disconnected.first?.1 } ?? ""
        XCTAssertTrue(reason.contains("not reading"), reason)
    }

    func testHundredsOfConnectionsHitTheLimitAndAWellBehavedClientIsStillAnsweredQuickly() throws {
        let f = try ServerFixture { $0.maxClients = 16 }
        defer { f.stop() }
        let good = try f.client()
        let crowd = 300
        let answered = Mutex(0)
        let refused = Mutex(0)
        let other = Mutex<[String]>([])
        let stopPinging = Atomic<Bool>(false)
        let measured = Mutex<[Double]>([])
        nonisolated(unsafe) let pingClient = good  // used by the pinger thread only until it finishes
        let pinger = Thread {
            while !stopPinging.load(ordering: .relaxed) {
                let t = Date()
                guard (try? pingClient.send(.ping)) != nil else { return }
                measured.withLock { $0.append(Date().timeIntervalSince(t)) }
            }
        }
        pinger.start()
        var held: [ControlClient] = []
        nonisolated(unsafe) var holding: [ControlClient] = []
        let holdLock = Mutex(())
        DispatchQueue.concurrentPerform(iterations: crowd) { _ in
            do {
                let c = try f.client()
                let (response, _) = try c.send(.ping)
                switch response.outcome {
                case .success: answered.withLock { $0 += 1 }; holdLock.withLock { _ in holding.append(c) }
                case .failure(let e) where e.code == .unavailable: refused.withLock { $0 += 1 }
                case .failure(let e): other.withLock { $0.append("\(e)") }
                }
            } catch {
                // Turned away: the refusal line may be lost to a reset when the server closed first.
                refused.withLock { $0 += 1 }
            }
        }
        held = holding
        stopPinging.store(true, ordering: .relaxed)
        while !pinger.isFinished { usleep(1000) }
        let latencies = measured.withLock { $0 }
        let worst = latencies.max() ?? .infinity
        print("\(crowd) connections: \(answered.withLock { $0 }) served, \(refused.withLock { $0 }) refused; \(latencies.count) pings, worst \(String(format: "%.1f", worst * 1000)) ms")

        XCTAssertEqual(other.withLock { $0 }, [])
        XCTAssertEqual(answered.withLock { $0 }, f.settings.maxClients - 1)
        XCTAssertEqual(refused.withLock { $0 }, crowd - (f.settings.maxClients - 1))
        XCTAssertEqual(f.server.statistics.clients, f.settings.maxClients)
        XCTAssertGreaterThan(latencies.count, 0)
        // Generous against scheduling on a loaded 2-core machine, far below the client's own timeout.
        XCTAssertLessThan(worst, good.timeout / 10)
        XCTAssertEqual(try held.first?.send(.ping).response.outcome, .success(.pong(protocolVersion: 2)))
    }

    func testASubscriberWhoseOutputDoesNotMoveIsDroppedAfterTheStallTimeout() throws {
        // A byte bound too large to trip: only the stall timeout can drop it.
        let f = try ServerFixture { $0.stalledOutputTimeout = 0.3; $0.maxQueuedOutputBytes = 1 << 30 }
        defer { f.stop() }
        let stalled = try UnixSocket.connect(path: f.settings.socketPath, timeout: 5)
        _ = Array("{\"id\":1,\"cmd\":\"subscribe\"}\n".utf8).withUnsafeBytes { stalled.send($0) }
        XCTAssertTrue(ControlTestTools.wait(timeout: 5) { f.server.statistics.subscribers == 1 })
        let started = Date()
        // More than the kernel's socket buffers hold, so some output stays queued in the server.
        for i in 0..<f.settings.maxPendingEvents / 2 {
            f.server.publish(.historyAdded(FakeControlHandler.history[i % FakeControlHandler.history.count]))
        }
        XCTAssertTrue(ControlTestTools.wait(timeout: f.settings.stalledOutputTimeout * 20) { f.server.statistics.subscribers == 0 })
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), f.settings.stalledOutputTimeout)
        let reason = f.handler.seen.withLock { $0.disconnected.first?.1 } ?? ""
        XCTAssertTrue(reason.contains("stalled"), reason)
        withExtendedLifetime(stalled) {}
    }
}
