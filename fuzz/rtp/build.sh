#!/bin/sh
# Builds the RTP parser fuzzer (libFuzzer + AddressSanitizer) into .build-fuzz/rtp-fuzzer.
# Meant to be run from the repository root (works from anywhere: it changes there first).
# Usage: fuzz/rtp/build.sh [run [libFuzzer options...]], e.g. fuzz/rtp/build.sh run -max_total_time=60
# lld (shipped with the Swift toolchain) links ASan without gold's flood of warnings.
set -eu
cd "$(dirname "$0")/../.."
mkdir -p .build-fuzz/rtp-corpus
swiftc -sanitize=fuzzer,address -parse-as-library -swift-version 6 -g -use-ld=lld \
    -module-name RTPFuzz Sources/RTP/RTP.swift Sources/Codec/OpusPacket.swift fuzz/rtp/main.swift -o .build-fuzz/rtp-fuzzer
echo "built .build-fuzz/rtp-fuzzer"
if [ "${1:-}" = run ]; then
    shift
    # Seed the corpus with one valid Opus packet so libFuzzer starts from the accepted path.
    printf '\200\340\022\064\000\001\342\100\336\255\276\357\170\013\344' > .build-fuzz/rtp-corpus/seed-opus
    exec .build-fuzz/rtp-fuzzer -max_len=2048 "$@" .build-fuzz/rtp-corpus
fi
