#!/bin/sh
# Builds the signalling decoder fuzzer (libFuzzer + AddressSanitizer) into .build-fuzz/signal-fuzzer.
# Meant to be run from the repository root (works from anywhere: it changes there first).
# Usage: fuzz/signal/build.sh [run [libFuzzer options...]], e.g. fuzz/signal/build.sh run -max_total_time=60
set -eu
cd "$(dirname "$0")/../.."
# Calls names addresses with Posix's IPv4Endpoint (a file of its own, Glibc only): the sources are
# copied into one folder without the import, as in fuzz/control.
src=.build-fuzz/signal-src
rm -rf "$src"; mkdir -p "$src" .build-fuzz/signal-corpus
for f in Sources/Calls/*.swift Sources/Posix/IPv4Endpoint.swift; do
    sed -e '/^import Posix$/d' "$f" > "$src/$(basename "$(dirname "$f")")-$(basename "$f")"
done
swiftc -sanitize=fuzzer,address -parse-as-library -swift-version 6 -g -use-ld=lld \
    -module-name SignalFuzz "$src"/*.swift fuzz/signal/main.swift -o .build-fuzz/signal-fuzzer
echo "built .build-fuzz/signal-fuzzer"
if [ "${1:-}" = run ]; then
    shift
    # Seeds: an end and a unicast invite, so libFuzzer starts from the accepted paths.
    printf 'IC\001\004\000\000\000\000\001\001a\000\000\000\000\000\000\000\005' > .build-fuzz/signal-corpus/seed-end
    printf 'IC\001\001\000\000\000\000\001\001a\000\000\000\000\000\000\000\005\001\001b\012\000\000\001\023\214\000\000' \
        > .build-fuzz/signal-corpus/seed-invite
    # An accept carrying its sender's media key (flag 2, 30 bytes after the port).
    { printf 'IC\001\002\002\000\000\000\001\001a\000\000\000\000\000\000\000\005\023\214'
      printf '%030d' 0; } > .build-fuzz/signal-corpus/seed-accept-keyed
    exec .build-fuzz/signal-fuzzer -max_len=2048 "$@" .build-fuzz/signal-corpus
fi
