import Foundation

/// The one JSON form of everything this project puts on a wire or in a file as JSON: the control
/// socket, the site service's API and event streams, the history file. Keys are written in
/// snake_case (a Swift property `readAloud` is `read_aloud`); a key whose Swift name holds an
/// acronym (`callID`) spells its coding key in lower camel case (`callId`) so that the two
/// conversions meet. Lines are compact with sorted keys, for stable output and tests.
public enum Wire {
    public static func encoder() -> JSONEncoder {
        let e = JSONEncoder()
        e.keyEncodingStrategy = .convertToSnakeCase
        e.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // JSON has no infinity or NaN; a counter that never measured is null, not one of these.
        e.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        return e
    }

    public static func decoder() -> JSONDecoder {
        let d = JSONDecoder()
        d.keyDecodingStrategy = .convertFromSnakeCase
        d.nonConformingFloatDecodingStrategy = .convertFromString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        return d
    }

    /// One line, without its newline.
    public static func encode(_ value: some Encodable) throws -> [UInt8] {
        Array(try encoder().encode(value))
    }

    public static func string(_ value: some Encodable) throws -> String {
        String(decoding: try encode(value), as: UTF8.self)
    }

    public static func decode<T: Decodable>(_ type: T.Type, from bytes: some Collection<UInt8>,
                                            userInfo: [CodingUserInfoKey: any Sendable] = [:]) throws -> T {
        let d = decoder()
        d.userInfo = userInfo
        return try d.decode(type, from: Data(bytes))
    }

    /// What is wrong with a document, for a person: the field's path and what it should be.
    public static func describe(_ error: any Error) -> String {
        func path(_ keys: [any CodingKey]) -> String {
            keys.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".").replacingOccurrences(of: ".[", with: "[")
        }
        switch error {
        case DecodingError.keyNotFound(let key, let c):
            return "\"\(path(c.codingPath + [key]))\" is missing"
        case DecodingError.valueNotFound(let type, let c):
            return "\"\(path(c.codingPath))\" is null, not \(describe(type))"
        case DecodingError.typeMismatch(let type, let c):
            return "\"\(path(c.codingPath))\" must be \(describe(type))"
        case DecodingError.dataCorrupted(let c):
            if c.codingPath.isEmpty {
                return "not JSON: " + ((c.underlyingError.map { "\($0.localizedDescription)" } ?? c.debugDescription).prefix(200))
            }
            return "\"\(path(c.codingPath))\": \(c.debugDescription)"
        default:
            return String(describing: error).prefix(300).description
        }
    }

    /// The member a decoding error is about, as the wire spells it (`scopes.0`, `csrf_token`); nil
    /// for the document as a whole.
    public static func field(of error: any Error) -> String? {
        let path: [any CodingKey]
        switch error {
        case DecodingError.keyNotFound(let key, let c): path = c.codingPath + [key]
        case DecodingError.typeMismatch(_, let c), DecodingError.valueNotFound(_, let c), DecodingError.dataCorrupted(let c): path = c.codingPath
        default: return nil
        }
        guard !path.isEmpty else { return nil }
        return path.map { $0.intValue.map(String.init) ?? snakeCase($0.stringValue) }.joined(separator: ".")
    }

    private static func snakeCase(_ key: String) -> String {
        key.unicodeScalars.reduce(into: "") { out, c in
            if c.properties.isUppercase { out += "_" + String(c).lowercased() } else { out.unicodeScalars.append(c) }
        }
    }

    private static func describe(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Bool.Type: "true or false"
        case is Int.Type, is Int64.Type, is UInt64.Type, is UInt32.Type, is UInt16.Type: "an integer"
        case is Double.Type, is Float.Type: "a number"
        case is [Any].Type: "an array"
        default: type is any Collection.Type ? "an array" : "an object"
        }
    }

    /// The refusal a type's `init(from:)` throws for a value of the right JSON type but not allowed.
    public static func invalid(_ c: any Decoder, _ message: String) -> DecodingError {
        .dataCorrupted(.init(codingPath: c.codingPath, debugDescription: message))
    }
}

/// A hexadecimal identifier on the wire (call and notification ids, as the log prints them).
public protocol HexIdentifier: Codable, CustomStringConvertible {
    var value: UInt64 { get }
    init(_ value: UInt64)
}

extension HexIdentifier {
    public var description: String { String(value, radix: 16) }

    public init?(hex: String) {
        guard !hex.isEmpty, hex.utf8.count <= 16, let v = UInt64(hex, radix: 16) else { return nil }
        self.init(v)
    }

    public init(from decoder: Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let id = Self(hex: text) else { throw Wire.invalid(decoder, "must be a hexadecimal id, not \"\(text.prefix(40))\"") }
        self = id
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(description)
    }
}
