/// One connected client on the server thread: its socket, what it sent that is not a full line
/// yet, and what waits to be written to it. Both buffers are bounded by the server's settings.
final class ClientConnection {
    let info: ControlClientInfo
    let socket: UnixSocket
    private(set) var input: [UInt8] = []
    private var output: [UInt8] = []
    private var outputStart = 0
    var subscribed = false
    /// Set when the client must go once its output is written (too long a line, end of its input).
    var closeReason: String?
    /// Set when the client must go at once (dead, too slow).
    var dropReason: String?
    /// Monotonic seconds: last byte received, and last time output moved (or was empty).
    var lastInput: Double
    var lastOutputProgress: Double

    init(info: ControlClientInfo, socket: UnixSocket, now: Double) {
        self.info = info
        self.socket = socket
        lastInput = now
        lastOutputProgress = now
    }

    var queuedOutput: Int { output.count - outputStart }
    var isFinished: Bool { dropReason != nil || (closeReason != nil && queuedOutput == 0) }

    /// Appends received bytes and returns the complete lines (without their newline), leaving any
    /// unfinished line in `input`.
    func takeLines(appending bytes: UnsafeRawBufferPointer) -> [ArraySlice<UInt8>] {
        input.append(contentsOf: bytes)
        guard let last = input.lastIndex(of: UInt8(ascii: "\n")) else { return [] }
        let complete = Array(input[...last])
        input.removeSubrange(...last)
        return complete.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true)
    }

    /// The unfinished line at the end of the input, taken out (a client that half-closed after it).
    func takeRemainder() -> ArraySlice<UInt8>? {
        guard !input.isEmpty else { return nil }
        defer { input = [] }
        return input[...]
    }

    func discardInput() { input = [] }

    func enqueue(_ line: [UInt8], now: Double) {
        if queuedOutput == 0 {
            output.removeAll(keepingCapacity: true)
            outputStart = 0
            lastOutputProgress = now
        }
        output.append(contentsOf: line)
        output.append(UInt8(ascii: "\n"))
    }

    /// Writes as much queued output as the socket takes. False when the socket failed.
    func flush(now: Double) -> Bool {
        while queuedOutput > 0 {
            let result = output.withUnsafeBytes { socket.send(UnsafeRawBufferPointer(rebasing: $0[outputStart...])) }
            switch result {
            case .done(let n):
                outputStart += n
                lastOutputProgress = now
            case .wouldBlock, .endOfStream:
                compact()
                return true
            case .failed(let code):
                dropReason = "write failed: \(code.description)"
                return false
            }
        }
        lastOutputProgress = now
        // Release what a burst grew; an idle subscriber should not keep its peak.
        output = []
        outputStart = 0
        return true
    }

    /// Moves pending bytes to the front once more than half the buffer is already written.
    private func compact() {
        if outputStart > output.count / 2 {
            output.removeSubrange(..<outputStart)
            outputStart = 0
        }
    }
}
