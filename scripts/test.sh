#!/usr/bin/env bash
# Runs every test: the rig's self-test, then all Swift tests (unit tests and the tests on the
# real ALSA path) inside a private virtual audio rig that is torn down even when tests fail.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
swift build --build-tests 2>&1 | grep -v "^\[" || true
swift build --build-tests >/dev/null   # fail here, with the compiler's output above, if it does not build

# Let the build's writes reach the disk before real-time tests start.
sync
bash scripts/rig-selftest.sh
# All tests are XCTest; without Swift Testing the run closes on the XCTest summary.
bash scripts/rig.sh run --dir "$PWD/.rig-test" -- swift test --skip-build --disable-swift-testing
