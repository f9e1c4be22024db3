#!/usr/bin/env bash
# Runs CMD while a host's stalls are emulated (scripts/host-stalls.c): a core taken away for
# 15-60 ms about every 250 ms, as on the CI machines. For finding verdicts that a stalling
# machine breaks, before CI does: a test that fails here must repeat its attempt for the proof
# it gets (MachineStalls, xruns), or measure what the machine cannot spoil.
# Usage: scripts/host-stalls.sh [--every-ms N] [--min-ms N] [--max-ms N] -- CMD [ARGS...]
set -euo pipefail
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
every=250 lo=15 hi=60
while [[ $# -gt 0 && $1 != -- ]]; do
    case $1 in
        --every-ms) every=$2; shift 2 ;;
        --min-ms) lo=$2; shift 2 ;;
        --max-ms) hi=$2; shift 2 ;;
        *) echo "host-stalls: unknown option $1" >&2; exit 2 ;;
    esac
done
[[ ${1:-} == -- ]] || { echo "usage: scripts/host-stalls.sh [--every-ms N] [--min-ms N] [--max-ms N] -- CMD [ARGS...]" >&2; exit 2; }
shift
bin=${TMPDIR:-/tmp}/intercom-host-stalls
if [[ ! -x $bin || $REPO_ROOT/scripts/host-stalls.c -nt $bin ]]; then
    cc -O2 -Wall -o "$bin" "$REPO_ROOT/scripts/host-stalls.c"
fi
"$bin" 86400 "$every" "$lo" "$hi" &
stalls=$!
trap 'kill $stalls 2>/dev/null || true' EXIT INT TERM HUP
status=0
"$@" || status=$?
kill -INT $stalls 2>/dev/null || true
exit $status
