import Foundation
import Posix
import Glibc

/// Writes a long 16-bit PCM recording incrementally, from a non-real-time thread.
///
/// The header is written first with provisional sizes of 0xFFFFFFFF ("until end of
/// file"), so a recording cut short by a crash is still readable (`WAVAudio.read`
/// clamps the data chunk to the file); `close()` patches in the real sizes. The file is
/// written in place, not atomically: for hours of audio a temp copy would only
/// double the disk traffic.
///
/// Not `Sendable`: it owns a file position and counters without locking, and is meant
/// to be used by one thread. Create it on the thread that writes (for example inside
/// the `Thread` closure), or hand it over with `sending`; nothing needs to share it.
public final class WAVStreamWriter {
    public let path: String
    public let sampleRate: Int
    public let channels: Int
    /// Int16 samples (not frames) appended so far.
    public private(set) var samplesWritten = 0
    public var framesWritten: Int { samplesWritten / channels }
    public var isClosed: Bool { fd < 0 }
    private var fd: Int32

    /// Creates (or truncates) `path` and writes the header.
    public init(path: String, sampleRate: Int, channels: Int) throws {
        if let problem = WAVHeader.problem(sampleRate: sampleRate, channels: channels) {
            throw WAVError(path: path, kind: .malformed, problem: problem)
        }
        self.path = path
        self.sampleRate = sampleRate
        self.channels = channels
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw PosixFile.ioError(path, SystemError("create", SystemError.currentErrno)) }
        do {
            let header = WAVHeader.pcm16(sampleRate: sampleRate, channels: channels, dataBytes: .max)
            try PosixFile.writeAll(fd: fd, header, path: path)
        } catch {
            _ = Glibc.close(fd)
            fd = -1
            throw error
        }
    }

    deinit {
        // Best effort for a forgotten close(); errors cannot be reported from deinit.
        if fd >= 0 { try? close() }
    }

    /// Appends interleaved samples. Frames may be split across calls; a trailing partial
    /// frame at `close()` is ignored by readers.
    public func append(_ samples: UnsafeBufferPointer<Int16>) throws {
        guard fd >= 0 else { throw WAVError(path: path, kind: .closed, problem: "append after close") }
        let newTotal = samplesWritten + samples.count
        guard newTotal * 2 <= WAVHeader.maxDataBytes else {
            throw WAVError(path: path, kind: .tooLarge, problem: "recording would exceed the 4 GiB WAV limit")
        }
        try PosixFile.writeSamples(fd: fd, samples, path: path)
        samplesWritten = newTotal
    }

    public func append(_ samples: [Int16]) throws {
        try samples.withUnsafeBufferPointer { try append($0) }
    }

    /// Patches the RIFF and data sizes and closes the file. Calling it again does nothing.
    public func close() throws {
        guard fd >= 0 else { return }
        let file = fd
        fd = -1 // closed even if patching fails: the descriptor must not leak
        do {
            let dataBytes = UInt32(samplesWritten * 2)
            try PosixFile.patchUInt32(fd: file, dataBytes + 36, at: WAVHeader.riffSizeOffset, path: path)
            try PosixFile.patchUInt32(fd: file, dataBytes, at: WAVHeader.dataSizeOffset, path: path)
        } catch {
            _ = Glibc.close(file)
            throw error
        }
        guard Glibc.close(file) == 0 else { throw PosixFile.ioError(path, SystemError("close", SystemError.currentErrno)) }
    }
}

// Spelled out so an accidental cross-thread use fails to compile instead of racing.
@available(*, unavailable)
extension WAVStreamWriter: Sendable {}
