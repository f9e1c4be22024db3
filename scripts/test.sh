#!/usr/bin/env bash
# Runs every test: the rig's self-test, then all Swift tests (unit tests and the tests on the
# real ALSA path) inside a private virtual audio rig that is torn down even when tests fail.
#
# Tests and the intercomd they start are built optimized (-c release, with -enable-testing for
# @testable imports) in their own build folder: the rig tests run up to five daemons, a sound
# server and the talker probe on two cores, and a debug build costs the audio threads headroom
# that a shared machine does not always have. `swift test` (debug) works as usual for development.
# With no arguments it also runs the main job in its shortest form (scripts/run.sh --short, in a
# rig of its own: it fails when any of its steps fails), the measurement suite's smoke run and the
# package test (scripts/test-package.sh: the .deb built, installed here, its unit verified, purged).
set -euo pipefail
cd "$(dirname "$0")/.."

# Each stage's wall time, so that CI's time can be planned (CI allows 90 minutes; we keep it under
# 40). Printed at the end too.
TIMES=()
STAGE_START=$SECONDS
stage_done() {
    TIMES+=("$1 $((SECONDS - STAGE_START)) s")
    echo "test.sh: $1 took $((SECONDS - STAGE_START)) s" >&2
    STAGE_START=$SECONDS
}
# Every repeated measurement attempt and its cause (tests append to it: TestSupport/Retries.swift).
mkdir -p .build-tests
export INTERCOM_RETRY_LOG="$PWD/.build-tests/retries.log"
: >"$INTERCOM_RETRY_LOG"
TEST_LOG="$PWD/.build-tests/tests.log"
: >"$TEST_LOG"
summary() {
    echo "test.sh: stages: ${TIMES[*]:-none}; total $SECONDS s" >&2
    local n
    n=$(wc -l <"$INTERCOM_RETRY_LOG" 2>/dev/null || echo 0)
    echo "test.sh: $n measurement attempts repeated (only for xruns, a machine that stopped or a rig fault the attempt proved)" >&2
    sed 's/^/test.sh:   retry: /' "$INTERCOM_RETRY_LOG" >&2 2>/dev/null || true
    # CI shows only the end of the output: repeat each failure's XCTest line here.
    if [[ -s "$TEST_LOG" ]]; then
        local failures
        failures=$(grep -E ": error: |' failed \(" "$TEST_LOG" | tail -n 40 || true)
        echo "test.sh: $(grep -cE "' failed \(" "$TEST_LOG" || true) tests failed${failures:+:}" >&2
        [[ -n "$failures" ]] && sed 's/^/test.sh:   failure: /' <<<"$failures" >&2
    fi
    return 0
}
trap summary EXIT

bash scripts/setup.sh
stage_done setup
BUILD=(-c release -Xswiftc -enable-testing --scratch-path .build-tests)
# The compiler's messages without the progress lines; a failed build fails here (pipefail).
swift build "${BUILD[@]}" --build-tests 2>&1 | { grep -v "^\[" || true; }
stage_done build

# Every fuzz target for a bounded time (parsers of outside input: RTP, signalling, control
# requests, key events); a crash fails the run. Longer runs: fuzz/<target>/build.sh run.
sh fuzz/run-all.sh 5
stage_done fuzz

# Let the build's writes reach the disk before real-time tests start.
sync
bash scripts/rig-selftest.sh
# All tests are XCTest; without Swift Testing the run closes on the XCTest summary.
bash scripts/rig.sh run --dir "$PWD/.rig-test" -- swift test "${BUILD[@]}" --skip-build --disable-swift-testing "$@" 2>&1 | tee "$TEST_LOG"
stage_done rig-selftest+tests
# Skipped when tests were selected: the main job as a newcomer runs it, shortest form, on the
# binaries just built; the measurement suite at its smallest sizes, so that it cannot rot
# unnoticed (the figures in BENCHMARKS.md come from a full run: scripts/bench-suite.sh).
if [[ $# -eq 0 ]]; then
    INTERCOM_BUILD="${BUILD[*]}" INTERCOM_RIG_DIR="$PWD/.rig-main" bash scripts/run.sh --short
    stage_done main-job
    bash scripts/bench-suite.sh --smoke --out "$PWD/.build-tests/BENCHMARKS.smoke.md"
    stage_done suite-smoke
    # The Debian package: built, installed on this machine, its unit verified, purged again; its
    # binaries linked from the tests' objects into .build-deb (the tests' own stay as they are).
    INTERCOM_DEB_TESTS_BUILD="$PWD/.build-tests" bash scripts/test-package.sh
    stage_done package
fi
