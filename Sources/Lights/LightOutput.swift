/// One LED the lights thread drives.
protocol LightOutput: AnyObject {
    var name: String { get }
    /// Shows `pattern`. Returns true when the hardware keeps it up on its own (steady, off, or a
    /// blink the kernel runs), false when the caller must blink it with `set(on:)`.
    func show(_ pattern: LightPattern) throws(LightError) -> Bool
    /// Lights or darkens it (a software blink's phase).
    func set(on: Bool) throws(LightError)
}

/// An LED that could not be set up or written.
public struct LightError: Error, Sendable, Equatable, CustomStringConvertible {
    public let led: String
    public let problem: String

    public init(led: String, problem: String) {
        self.led = led
        self.problem = problem
    }

    public var description: String { "light \(led): \(problem)" }
}
