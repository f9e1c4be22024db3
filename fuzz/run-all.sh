#!/bin/sh
# Builds every fuzz target and runs each for SECONDS (default 15): the bounded run in CI. A crash,
# a trap or a sanitizer report fails it (libFuzzer exits non-zero and leaves .build-fuzz/crash-*).
# Longer runs for BENCHMARKS.md: fuzz/<target>/build.sh run -max_total_time=300
# The configuration and seal fuzzers (SwiftPM builds sharing one folder, the longest) build and
# run one after the other beside the others: two at a time on CI's two cores.
set -eu
cd "$(dirname "$0")/.."
seconds=${1:-15}
mkdir -p .build-fuzz
rm -f .build-fuzz/crash-*
# Swift's own crash backtracer reads the stack in a way AddressSanitizer reports as an underflow,
# hiding the real message (a failed precondition): libFuzzer's stack trace is enough.
export SWIFT_BACKTRACE=enable=no
run_one() {
    target=$1
    if ! sh "fuzz/$target/build.sh" run -max_total_time="$seconds" -artifact_prefix="$PWD/.build-fuzz/crash-$target-" \
            > ".build-fuzz/$target.log" 2>&1; then
        grep -E "ERROR|panic|Fatal|error|failed" ".build-fuzz/$target.log" | head -20
        echo "fuzz: $target failed (.build-fuzz/$target.log, $(ls .build-fuzz/crash-$target-* 2>/dev/null))"
        return 1
    fi
    echo "fuzz: $target for $seconds s: $(grep -E "^Done" ".build-fuzz/$target.log")"
}
{ c=0; run_one config || c=1; run_one seal || c=1; exit $c; } &
config=$!
failed=0
for target in rtp srtp signal control keys transfer; do run_one "$target" || failed=1; done
wait "$config" || failed=1
exit "$failed"
