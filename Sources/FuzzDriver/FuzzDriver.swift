// How a SwiftPM fuzz target (config-fuzz, seal-fuzz) hands its command line to libFuzzer:
// SwiftPM links an executable with `main` aliased to `<target>_main`, so libFuzzer's own `main`
// is never used; each target's `<target>_main` calls `runFuzzer` with its one-input function.
// Only in a build with FUZZING defined and -sanitize=fuzzer, which provides the driver.

#if FUZZING
@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>, Int) -> CInt
) -> CInt

/// Runs libFuzzer's driver with `argc`/`argv`, calling `oneInput` for each input.
public func runFuzzer(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
                      _ oneInput: @convention(c) (UnsafePointer<UInt8>, Int) -> CInt) -> CInt {
    var count = argc
    var arguments = argv
    return LLVMFuzzerRunDriver(&count, &arguments, oneInput)
}
#endif
