// Appends history entries to the store at argv[1] (capacity argv[2]) until killed, continuing
// after the newest entry already there, and prints each call id once its append has returned.
// The crash test SIGKILLs it at random moments and checks what survives.
import CallStore
import Calls
import Glibc

func fail(_ message: String, status: Int32) -> Never {
    let line = Array((message + "\n").utf8)
    _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    exit(status)
}

let arguments = CommandLine.arguments
guard arguments.count == 3, let capacity = Int(arguments[2]) else {
    fail("usage: callstore-crash-writer HISTORY_PATH CAPACITY", status: 64)
}
do {
    let store = try HistoryStore(path: arguments[1], capacity: capacity)
    if let problem = store.loadProblem {
        fail("\(problem)", status: 65)
    }
    var id = (store.all().last?.callID.value ?? 0) + 1
    while true {
        try store.append(CrashEntry.make(id))
        let line = Array("\(id)\n".utf8)
        _ = line.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
        id += 1
    }
} catch {
    fail("\(error)", status: 1)
}
