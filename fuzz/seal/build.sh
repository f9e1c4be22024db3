#!/bin/sh
# Builds the terminal seal fuzzer (libFuzzer + AddressSanitizer) into .build-fuzz/seal-fuzzer:
# session announcements and datagrams sealed per pair of terminals (SiteSecurity/TerminalSeal).
# It needs SwiftPM (swift-crypto): the package's seal-fuzz target, built with FUZZING defined in
# the configuration fuzzer's build folder (the two share every module but their own; never both
# at once).
# Usage: fuzz/seal/build.sh [run [libFuzzer options...]], e.g. fuzz/seal/build.sh run -max_total_time=60
set -eu
cd "$(dirname "$0")/../.."
. fuzz/swiftpm-build.sh
build_swiftpm_fuzzer seal
if [ "${1:-}" = run ]; then
    shift
    # Seeds: an announcement's and a sealed datagram's framing ("IA" version 2, "IS" version 3, room "a").
    printf 'IA\002\001a' > .build-fuzz/seal-corpus/seed-announcement
    printf 'IS\003\001a\000\000\000\001\000\000\000\002\000\000\000\000\000\000\000\001' > .build-fuzz/seal-corpus/seed-sealed
    exec .build-fuzz/seal-fuzzer -max_len=2048 "$@" .build-fuzz/seal-corpus
fi
