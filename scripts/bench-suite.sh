#!/usr/bin/env bash
# The measurement suite (issue 5): runs every measurement once and writes BENCHMARKS.md from the
# figures of this run, with the machine and the date, then appends docs/benchmarks-notes.md
# (hand-written history and figures measured by other means).
#
#   scripts/bench-suite.sh [--smoke] [--out FILE]
#
# --smoke runs each measurement once at its smallest size (CI: it cannot rot silently) and checks
# that every section came out with figures; the default writes BENCHMARKS.md (about 25 minutes).
# Run it on an otherwise idle machine: the CPU and latency figures feel every other process.
set -euo pipefail
cd "$(dirname "$0")/.."

MODE=full
OUT=BENCHMARKS.md
while [[ $# -gt 0 ]]; do
    case $1 in
        --smoke) MODE=smoke ;;
        --out) OUT=$2; shift ;;
        *) echo "usage: scripts/bench-suite.sh [--smoke] [--out FILE]" >&2; exit 64 ;;
    esac
    shift
done

# Sizes per mode: every default in one place.
if [[ $MODE == smoke ]]; then
    CORE=(--runs 1 --frames 200); INSTR_FRAMES=(20 40); JITTER=(--minutes 0.5 --phases 1)
    M2E=(--setups 1 --sessions 1 --repeats 1)
else
    CORE=(--runs 7 --frames 3000); INSTR_FRAMES=(200 400); JITTER=(--minutes 10 --phases 10)
    M2E=(--setups 6 --sessions 3 --repeats 3)
fi

# The peers it compares intercomd with are installed here, also when the test command ran setup.
bash scripts/setup.sh --peers
# The same optimized build as the tests (scripts/test.sh), so that CI builds once.
BUILD=(-c release -Xswiftc -enable-testing --scratch-path .build-tests)
swift build "${BUILD[@]}" --build-tests >/dev/null
BIN=$(swift build "${BUILD[@]}" --show-bin-path)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
RIG=(bash scripts/rig.sh run --dir "$PWD/.rig-suite" --)
# Each step with the seconds the one before took (CI's time is planned from these).
STEP_START=$SECONDS
step() { echo "bench-suite: [$((SECONDS - STEP_START)) s] $*" >&2; STEP_START=$SECONDS; }

step "audio core: CPU, allocations, Swift/C by time, rig round trip"
"${RIG[@]}" "$BIN/intercom-bench" "${CORE[@]}" | sed "s/^## /### /" >"$WORK/10-core.md"

step "Swift overhead by instruction count (callgrind)"
# valgrind 3.19 cannot read the Swift toolchain's debug info: count a stripped copy.
strip -o "$WORK/bench" "$BIN/intercom-bench"
instructions() {  # variant frames -> instructions executed
    valgrind --tool=callgrind --callgrind-out-file=/dev/null "$WORK/bench" --instructions "$1" --frames "$2" 2>&1 \
        | awk '/Collected :/ { print $4 }'
}
declare -A IR
for v in chain bare; do
    for n in "${INSTR_FRAMES[@]}"; do IR[$v$n]=$(instructions "$v" "$n"); done
done
lo=${INSTR_FRAMES[0]} hi=${INSTR_FRAMES[1]}
awk -v c1="${IR[chain$lo]}" -v c2="${IR[chain$hi]}" -v b1="${IR[bare$lo]}" -v b2="${IR[bare$hi]}" -v n=$((hi - lo)) 'BEGIN {
    c = (c2 - c1) / n; b = (b2 - b1) / n
    print "### Swift overhead by instruction count (callgrind, the same frames as the audio core table)\n"
    print "Instructions per 10 ms frame, counted by valgrind: repeatable whatever else the machine does, unlike the"
    print "timings above. The difference of two runs (" n " frames apart) leaves the per-frame work alone. The Swift chain"
    print "also runs the mixer, the gains, the ERLE tracker and the ring hand-off, which the bare speexdsp loop does not."
    print "Lower is better; goal: Swift chain / bare C at most 1.15 (issue 5).\n"
    print "| figure | value | goal |"
    print "|---|---|---|"
    printf "| Swift chain, instructions per frame | %.0f | |\n", c
    printf "| bare speexdsp calls, instructions per frame | %.0f | |\n", b
    printf "| Swift chain / bare C | %.3f | ≤ 1.15: %s |\n\n", c / b, (c / b <= 1.15 ? "met" : "not met")
}' >"$WORK/20-instructions.md"

