import Calls

/// The entry written for call id `n`; the test rebuilds it to compare (same code, copied there).
enum CrashEntry {
    static func make(_ n: UInt64) -> HistoryEntry {
        let rooms = (UInt64(0)..<4).map { RoomID("room-\((n + $0) % 9)")! }
        return HistoryEntry(callID: CallID(n), direction: n % 2 == 0 ? .incoming : .outgoing, caller: rooms[0],
                            participants: rooms.dropFirst().map { Participant(room: $0, status: .connected) },
                            outcome: .finished, started: Double(n), ended: Double(n) + 0.5)
    }
}
