#!/usr/bin/env bash
# Issue 55's long run: a small site on the virtual rig (three terminals) with calls, group calls,
# announcements and notifications on a schedule, for DURATION; every event expected is checked
# against every event seen, and each cycle samples memory, descriptors, threads, CPU, the
# mouth-to-ear delay, the buffer delay, drift and xruns (Tests/RigTests/SoakRigTests.swift).
#
#   scripts/soak.sh [--accelerate N] DURATION [OUT]     DURATION: 180s, 70m, 2h; OUT: where the samples go
#
# --accelerate N: every timer of the daemons ([testing] time_scale: hellos, presence, retries,
# ringing, reminders, session keys, history age) runs N times faster, and each cycle waits for a
# notification reminder: `--accelerate 10 72m` covers 12 hours of the daemons' events.
#
# The test command runs the 3-minute form (the same test, INTERCOM_SOAK_SECONDS unset).
# Run long ones on an otherwise idle machine: other work shows up as xruns and delay.
set -euo pipefail
cd "$(dirname "$0")/.."

SCALE=1
if [ "${1:-}" = --accelerate ]; then SCALE=${2:?--accelerate needs a factor}; shift 2; fi
DURATION=${1:?usage: scripts/soak.sh [--accelerate N] DURATION [OUT]  (DURATION: 180s, 70m, 2h)}
case $DURATION in
    *h) SECONDS_TOTAL=$(( ${DURATION%h} * 3600 )) ;;
    *m) SECONDS_TOTAL=$(( ${DURATION%m} * 60 )) ;;
    *s) SECONDS_TOTAL=${DURATION%s} ;;
    *) SECONDS_TOTAL=$DURATION ;;
esac
OUT=${2:-$PWD/.build-tests/soak-$(date -u +%Y%m%dT%H%MZ)}
mkdir -p "$OUT"

bash scripts/setup.sh
BUILD=(-c release -Xswiftc -enable-testing --scratch-path .build-tests)
swift build "${BUILD[@]}" --build-tests 2>&1 | { grep -v "^\[" || true; }
echo "soak: $SECONDS_TOTAL s, timers $SCALE times faster, from $(date -u +%FT%TZ); samples and the log in $OUT" >&2
INTERCOM_SOAK_SECONDS=$SECONDS_TOTAL INTERCOM_SOAK_DIR=$OUT INTERCOM_SOAK_TIME_SCALE=$SCALE \
    bash scripts/rig.sh run --dir "$PWD/.rig-soak" -- \
    swift test "${BUILD[@]}" --skip-build --disable-swift-testing --filter SoakRigTests 2>&1 | tee "$OUT/soak.log"
