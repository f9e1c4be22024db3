/// The keys' times: each default here, once (the key reader and the configuration's `[keys]` start
/// from them).
public enum KeyTiming {
    /// A second press of the same key sooner than this is contact bounce.
    public static let debounce = Duration.milliseconds(30)
    /// A key with a long action held this long fires it.
    public static let longPress = Duration.milliseconds(800)
}
