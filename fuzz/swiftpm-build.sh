#!/bin/sh
# Builds the package's fuzz target NAME-fuzz (libFuzzer + AddressSanitizer, FUZZING defined, every
# Swift module instrumented) into .build-fuzz/NAME-fuzzer. The SwiftPM targets share one build
# folder, so never two at once. Sourced by fuzz/config/build.sh and fuzz/seal/build.sh.
# Usage: build_swiftpm_fuzzer NAME
build_swiftpm_fuzzer() {
    mkdir -p ".build-fuzz/$1-corpus"
    swift build -c debug --build-path .build-fuzz/spm --product "$1-fuzz" \
        -Xswiftc -DFUZZING -Xswiftc -sanitize=fuzzer,address -Xswiftc -use-ld=lld >".build-fuzz/$1-build.log" 2>&1 ||
        { tail -30 ".build-fuzz/$1-build.log"; exit 1; }
    cp ".build-fuzz/spm/debug/$1-fuzz" ".build-fuzz/$1-fuzzer"
    echo "built .build-fuzz/$1-fuzzer"
}
