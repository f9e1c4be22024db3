import Foundation
import Glibc // Linux only, like the daemon

/// Thin POSIX file helpers for the WAV code. Plain file descriptors give exact control
/// over temp-file + fsync + rename and positioned writes, and errno texts for errors.
enum PosixFile {
    static func ioError(_ path: String, _ what: String, _ code: Int32 = errno) -> WAVError {
        WAVError(path: path, kind: .io, problem: "\(what): \(String(cString: strerror(code)))")
    }

    static func readAll(path: String) throws -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw ioError(path, "cannot open") }
        defer { _ = Glibc.close(fd) }
        var info = stat()
        let sizeHint = fstat(fd, &info) == 0 ? max(Int(info.st_size), 0) : 0
        // One spare byte so a file of exactly the stat size ends in a zero-length read
        // without growing the buffer; files that grow meanwhile are still read completely.
        var bytes = [UInt8](repeating: 0, count: sizeHint + 1)
        var filled = 0
        while true {
            if filled == bytes.count {
                bytes.append(contentsOf: repeatElement(0, count: max(65536, bytes.count)))
            }
            let n = bytes.withUnsafeMutableBytes { buf in
                Glibc.read(fd, buf.baseAddress! + filled, buf.count - filled)
            }
            if n < 0 {
                if errno == EINTR { continue }
                throw ioError(path, "cannot read")
            }
            if n == 0 { break }
            filled += n
        }
        bytes.removeLast(bytes.count - filled)
        return bytes
    }

    static func writeAll(fd: Int32, _ bytes: UnsafeRawBufferPointer, path: String) throws {
        var done = 0
        while done < bytes.count {
            let n = Glibc.write(fd, bytes.baseAddress! + done, bytes.count - done)
            if n < 0 {
                if errno == EINTR { continue }
                throw ioError(path, "cannot write")
            }
            done += n
        }
    }

    static func writeAll(fd: Int32, _ bytes: [UInt8], path: String) throws {
        try bytes.withUnsafeBytes { try writeAll(fd: fd, $0, path: path) }
    }

    /// Writes Int16 samples little-endian, as WAV requires, whatever the host byte order.
    static func writeSamples(fd: Int32, _ samples: UnsafeBufferPointer<Int16>, path: String) throws {
        #if _endian(little)
        try writeAll(fd: fd, UnsafeRawBufferPointer(samples), path: path)
        #else
        var start = 0
        while start < samples.count {
            let end = min(samples.count, start + 4096)
            let swapped = samples[start..<end].map { $0.littleEndian }
            try swapped.withUnsafeBytes { try writeAll(fd: fd, $0, path: path) }
            start = end
        }
        #endif
    }

    static func writeSamples(fd: Int32, _ samples: [Int16], path: String) throws {
        try samples.withUnsafeBufferPointer { try writeSamples(fd: fd, $0, path: path) }
    }

    /// Writes a little-endian UInt32 at an absolute offset without moving the file position.
    static func patchUInt32(fd: Int32, _ value: UInt32, at offset: Int, path: String) throws {
        try withUnsafeBytes(of: value.littleEndian) { buf in
            var done = 0
            while done < buf.count {
                let n = pwrite(fd, buf.baseAddress! + done, buf.count - done, off_t(offset + done))
                if n < 0 {
                    if errno == EINTR { continue }
                    throw ioError(path, "cannot update header")
                }
                done += n
            }
        }
    }

    /// Creates a uniquely named temporary file next to `path`, lets `body` fill it, then
    /// fsyncs and renames it over `path` (atomic on POSIX file systems). On any failure the
    /// temporary file is removed and `path` is left untouched.
    static func atomicWrite(path: String, _ body: (Int32) throws -> Void) throws {
        let suffix = String(UInt32.random(in: .min ... .max), radix: 16)
        let temp = "\(path).tmp-\(getpid())-\(suffix)"
        let fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw ioError(path, "cannot create temporary file \(temp)") }
        var open = true
        var renamed = false
        defer {
            if open { _ = Glibc.close(fd) }
            if !renamed { _ = unlink(temp) }
        }
        try body(fd)
        // Sync before rename so a crash cannot leave `path` naming an empty file.
        guard fsync(fd) == 0 else { throw ioError(path, "cannot sync \(temp)") }
        open = false
        guard Glibc.close(fd) == 0 else { throw ioError(path, "cannot close \(temp)") }
        guard rename(temp, path) == 0 else { throw ioError(path, "cannot rename \(temp) over it") }
        renamed = true
    }
}
