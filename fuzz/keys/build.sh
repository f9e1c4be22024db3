#!/bin/sh
# Builds the key input fuzzer (libFuzzer + AddressSanitizer) into .build-fuzz/keys-fuzzer.
# The parser spans two modules (Calls, Keys) and Posix's IPv4Endpoint: their sources are copied into one folder without the
# import between them, as in fuzz/control.
# Usage: fuzz/keys/build.sh [run [libFuzzer options...]], e.g. fuzz/keys/build.sh run -max_total_time=60
set -eu
cd "$(dirname "$0")/../.."
src=.build-fuzz/keys-src
rm -rf "$src"; mkdir -p "$src" .build-fuzz/keys-corpus
for f in Sources/Calls/*.swift Sources/Posix/IPv4Endpoint.swift Sources/Posix/DurationUnits.swift Sources/Keys/InputEvent.swift \
         Sources/Keys/KeyAction.swift Sources/Keys/KeyFilter.swift Sources/Keys/KeyTiming.swift Sources/Keys/KeyMap.swift; do
    sed -e '/^import Calls$/d' -e '/^import Posix$/d' "$f" > "$src/$(basename "$(dirname "$f")")-$(basename "$f")"
done
swiftc -sanitize=fuzzer,address -parse-as-library -swift-version 6 -g -use-ld=lld \
    -module-name KeysFuzz "$src"/*.swift fuzz/keys/main.swift -o .build-fuzz/keys-fuzzer
echo "built .build-fuzz/keys-fuzzer"
if [ "${1:-}" = run ]; then
    shift
    printf '\001KEY_F1=call:empfang\nBTN_0=hang_up\n' > .build-fuzz/keys-corpus/seed-map
    # A press of KEY_F1 (code 59): 16 bytes of time, type 1, code 59, value 1.
    printf '\024\001\000\000\000\000\000\000\000\002\000\000\000\000\000\000\000\001\000\073\000\001\000\000\000' > .build-fuzz/keys-corpus/seed-press
    exec .build-fuzz/keys-fuzzer -max_len=1024 "$@" .build-fuzz/keys-corpus
fi
