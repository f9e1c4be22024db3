#!/bin/sh
# Builds the site document transfer fuzzer (libFuzzer + AddressSanitizer) into .build-fuzz/transfer-fuzzer.
# Meant to be run from the repository root (works from anywhere: it changes there first).
# Usage: fuzz/transfer/build.sh [run [libFuzzer options...]], e.g. fuzz/transfer/build.sh run -max_total_time=60
set -eu
cd "$(dirname "$0")/../.."
# SiteTransfer.swift alone, without its import of SiteSecurity (swift-crypto, not for bare
# swiftc): the one constant it reads from there comes from fuzz/transfer/limits.swift.
src=.build-fuzz/transfer-src
rm -rf "$src"; mkdir -p "$src" .build-fuzz/transfer-corpus
sed -e '/^import SiteSecurity$/d' Sources/Site/SiteTransfer.swift > "$src/SiteTransfer.swift"
swiftc -sanitize=fuzzer,address -parse-as-library -swift-version 6 -g -use-ld=lld \
    -module-name TransferFuzz "$src"/*.swift fuzz/transfer/limits.swift fuzz/transfer/main.swift -o .build-fuzz/transfer-fuzzer
echo "built .build-fuzz/transfer-fuzzer"
if [ "${1:-}" = run ]; then
    shift
    # Seeds: a get, an offer of a small document, a refusal, an enrolment request and its reply.
    printf 'ICSD\001\001\006praxis' > .build-fuzz/transfer-corpus/seed-get
    printf 'ICSD\001\003\006praxis' > .build-fuzz/transfer-corpus/seed-enrolment
    printf 'ICSD\001\010\000\000\000\002{}' > .build-fuzz/transfer-corpus/seed-enrolment-reply
    printf 'ICSD\001\002\001p\000\000\000\003abc' > .build-fuzz/transfer-corpus/seed-offer
    printf 'ICSD\001\005\005older' > .build-fuzz/transfer-corpus/seed-refused
    exec .build-fuzz/transfer-fuzzer -max_len=4096 "$@" .build-fuzz/transfer-corpus
fi