step "jitter buffer against speexdsp's on packet traces"
{ "$BIN/intercom-bench" jitter "${JITTER[@]}" | sed 's/^## /### /'; echo; } >"$WORK/30-jitter.md"

step "SRTP per packet"
{ "$BIN/intercom-bench" srtp $([[ $MODE == smoke ]] && echo "--runs 1 --packets 100") | sed 's/^## /### /'; echo; } >"$WORK/35-srtp.md"

step "mouth-to-ear delay on the rig"
"${RIG[@]}" "$BIN/intercom-bench" --mouth-to-ear "${M2E[@]}" >"$WORK/40-mouth-to-ear.md"

step "rig measurements (Suite… tests): echo, drift, speech quality, 1:n, howling, notifications, a site of 5-50 terminals, call set-up with keys per call, the site service, its page and its API under load"
INTERCOM_SUITE=$MODE "${RIG[@]}" swift test "${BUILD[@]}" --skip-build --disable-swift-testing --filter 'Suite' \
    >"$WORK/suite.log" 2>&1 || {
        tail -40 "$WORK/suite.log" >&2
        # The failures themselves, wherever they are in the log (CI shows only its end).
        grep -E ": error: |' failed \(" "$WORK/suite.log" | sed 's/^/bench-suite: failure: /' >&2 || true
        echo "bench-suite: a suite measurement failed" >&2
        exit 1
    }
sed -n 's/^SUITE|//p' "$WORK/suite.log" >"$WORK/50-suite.md"
# Each rig measurement's time, longest first.
sed -nE "s/^Test Case '-?\[?([A-Za-z]+)[. ]([A-Za-z]+)\]?' passed \(([0-9.]+) seconds\)/\3 s \1.\2/p" "$WORK/suite.log" | sort -rn | sed 's/^/bench-suite:   /' >&2
step "done"

{
    echo "# Benchmarks"
    echo
    echo "Written by \`scripts/bench-suite.sh\`$([[ $MODE == smoke ]] && echo " --smoke (smallest sizes: not figures to quote)") on $(date -u +%Y-%m-%dT%H:%MZ),"
    echo "commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- Sources Tests || echo " with uncommitted changes"); every figure below comes from that one run."
    echo "Machine: $(nproc) cores ($(lscpu | sed -n 's/^Model name: *//p' | head -1)), $(uname -sr), $(swift --version 2>/dev/null | head -1)."
    echo "Build: release with -enable-testing (as the tests). No sound card: the virtual audio rig (PulseAudio null"
    echo "sinks through ALSA's pulse plugin) stands in for devices; its own share is measured and named where it matters."
    echo
    echo "## Audio core"
    echo
    cat "$WORK/10-core.md"
    echo
    cat "$WORK/20-instructions.md"
    echo "## Jitter buffer"
    echo
    cat "$WORK/30-jitter.md"
    echo "## Media security"
    echo
    cat "$WORK/35-srtp.md"
    echo "## Delay"
    cat "$WORK/40-mouth-to-ear.md"
    echo
    echo "## Echo, drift, speech quality and calls on the rig"
    echo
    cat "$WORK/50-suite.md"
    cat docs/benchmarks-notes.md
} >"$WORK/out.md"

# Every section must be there, with figures (a measurement that rots shows up here first).
missing=0
for heading in "CPU per 10 ms frame" "Swift chain / bare C" "intercomd vs speexdsp" "Mouth-to-ear delay" "stage by stage" \
               "ERLE over time" "Steady delay while someone talks" "Live again after a 1 s stall" "Clock drift" "Howling" "Speech quality through loss" "1:n: the caller" "key → tone, online" "Side by side with trx" "Call set-up with keys agreed per call" "Revocation under terminal keys"; do
    grep -q "$heading" "$WORK/out.md" || { echo "bench-suite: no \"$heading\" in the report" >&2; missing=1; }
done
grep -q "^| intercomd | both ways | defaults" "$WORK/out.md" || { echo "bench-suite: no intercomd row in the side-by-side table" >&2; missing=1; }
if grep -niE '\| *(nan|-?inf)( |\|)' "$WORK/out.md" >&2; then echo "bench-suite: figures that are not numbers (above)" >&2; missing=1; fi
[[ $missing == 0 ]] || exit 1
cp "$WORK/out.md" "$OUT"
step "wrote $OUT"
