#!/bin/sh
# Builds the configuration fuzzer (libFuzzer + AddressSanitizer) into .build-fuzz/config-fuzzer.
# It needs SwiftPM (TOMLKit wraps the C++ toml++): the package's config-fuzz target, built with
# FUZZING defined and every Swift module instrumented, in its own build folder.
# Usage: fuzz/config/build.sh [run [libFuzzer options...]], e.g. fuzz/config/build.sh run -max_total_time=60
set -eu
cd "$(dirname "$0")/../.."
. fuzz/swiftpm-build.sh
build_swiftpm_fuzzer config
if [ "${1:-}" = run ]; then
    shift
    # Seeds: the shipped example, a room with calls, buttons and keys, and a site document.
    cp config/intercomd.example.toml .build-fuzz/config-corpus/seed-example
    printf '[room]\nid = "empfang"\n[rooms.empfang]\naddress = "10.0.0.1"\n[rooms.labor]\naddress = "10.0.0.2"\nmay_call = ["empfang"]\n[buttons.alle]\nrooms = ["labor"]\n[keys]\ndevice = "/dev/input/event0"\n[keys.map]\nKEY_F1 = "call:alle"\nKEY_ESC = "hang_up"\n[audio]\nperiod_ms = 5\n' \
        > .build-fuzz/config-corpus/seed-calls
    # A site document with a kind and a terminal's own entry (SiteDocument.parse reads every input too).
    printf '[site]\nname = "P"\n[rooms.empfang]\naddress = "10.0.0.1"\n[rooms.labor]\naddress = "10.0.0.2"\n[buttons.empfang]\nrooms = ["empfang"]\n[keys.map]\nKEY_F1 = "call:empfang"\n[kinds.wall.calls]\nring_ms = 900\n[terminals.labor]\nkind = "wall"\n[terminals.labor.keys]\ndebounce_ms = 40\n' \
        > .build-fuzz/config-corpus/seed-site
    # Leak detection off: TOMLKit 0.6.0 mallocs key lists and numbers in its C++ glue and never
    # frees them (LebJe/TOMLKit#26, open), about 15 KB per parse of the example configuration.
    # The daemon parses at start and on each reload only, so the leak is bounded by reloads.
    ASAN_OPTIONS="${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}detect_leaks=0" exec .build-fuzz/config-fuzzer -max_len=4096 -detect_leaks=0 "$@" .build-fuzz/config-corpus
fi
