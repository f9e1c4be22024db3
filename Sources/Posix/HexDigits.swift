/// Bytes as lowercase hex, two digits a byte: how digests and key names are shown everywhere.
extension Sequence where Element == UInt8 {
    public var hexDigits: String {
        var out = ""
        for byte in self {
            if byte < 16 { out += "0" }
            out += String(byte, radix: 16)
        }
        return out
    }
}

extension UInt64 {
    /// Its eight bytes, most significant first: 16 hex digits.
    public var hexDigits: String { Swift.withUnsafeBytes(of: bigEndian) { $0.hexDigits } }
}
