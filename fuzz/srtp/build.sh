#!/bin/sh
# Builds the SRTP receive fuzzer (libFuzzer + AddressSanitizer) into .build-fuzz/srtp-fuzzer:
# our libsrtp2 wrapper and the RTP parser compiled with fuzz/srtp/main.swift, linked to Debian's
# libsrtp2 (not instrumented: coverage guides through our side; ASan still checks what it touches).
# Usage: fuzz/srtp/build.sh [run [libFuzzer options...]], e.g. fuzz/srtp/build.sh run -max_total_time=60
set -eu
cd "$(dirname "$0")/../.."
mkdir -p .build-fuzz/srtp-corpus
swiftc -sanitize=fuzzer,address -parse-as-library -swift-version 6 -g -use-ld=lld \
    -I Sources/CSRTP -lsrtp2 -module-name SRTPFuzz \
    Sources/Transport/SRTP.swift Sources/RTP/RTP.swift fuzz/srtp/main.swift -o .build-fuzz/srtp-fuzzer
echo "built .build-fuzz/srtp-fuzzer"
if [ "${1:-}" = run ]; then
    shift
    # Seeds: an Opus RTP packet to protect (odd first byte), and the same bytes as a forged datagram.
    printf '\001\200\140\022\064\000\001\342\100\001\002\003\004\170\013\344\001\002\003' > .build-fuzz/srtp-corpus/seed-protect
    printf '\000\200\140\022\064\000\001\342\100\001\002\003\004\170\013\344\001\002\003\001\002\003\004\005\006\007\010\011\012' \
        > .build-fuzz/srtp-corpus/seed-forged
    exec .build-fuzz/srtp-fuzzer -max_len=2048 "$@" .build-fuzz/srtp-corpus
fi
