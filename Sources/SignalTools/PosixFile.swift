import Foundation
import Glibc // Linux only, like the daemon
import Posix

/// The WAV code's file access, on `WholeFile`: plain descriptors give exact control over the
/// temp-file + fsync + rename and the positioned header writes; errors carry the errno text.
enum PosixFile {
    static func ioError(_ path: String, _ error: SystemError) -> WAVError {
        WAVError(path: path, kind: .io, problem: error.cannotText)
    }

    static func readAll(path: String) throws -> [UInt8] {
        let bytes: [UInt8]?
        do { bytes = try WholeFile.read(path) } catch { throw ioError(path, error) }
        guard let bytes else { throw ioError(path, SystemError("open", .noSuchFileOrDirectory)) }
        return bytes
    }

    static func writeAll(fd: Int32, _ bytes: UnsafeRawBufferPointer, path: String) throws {
        do { try WholeFile.write(fd, bytes) } catch { throw ioError(path, error) }
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
        do {
            try withUnsafeBytes(of: value.littleEndian) { try WholeFile.write(fd, $0, at: offset, "update header") }
        } catch let error as SystemError {
            throw ioError(path, error)
        }
    }

    /// Writes `path` through a temporary file next to it (`WholeFile.replace`): on any failure
    /// `path` is left untouched.
    static func atomicWrite(path: String, _ body: (Int32) throws -> Void) throws {
        do {
            try WholeFile.replace(path, mode: nil, syncDirectory: false, fill: body)
        } catch let error as SystemError {
            throw ioError(path, error)
        }
    }
}
